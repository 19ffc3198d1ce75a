"""Heads witnessed outside the database: an owner's device key countersigns a signed head.

The server's signed heads pin history against whoever writes the database but lacks the
server key. A witness pins it against whoever holds both: the owner's browser, after it
verified the room's chain itself, signs the latest server-signed head it verified with the
owner's device key (``ledger.chain.witness_signed_bytes``). Every verifier then takes a
witnessed head as a checkpoint history must extend, and requires the server head it names.

The ledger knows nothing of owners or keys (it is the floor of the house): the caller
(``rooms.ledger_api``) resolves the owner's registered, unrevoked device key and hands its
public half in; this module checks the signature and the head, and stores the witness.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from uuid import UUID

from django.db import IntegrityError, transaction
from django.utils import timezone
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from ledger.chain import witness_signed_bytes
from ledger.models import HeadWitness, SignedHead
from ledger.services import LedgerError


class WitnessRefused(LedgerError):
    """The witness was not stored; ``code`` says why (for the API's error body)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass(frozen=True)
class WitnessClaim:
    """What an owner's browser submits: the head it verified and its signature over it."""

    seq: int
    hash: str
    signed_at: str
    signature: bytes


def signature_decode(text: str) -> bytes:
    """A base64 or base64url signature (the browser sends base64url without padding)."""
    cleaned = text.strip().replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(cleaned + "=" * (-len(cleaned) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise WitnessRefused("witness_malformed", "The signature is not base64.") from None


def witness_valid(witness: HeadWitness) -> bool:
    """Whether the stored witness is a valid signature by its stored key over its own fields
    (a row edited in the database, any field, fails)."""
    try:
        message = witness_signed_bytes(
            room_id=witness.room_id, seq=witness.seq, head_hash=witness.hash,
            signed_at=witness.signed_at, owner_id=witness.owner_id, key_id=witness.key_id,
        )  # fmt: skip
        VerifyKey(base64.b64decode(witness.public_key, validate=True)).verify(
            message, base64.b64decode(witness.signature, validate=True)
        )
    except (BadSignatureError, ValueError, TypeError):
        return False
    return True


def ledger_witness_record(
    *, room_id: UUID, owner_id: str, key_id: str, public_key: bytes, claim: WitnessClaim
) -> tuple[HeadWitness, bool]:
    """Store an owner's countersignature of one of this room's signed heads.

    ``public_key`` is the raw Ed25519 key of the owner's registered, unrevoked device key
    ``key_id`` (the caller checked that). Refuses (``WitnessRefused``) a signature that does
    not verify under that key over exactly this room, head, owner and key, and a head that
    is not one of this room's server-signed heads (seq, hash and signing time all equal).
    A replay of a stored witness stores nothing: returns ``(witness, created)``.
    """
    if len(public_key) != 32:
        raise WitnessRefused("witness_key_unusable", "That device key cannot sign.")
    message = witness_signed_bytes(
        room_id=room_id, seq=claim.seq, head_hash=claim.hash, signed_at=claim.signed_at,
        owner_id=owner_id, key_id=key_id,
    )  # fmt: skip
    try:
        VerifyKey(public_key).verify(message, claim.signature)
    except (BadSignatureError, ValueError, TypeError):
        raise WitnessRefused(
            "witness_bad_signature",
            "The signature does not check out with your device key for this room's record.",
        ) from None
    if not SignedHead.objects.filter(
        room_id=room_id, seq=claim.seq, hash=claim.hash, signed_at=claim.signed_at
    ).exists():
        raise WitnessRefused(
            "witness_unknown_head", "That is not a point of this room's record the server signed."
        )
    fields = {
        "hash": claim.hash,
        "signed_at": claim.signed_at,
        "owner_id": owner_id,
        "public_key": base64.b64encode(public_key).decode(),
        "signature": base64.b64encode(claim.signature).decode(),
    }
    try:
        with transaction.atomic():
            return HeadWitness.objects.create(
                room_id=room_id, seq=claim.seq, key_id=key_id, witnessed_at=timezone.now(),
                **fields,
            ), True  # fmt: skip
    except IntegrityError:
        # The same key already witnessed this head: Ed25519 is deterministic, so a genuine
        # replay is the same row; anything else under that (room, key, seq) is refused.
        stored = HeadWitness.objects.get(room_id=room_id, key_id=key_id, seq=claim.seq)
        if all(getattr(stored, name) == value for name, value in fields.items()):
            return stored, False
        raise WitnessRefused(
            "witness_conflict", "This device key already confirmed that point differently."
        ) from None


def ledger_witnesses(*, room_id: UUID) -> list[HeadWitness]:
    """The room's witnesses, in head order."""
    return list(HeadWitness.objects.filter(room_id=room_id).order_by("seq", "id"))

"""Recompute stored chains and report the first bad sequence number per room.

Streams events with ``QuerySet.iterator(chunk_size=…)``, so memory stays flat however long a
chain is. Besides each event's hash and link, it checks the room's head row (a deleted tail
shows up as a head the chain does not reach), the retention checkpoint, and every signed
head (its signature under the key it names, and that the chain still holds that seq and hash).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from dataclasses import replace
from uuid import UUID

from django.db.models import Subquery
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from ledger.chain import (
    GENESIS_HASH,
    ChainEvent,
    ChainVerdict,
    HeadClaim,
    chain_check,
    head_signed_bytes,
    occurred_at_text,
)
from ledger.models import LedgerEvent, LedgerHead, SignedHead
from ledger.signing import ledger_trusted_public_keys

CHUNK_SIZE = 2000


def _stored_events(room_id: UUID, *, through_seq: int) -> Iterator[ChainEvent]:
    rows = (
        LedgerEvent.objects.filter(room_id=room_id, seq__lte=through_seq)
        .order_by("seq")
        .values_list("room_id", "seq", "kind", "occurred_at", "data", "prev_hash", "hash")
    )
    for rid, seq, kind, occurred_at, data, prev_hash, digest in rows.iterator(
        chunk_size=CHUNK_SIZE
    ):
        yield ChainEvent(
            str(rid), seq, kind, occurred_at_text(occurred_at), data, prev_hash, digest
        )


def signed_head_valid(head: SignedHead) -> bool:
    """Whether ``head.signature`` is a valid Ed25519 signature by ``head.public_key``."""
    try:
        VerifyKey(base64.b64decode(head.public_key, validate=True)).verify(
            head_signed_bytes(
                room_id=head.room_id, seq=head.seq, head_hash=head.hash, signed_at=head.signed_at
            ),
            base64.b64decode(head.signature, validate=True),
        )
    except (BadSignatureError, ValueError, TypeError):
        return False
    return True


def ledger_verify_room(*, room_id: UUID) -> ChainVerdict:
    """Verify one room's chain against its head row, checkpoint and signed heads."""
    head = LedgerHead.objects.filter(room_id=room_id).first()
    rid = str(room_id)
    claims: list[HeadClaim] = []
    trusted = ledger_trusted_public_keys()
    for signed in SignedHead.objects.filter(room_id=room_id).order_by("seq", "id"):
        if trusted and signed.public_key not in trusted:
            return ChainVerdict(
                rid, False, 0, 0, GENESIS_HASH, signed.seq,
                f"signed head #{signed.id} is signed by a key this server does not trust",
            )  # fmt: skip
        if not signed_head_valid(signed):
            return ChainVerdict(
                rid, False, 0, 0, GENESIS_HASH, signed.seq,
                f"signed head #{signed.id} has an invalid signature",
            )  # fmt: skip
        claims.append(HeadClaim(signed.seq, signed.hash, f"signed head #{signed.id}"))
    if head is None:
        if LedgerEvent.objects.filter(room_id=room_id).exists() or claims:
            return ChainVerdict(rid, False, 0, 0, GENESIS_HASH, 1, "the room has no head row")
        return ChainVerdict(rid, True, 0, 0, GENESIS_HASH)
    verdict = chain_check(
        room_id=rid,
        events=_stored_events(room_id, through_seq=head.seq),
        checkpoint_seq=head.checkpoint_seq,
        checkpoint_hash=head.checkpoint_hash,
        claims=claims,
        tip=HeadClaim(head.seq, head.hash, "the head row"),
    )
    if not verdict.ok:
        return verdict
    # The chain was read up to the head row as it stood when verification began; events a live
    # room appended since then are not a fault. A row beyond the head as it stands *now* is:
    # one statement compares them, so an append cannot slip in between the two reads.
    stray = (
        LedgerEvent.objects.filter(
            room_id=room_id,
            seq__gt=Subquery(LedgerHead.objects.filter(room_id=room_id).values("seq")[:1]),
        )
        .order_by("seq")
        .values_list("seq", flat=True)
        .first()
    )
    if stray is not None:
        return replace(
            verdict,
            ok=False,
            first_bad_seq=stray,
            problem=f"event {stray} lies beyond the head row",
        )
    return verdict


def ledger_room_ids() -> list[UUID]:
    """Every room the ledger knows: with a head row, events, or signed heads."""
    ids = set(LedgerHead.objects.values_list("room_id", flat=True))
    ids.update(LedgerEvent.objects.values_list("room_id", flat=True).distinct())
    ids.update(SignedHead.objects.values_list("room_id", flat=True).distinct())
    return sorted(ids, key=str)


def ledger_verify_all(
    *, on_room: Callable[[int, int, ChainVerdict], None] | None = None
) -> list[ChainVerdict]:
    """Verify every room; returns the failing rooms' verdicts. ``on_room(i, total, verdict)``
    is called after each room (progress)."""
    failures: list[ChainVerdict] = []
    room_ids = ledger_room_ids()
    for index, room_id in enumerate(room_ids, start=1):
        verdict = ledger_verify_room(room_id=room_id)
        if not verdict.ok:
            failures.append(verdict)
        if on_room is not None:
            on_room(index, len(room_ids), verdict)
    return failures

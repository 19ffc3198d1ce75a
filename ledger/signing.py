"""The server's Ed25519 ledger key: signs room heads so history cannot be quietly cut back.

Production reads the key from ``SYNAPSIA_LEDGER_SIGNING_KEY`` (base64 of a 32-byte seed) and
refuses to sign without it. The embedded profile generates one on first use and keeps it in
``var/`` (mode 0600), so a laptop needs no setup.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import os
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone
from nacl.signing import SigningKey

from ledger.chain import (
    HEAD_SIGNATURE_PREFIX,
    WITNESS_SIGNATURE_PREFIX,
    HeadPolicy,
    head_signed_bytes,
    occurred_at_text,
)
from ledger.models import LedgerEvent, LedgerHead, SignedHead
from ledger.services import LedgerError, ledger_head_locked


class LedgerSigningUnavailable(LedgerError):
    """No server signing key is configured (production without SYNAPSIA_LEDGER_SIGNING_KEY)."""


def _seed_decode(text: str, *, source: str) -> bytes:
    try:
        seed = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise LedgerSigningUnavailable(f"{source} is not valid base64") from None
    if len(seed) != 32:
        raise LedgerSigningUnavailable(f"{source} must decode to 32 bytes (got {len(seed)})")
    return seed


def _embedded_seed(path: Path) -> bytes:
    """Read the embedded profile's key, creating it (0600, never overwritten) on first use."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _seed_decode(path.read_text(), source=str(path))
    with os.fdopen(fd, "w") as handle:
        handle.write(base64.b64encode(os.urandom(32)).decode() + "\n")
    return _seed_decode(path.read_text(), source=str(path))


@functools.cache
def _signing_key() -> SigningKey:
    configured: str = settings.SYNAPSIA["LEDGER_SIGNING_KEY"]
    if configured:
        return SigningKey(_seed_decode(configured, source="SYNAPSIA_LEDGER_SIGNING_KEY"))
    if settings.PROFILE != "embedded":
        raise LedgerSigningUnavailable(
            "The production profile signs ledger heads with SYNAPSIA_LEDGER_SIGNING_KEY: set it "
            'to base64 of 32 random bytes (python -c "import base64, os; '
            'print(base64.b64encode(os.urandom(32)).decode())") and keep it secret.'
        )
    return SigningKey(_embedded_seed(Path(settings.SYNAPSIA["LEDGER_SIGNING_KEY_PATH"])))


def ledger_public_key() -> str:
    """The server's current head-signing public key, base64 (raises if none is configured)."""
    return base64.b64encode(bytes(_signing_key().verify_key)).decode()


# A signature over other bytes needs its own domain prefix: "synapsia-<what>-v<n>\n".
_DOMAIN_PREFIX = re.compile(rb"^synapsia-[a-z0-9-]{1,64}-v[0-9]{1,4}\n$")
_RESERVED_PREFIXES = frozenset({HEAD_SIGNATURE_PREFIX, WITNESS_SIGNATURE_PREFIX})


@dataclass(frozen=True)
class ServerSignature:
    """An Ed25519 signature by the server's ledger key over ``prefix + message`` (base64)."""

    public_key: str
    signature: str


def ledger_sign_document(*, prefix: bytes, message: bytes) -> ServerSignature:
    """Sign ``prefix + message`` with the server's ledger key (a project package's manifest).

    ``prefix`` is the document's own domain separator (``synapsia-<what>-v<n>\n``): never a
    ledger head's or a witness's, so nothing signed here can pass for a signed head. Raises
    ``ValueError`` for a reserved or malformed prefix, ``LedgerSigningUnavailable`` where
    the server has no key."""
    if prefix in _RESERVED_PREFIXES or not _DOMAIN_PREFIX.match(prefix):
        raise ValueError("a document signature needs its own synapsia-<what>-v<n> prefix")
    key = _signing_key()
    return ServerSignature(
        public_key=base64.b64encode(bytes(key.verify_key)).decode(),
        signature=base64.b64encode(key.sign(prefix + message).signature).decode(),
    )


def ledger_key_id(public_key_b64: str) -> str:
    """A short fingerprint: the first 16 hex digits of SHA-256 over the raw public key."""
    return hashlib.sha256(base64.b64decode(public_key_b64)).hexdigest()[:16]


def ledger_trusted_public_keys() -> frozenset[str]:
    """Keys whose signed heads verification accepts: the current one and any retired ones
    listed in ``SYNAPSIA_LEDGER_RETIRED_PUBLIC_KEYS``. Empty when no key is configured."""
    retired = frozenset(settings.SYNAPSIA["LEDGER_RETIRED_PUBLIC_KEYS"])
    try:
        return retired | {ledger_public_key()}
    except LedgerSigningUnavailable:
        return retired


def ledger_head_policy() -> HeadPolicy:
    """The promises verification holds the chain to (settings; docs/ledger.md)."""
    conf = settings.SYNAPSIA
    every_seconds = int(conf.get("LEDGER_HEAD_EVERY_SECONDS", 3600))
    return HeadPolicy(
        every_events=int(conf.get("LEDGER_HEAD_EVERY_EVENTS", 64)),
        retention_days=int(conf["LEDGER_RETENTION_DAYS"]),
        grace_seconds=every_seconds + int(conf.get("LEDGER_HEAD_GRACE_SECONDS", 3600)),
        every_seconds=every_seconds,
    )


def ledger_policy_stated() -> dict[str, int]:
    """The policy as the API and the export state it, for the browser and offline checks."""
    policy = ledger_head_policy()
    return {
        "retention_days": policy.retention_days,
        "head_every_events": policy.every_events,
        "head_grace_seconds": policy.grace_seconds,
        "head_every_seconds": policy.every_seconds,
    }


def sign_locked_head(*, room_id: UUID, seq: int, head_hash: str, fresh: bool = False) -> SignedHead:
    """Sign ``(seq, head_hash)``, the tip of a head row the caller holds locked. Signing the
    same tip twice stores one head; ``fresh`` (the append path: a tip just written cannot
    have been signed) skips that look-up, so the append costs one statement, the INSERT."""
    if not fresh:
        latest = SignedHead.objects.filter(room_id=room_id).order_by("-seq", "-id").first()
        if latest is not None and (latest.seq, latest.hash) == (seq, head_hash):
            return latest
    signed = signed_head_build(
        room_id=room_id, seq=seq, head_hash=head_hash, signed_at=occurred_at_text(timezone.now())
    )
    signed.save(force_insert=True)
    return signed


def signed_head_build(*, room_id: UUID, seq: int, head_hash: str, signed_at: str) -> SignedHead:
    """The server's signature over ``(room, seq, hash, signed_at)``, not yet stored (the
    append path stores it at once; the ledger bench stores many in one statement)."""
    key = _signing_key()
    signature = key.sign(
        head_signed_bytes(room_id=room_id, seq=seq, head_hash=head_hash, signed_at=signed_at)
    ).signature
    return SignedHead(
        room_id=room_id,
        seq=seq,
        hash=head_hash,
        signed_at=signed_at,
        public_key=base64.b64encode(bytes(key.verify_key)).decode(),
        signature=base64.b64encode(signature).decode(),
    )


def ledger_sign_head(*, room_id: UUID) -> SignedHead:
    """Sign and store the room's current head (seq, hash). Call on pause and close.

    Runs in its own atomic block (or the caller's) with the head row locked, so the signed
    pair is exactly the chain's tip. A room with no events signs ``(0, GENESIS_HASH)``.
    Raises ``LedgerSigningUnavailable`` when production has no key.
    """
    _signing_key()  # raises before anything is locked when there is no key
    with transaction.atomic():
        head = ledger_head_locked(room_id)
        return sign_locked_head(room_id=room_id, seq=head.seq, head_hash=head.hash)


def ledger_sign_stale_heads(*, now: datetime | None = None) -> int:
    """Sign the tip of every room whose oldest unsigned event is older than half of T
    (``LEDGER_HEAD_EVERY_SECONDS``). The beat runs this at least every T/2 (settings: every
    15 minutes), so every event is under a signed head within T of being recorded: a purge
    ninety days on can be checked against it, and a verifier that finds an unsigned tail
    older than T plus the grace knows heads were removed. Returns how many heads were signed."""
    seconds = int(settings.SYNAPSIA.get("LEDGER_HEAD_EVERY_SECONDS", 3600))
    cutoff = (now or timezone.now()) - timedelta(seconds=seconds / 2)
    signed_through = dict(
        SignedHead.objects.values("room_id").annotate(top=Max("seq")).values_list("room_id", "top")
    )
    signed = 0
    for room_id, seq in LedgerHead.objects.filter(seq__gt=0).values_list("room_id", "seq"):
        through = signed_through.get(room_id, 0)
        if seq <= through:
            continue
        if LedgerEvent.objects.filter(
            room_id=room_id, seq__gt=through, occurred_at__lte=cutoff
        ).exists():
            ledger_sign_head(room_id=room_id)
            signed += 1
    return signed

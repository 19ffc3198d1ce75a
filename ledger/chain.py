"""The hash chain itself: encoding, hashing and checking, as pure functions (no Django).

The one place that defines what a ledger hash is. ``ledger.services`` uses it to append,
``ledger.verification`` to recompute; ``docs/ledger.md`` specifies the same encoding for
independent implementations (``ledger/verify_export.py`` and the browser's ``ledger.js``).

    hash = lowercase hex of SHA-256( RFC 8785 canonical JSON of
               {"room_id", "seq", "kind", "occurred_at", "data", "prev_hash"} )

``occurred_at`` is a fixed-format UTC string (``2026-01-02T03:04:05.123456Z``), never a float;
``prev_hash`` is the previous event's hash: ``GENESIS_HASH`` for event 1, and after a retention
purge the checkpoint's hash for the first event that remains.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import rfc8785

GENESIS_HASH = "0" * 64
# Domain separation: these bytes can never be mistaken for another signed Synapsia payload.
HEAD_SIGNATURE_PREFIX = b"synapsia-ledger-head-v1\n"
# An event's canonical form is small metadata; anything bigger is a bug or an attempt.
MAX_CANONICAL_BYTES = 4096


def occurred_at_text(moment: datetime) -> str:
    """The chain's timestamp form: UTC, microseconds, ``Z`` (so all implementations agree)."""
    if moment.tzinfo is None:
        raise ValueError("ledger timestamps must be timezone-aware")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event_canonical_bytes(
    *,
    room_id: UUID | str,
    seq: int,
    kind: str,
    occurred_at: str,
    data: Mapping[str, Any],
    prev_hash: str,
) -> bytes:
    """RFC 8785 bytes of the hashed envelope (raises ``rfc8785.CanonicalizationError``)."""
    return rfc8785.dumps(
        {
            "room_id": str(room_id),
            "seq": seq,
            "kind": kind,
            "occurred_at": occurred_at,
            "data": dict(data),
            "prev_hash": prev_hash,
        }
    )


def event_hash(
    *,
    room_id: UUID | str,
    seq: int,
    kind: str,
    occurred_at: str,
    data: Mapping[str, Any],
    prev_hash: str,
) -> str:
    """Lowercase hex SHA-256 of the event's canonical bytes."""
    return (
        hashlib.sha256(
            event_canonical_bytes(
                room_id=room_id,
                seq=seq,
                kind=kind,
                occurred_at=occurred_at,
                data=data,
                prev_hash=prev_hash,
            )
        )
        .digest()
        .hex()
    )


def head_signed_bytes(*, room_id: UUID | str, seq: int, head_hash: str, signed_at: str) -> bytes:
    """What the server signs for a room's head: the domain prefix + RFC 8785 JSON."""
    return HEAD_SIGNATURE_PREFIX + rfc8785.dumps(
        {"room_id": str(room_id), "seq": seq, "hash": head_hash, "signed_at": signed_at}
    )


@dataclass(frozen=True)
class ChainEvent:
    """An event as stored: what verification reads back."""

    room_id: str
    seq: int
    kind: str
    occurred_at: str
    data: Mapping[str, Any]
    prev_hash: str
    hash: str


@dataclass(frozen=True)
class HeadClaim:
    """A (seq, hash) the chain must contain: the head row, or a signed head."""

    seq: int
    hash: str
    source: str  # "head row", "signed head #3", ...


@dataclass(frozen=True)
class ChainVerdict:
    room_id: str
    ok: bool
    events_checked: int
    last_seq: int
    last_hash: str
    first_bad_seq: int | None = None
    problem: str = ""


def chain_check(
    *,
    room_id: str,
    events: Iterable[ChainEvent],
    checkpoint_seq: int = 0,
    checkpoint_hash: str = GENESIS_HASH,
    claims: Iterable[HeadClaim] = (),
    tip: HeadClaim | None = None,
) -> ChainVerdict:
    """Recompute a room's chain (events in ``seq`` order) and find the first bad number.

    Streams: holds one event at a time, plus the claims. Checks, in chain order: every event
    belongs to the room, numbers run without gaps from ``checkpoint_seq + 1``, each
    ``prev_hash`` is the hash before it, each stored hash is the recomputed one, the latest
    ``retention_purge`` event names the checkpoint, and every claim (head row, signed heads)
    is an event of this chain with that hash. ``tip`` (the head row) must be the last event:
    rows added beyond it are as wrong as rows missing before it. Stops at the first problem.
    """
    expected_seq, expected_prev = checkpoint_seq + 1, checkpoint_hash
    checked = 0
    by_seq: dict[int, list[HeadClaim]] = {}
    for claim in claims:
        by_seq.setdefault(claim.seq, []).append(claim)
    last_purge: tuple[int, Any, Any] | None = None

    def bad(seq: int, problem: str) -> ChainVerdict:
        return ChainVerdict(room_id, False, checked, expected_seq - 1, expected_prev, seq, problem)

    # A claim at the checkpoint itself can still be compared with the checkpoint hash.
    if tip is not None:
        by_seq.setdefault(tip.seq, []).append(tip)
    for claim in by_seq.get(checkpoint_seq, []):
        if claim.hash != checkpoint_hash:
            return bad(checkpoint_seq + 1, f"{claim.source} does not match the checkpoint")
    for event in events:
        if event.room_id != room_id:
            return bad(event.seq, f"event numbered {event.seq} belongs to another room")
        if event.seq != expected_seq:
            if event.seq > expected_seq:
                return bad(expected_seq, f"event {expected_seq} is missing")
            return bad(
                expected_seq, f"event {event.seq} appears again where {expected_seq} was expected"
            )
        if not isinstance(event.data, Mapping):
            return bad(event.seq, "event data is not an object")
        if event.prev_hash != expected_prev:
            return bad(event.seq, "prev_hash does not match the event before it")
        try:
            recomputed = event_hash(
                room_id=room_id,
                seq=event.seq,
                kind=event.kind,
                occurred_at=event.occurred_at,
                data=event.data,
                prev_hash=event.prev_hash,
            )
        except (rfc8785.CanonicalizationError, TypeError, ValueError):
            return bad(event.seq, "event cannot be canonicalised")
        if recomputed != event.hash:
            return bad(event.seq, "stored hash does not match the recomputed hash")
        if tip is not None and event.seq > tip.seq:
            return bad(event.seq, f"event {event.seq} lies beyond {tip.source} ({tip.seq})")
        for claim in by_seq.get(event.seq, []):
            if claim.hash != event.hash:
                return bad(event.seq, f"{claim.source} names a different hash at this number")
        if event.kind == "retention_purge":
            last_purge = (event.seq, event.data.get("through_seq"), event.data.get("through_hash"))
        expected_seq, expected_prev = event.seq + 1, event.hash
        checked += 1
    last_seq = expected_seq - 1
    beyond = sorted(seq for seq in by_seq if seq > last_seq)
    if beyond:
        claim = by_seq[beyond[0]][0]
        return bad(last_seq + 1, f"{claim.source} is at {claim.seq}: the chain is truncated")
    if checkpoint_seq > 0 and (
        last_purge is None or (last_purge[1], last_purge[2]) != (checkpoint_seq, checkpoint_hash)
    ):
        return bad(
            checkpoint_seq + 1,
            "the checkpoint is not the one named by the chain's last retention_purge event",
        )
    return ChainVerdict(room_id, True, checked, last_seq, expected_prev)

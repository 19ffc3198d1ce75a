"""Reads of the ledger, in the form owners and third parties verify (see docs/ledger.md)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from ledger.chain import GENESIS_HASH, occurred_at_text
from ledger.models import HeadWitness, LedgerEvent, LedgerHead, SignedHead

PAGE_LIMIT = 1000


def ledger_event_out(event: LedgerEvent) -> dict[str, Any]:
    """An event exactly as hashed: ``occurred_at`` in the chain's string form."""
    return {
        "seq": event.seq,
        "kind": event.kind,
        "occurred_at": occurred_at_text(event.occurred_at),
        "data": event.data,
        "prev_hash": event.prev_hash,
        "hash": event.hash,
    }


def ledger_events(
    *, room_id: UUID, after_seq: int = 0, limit: int | None = None
) -> list[dict[str, Any]]:
    """The room's events with ``seq > after_seq`` in order (all of them when ``limit`` is None)."""
    # Served from the columns, which the browser and the export re-hash themselves; the stored
    # bytes are for the server's own verification, not sent.
    rows = (
        LedgerEvent.objects.filter(room_id=room_id, seq__gt=after_seq)
        .defer("canonical")
        .order_by("seq")
    )
    if limit is not None:
        rows = rows[:limit]
    return [ledger_event_out(e) for e in rows.iterator(chunk_size=PAGE_LIMIT)]


def ledger_head(*, room_id: UUID) -> dict[str, Any]:
    """Head and checkpoint; a room with no events has the genesis head."""
    head = LedgerHead.objects.filter(room_id=room_id).first()
    if head is None:
        return {"seq": 0, "hash": GENESIS_HASH, "checkpoint": {"seq": 0, "hash": GENESIS_HASH}}
    return {
        "seq": head.seq,
        "hash": head.hash,
        "checkpoint": {"seq": head.checkpoint_seq, "hash": head.checkpoint_hash},
    }


def ledger_signed_heads(*, room_id: UUID) -> list[dict[str, Any]]:
    return [
        {
            "seq": s.seq,
            "hash": s.hash,
            "signed_at": s.signed_at,
            "public_key": s.public_key,
            "signature": s.signature,
        }
        for s in SignedHead.objects.filter(room_id=room_id).order_by("seq", "id")
    ]


def ledger_witnesses_out(*, room_id: UUID) -> list[dict[str, Any]]:
    """The owners' countersignatures of signed heads, as exported and served (each signed
    field exactly as signed, plus when the server stored it)."""
    return [
        {
            "seq": w.seq,
            "hash": w.hash,
            "signed_at": w.signed_at,
            "owner_id": w.owner_id,
            "key_id": w.key_id,
            "public_key": w.public_key,
            "signature": w.signature,
            "witnessed_at": occurred_at_text(w.witnessed_at),
        }
        for w in HeadWitness.objects.filter(room_id=room_id).order_by("seq", "id")
    ]

"""Owners read and verify their room's ledger (session auth; both seats, nobody else).

Authorization is the room's business (``rooms.selectors.room_seat``: 404 for strangers);
the records come from ``ledger`` unchanged, so a browser can recompute every hash.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.contrib.auth.models import User
from django.http import HttpRequest, JsonResponse
from ninja import Router, Schema
from ninja.security import django_auth

from ledger import selectors as ledger_selectors
from ledger.receipts import Receipt, receipt_build, receipt_export
from rooms import selectors

router = Router(auth=django_auth, tags=["ledger"])


class CheckpointOut(Schema):
    seq: int
    hash: str


class LedgerEventOut(Schema):
    seq: int
    kind: str
    occurred_at: str
    data: dict[str, Any]
    prev_hash: str
    hash: str


class SignedHeadOut(Schema):
    seq: int
    hash: str
    signed_at: str
    public_key: str
    signature: str


class LedgerPageOut(Schema):
    room_id: UUID
    head: CheckpointOut
    checkpoint: CheckpointOut
    events: list[LedgerEventOut]
    next_after: int | None  # pass as ``after`` for the next page; None on the last
    signed_heads: list[SignedHeadOut]


def _room_id(request: HttpRequest, room_id: UUID) -> UUID:
    # django_auth has already refused anonymous requests.
    assert isinstance(request.user, User)
    return selectors.room_seat(owner=request.user, room_id=room_id).room_id


@router.get("/rooms/{room_id}/ledger", response=LedgerPageOut)
def room_ledger(
    request: HttpRequest, room_id: UUID, after: int = 0, limit: int = 500
) -> dict[str, Any]:
    """A page of the room's ledger events (``seq > after``), with head, checkpoint and the
    server-signed heads. Recompute the hashes yourself: that is the point."""
    rid = _room_id(request, room_id)
    limit = min(max(limit, 1), ledger_selectors.PAGE_LIMIT)
    head = ledger_selectors.ledger_head(room_id=rid)
    events = ledger_selectors.ledger_events(room_id=rid, after_seq=max(after, 0), limit=limit)
    return {
        "room_id": rid,
        "head": {"seq": head["seq"], "hash": head["hash"]},
        "checkpoint": head["checkpoint"],
        "events": events,
        "next_after": events[-1]["seq"] if len(events) == limit else None,
        "signed_heads": ledger_selectors.ledger_signed_heads(room_id=rid),
    }


@router.get("/rooms/{room_id}/receipt", response=Receipt)
def room_receipt(request: HttpRequest, room_id: UUID) -> Receipt:
    """The room's receipt: who joined, what was granted, disclosed, approved, denied, flagged."""
    return receipt_build(room_id=_room_id(request, room_id))


@router.get("/rooms/{room_id}/receipt/export")
def room_receipt_export(request: HttpRequest, room_id: UUID) -> JsonResponse:
    """The receipt with the full chain, for ``python -m ledger.verify_export``."""
    rid = _room_id(request, room_id)
    response = JsonResponse(receipt_export(rid))
    response["Content-Disposition"] = f'attachment; filename="synapsia-ledger-{rid}.json"'
    return response

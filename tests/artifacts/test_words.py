"""A shared artifact in words: the ledger's sentences, the receipt and the room page's "What
fed a turn" call it a document the publisher's agent published, never a vault item, and
never by its title (the ledger holds no content)."""

from __future__ import annotations

from typing import Any

import pytest

from artifacts.delivery import artifacts_for_agent
from artifacts.models import Artifact
from ledger.models import LedgerEvent
from rooms.ledger_api import events_with_words, receipt_with_words
from tests.artifacts.conftest import publish
from tests.frontend.test_room_page import page_of, visible

pytestmark = pytest.mark.django_db

TITLE = "Friday plan zq8wordcanary"


def _published_and_delivered(room: Any) -> Artifact:
    assert publish(room, room.a, title=TITLE).status == "executed"
    delivered = artifacts_for_agent(room_id=room.room.id, agent_id=room.b.agent.id, turn=3)
    assert len(delivered.artifacts) == 1
    return Artifact.objects.get()


def test_the_ledger_and_receipt_name_a_shared_document_by_its_publisher(
    shared_room: Any,
) -> None:
    _published_and_delivered(shared_room)
    alice = shared_room.a.owner.get_username()
    bob = shared_room.b.owner.get_username()
    events = [
        {"seq": e.seq, "kind": e.kind, "data": e.data}
        for e in LedgerEvent.objects.filter(room_id=shared_room.room.id).order_by("seq")
    ]
    worded = events_with_words(room_id=shared_room.room.id, events=events)
    disclosure = [e["words"] for e in worded if e["kind"] == "disclosure"]
    assert disclosure == [
        f"Disclosed to {bob}'s agent (turn 3): a document {alice}'s agent published."
    ]
    receipt = " ".join(receipt_with_words(room_id=shared_room.room.id).words)
    disclosed = f"Disclosed once to {bob}'s agent (turn 3): a document {alice}'s agent published"
    assert disclosed in receipt
    every = " ".join(e["words"] for e in worded) + receipt
    assert "vault item" not in every and "zq8wordcanary" not in every


def test_a_refused_share_names_the_document_too(shared_room: Any) -> None:
    # Bob's slip keeps what his agent publishes with the owners: the refusal is recorded.
    assert publish(shared_room, shared_room.b, title=TITLE).status == "executed"
    bob = shared_room.b.owner.get_username()
    events = [
        {"seq": e.seq, "kind": e.kind, "data": e.data}
        for e in LedgerEvent.objects.filter(room_id=shared_room.room.id, kind="denial")
    ]
    words = [e["words"] for e in events_with_words(room_id=shared_room.room.id, events=events)]
    assert len(words) == 1 and f"(a document {bob}'s agent published)" in words[0]


def test_what_fed_a_turn_names_a_shared_document_for_each_owner(shared_room: Any) -> None:
    _published_and_delivered(shared_room)
    alice = shared_room.a.owner.get_username()
    query = f"?part=turn&agent={shared_room.b.agent.id}&turn=3"
    for_bob = visible(page_of(shared_room.b.owner, shared_room.room, query))
    for_alice = visible(page_of(shared_room.a.owner, shared_room.room, query))
    assert for_bob == f"A document {alice}'s agent published"
    assert for_alice == "A document your agent published"
    assert "zq8wordcanary" not in for_bob + for_alice


def test_a_document_gone_from_the_room_is_not_called_a_vault_item(shared_room: Any) -> None:
    _published_and_delivered(shared_room)
    Artifact.objects.all().delete()  # purged under its retention row
    alice = shared_room.a.owner.get_username()
    query = f"?part=turn&agent={shared_room.b.agent.id}&turn=3"
    shown = visible(page_of(shared_room.b.owner, shared_room.room, query))
    assert shown == f"{alice}'s vault item or document (since deleted)"

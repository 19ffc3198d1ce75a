"""The ledger page and its data in words: what a person reads holds no id, rule id or JSON,
while the events the browser hashes stay exactly as recorded."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import pytest
from django.db import transaction

from gatekeeper.records import ActionRecord, ActionStatus
from ledger.events import (
    ActionExecuted,
    ActionRequested,
    Denial,
    Disclosure,
    ForkOpened,
    ForkResolved,
    GrantApproved,
    GrantRequested,
    LedgerEventRecord,
    RoomPaused,
)
from ledger.selectors import ledger_events
from ledger.services import ledger_append
from slips.vault import vault_item_create
from tests.bookings import BUDGET, OTHER_WITHIN, booking

pytestmark = pytest.mark.django_db

UUID_RE = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
# A dotted rule id (beyond_slip.not_in_slip, policy.deny.db.any) or a snake_case code.
RULE_ID_RE = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)*\.[a-z][a-z0-9_]*\b")
SNAKE_RE = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
JSON_RE = re.compile(r"[{\[]\s*\"")
EPOCH_RE = re.compile(r"(?<![\d.,])1[5-9]\d{8}(?![\d.,])")


def codes_in(text: str) -> list[str]:
    found = []
    for what, pattern in (
        ("a UUID", UUID_RE),
        ("a rule id", RULE_ID_RE),
        ("a code", SNAKE_RE),
        ("raw JSON", JSON_RE),
        ("an epoch", EPOCH_RE),
    ):
        found += [f"{what}: {m.group(0)!r}" for m in pattern.finditer(text)]
    return found


def shown_text(page_html: str) -> str:
    """The page's text as a person reads it: no tags, attributes, scripts or literals."""
    body = page_html.split("<body", 1)[1]
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", body, flags=re.S)
    # Literals (a command, a hash) are shown as code on purpose.
    body = re.sub(r'<(\w+)[^>]*class="[^"]*\bmono\b[^"]*"[^>]*>.*?</\1>', " ", body, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", body))


@dataclass
class LedgerRoom:
    room_id: UUID
    alice: Any
    bob: Any
    events: list[dict[str, Any]]


def ledger_room_build(opened: Any) -> LedgerRoom:
    """An open room whose ledger holds, besides joins: a disclosure of Alice's budget to Bob's
    agent, a refusal, a booking that needed Alice's grant, approved and carried out."""
    room_id = opened.room.id
    alice, bob = opened.a, opened.b
    budget = vault_item_create(owner=alice.owner, content=BUDGET)
    action = ActionRecord.objects.create(
        room_id=room_id,
        agent_id=alice.agent.id,
        owner=alice.owner,
        tool="book_table",
        arguments=booking(OTHER_WITHIN),
        arguments_hash="0" * 64,
        idempotency_key="k1",
        status=ActionStatus.EXECUTED,
        rule="granted",
    )
    grant_id, a_id, b_id = str(action.id)[::-1], str(alice.agent.id), str(bob.agent.id)
    records: list[LedgerEventRecord] = [
        Disclosure(
            owner_id=str(alice.owner.pk), item_id=str(budget.id), recipient_agent_id=b_id, turn=3
        ),
        Denial(rule="beyond_slip.not_in_slip", subject_id=b_id, resource_id="spend"),
        Denial(rule="policy.deny.db.any", subject_id=b_id, resource_id="spend"),
        ActionRequested(action_id=str(action.id), agent_id=a_id, tool="book_table"),
        GrantRequested(grant_id=grant_id, action_id=str(action.id), owner_id=str(alice.owner.pk)),
        ForkOpened(fork_id=grant_id, reason_rule="over_budget", owner_id=str(alice.owner.pk)),
        RoomPaused(by="gatekeeper", reason_rule="over_budget"),
        GrantApproved(grant_id=grant_id, action_id=str(action.id), owner_id=str(alice.owner.pk)),
        ForkResolved(fork_id=grant_id, by=str(alice.owner.pk), resolution="approved"),
        ActionExecuted(
            action_id=str(action.id), agent_id=a_id, tool="book_table", grant_id=grant_id,
            outcome="ok",
        ),
    ]  # fmt: skip
    for record in records:
        with transaction.atomic():
            ledger_append(room_id=room_id, event=record)
    return LedgerRoom(room_id, alice, bob, ledger_events(room_id=room_id))


@pytest.fixture
def ledger_room(make_open_room) -> LedgerRoom:
    return ledger_room_build(make_open_room())


def test_the_page_shows_no_codes_and_the_checks_in_words(client, ledger_room) -> None:
    client.force_login(ledger_room.alice.owner)
    response = client.get(f"/rooms/{ledger_room.room_id}/ledger/")
    assert response.status_code == 200
    text = shown_text(response.content.decode())
    assert codes_in(text) == [], text
    assert "Is this record intact?" in text
    assert 'id="ledger-verdict"' in response.content.decode()
    # Phones: the events are a list, not a table that cannot shrink.
    assert "<table" not in response.content.decode()


def test_each_event_comes_with_words_and_its_hashed_fields_unchanged(client, ledger_room) -> None:
    client.force_login(ledger_room.bob.owner)
    page = client.get(f"/api/rooms/{ledger_room.room_id}/ledger").json()
    served = page["events"]
    assert [{k: v for k, v in e.items() if k != "words"} for e in served] == ledger_room.events
    words = {e["kind"]: e["words"] for e in served}
    for event in served:
        assert event["words"], event["kind"]
        assert codes_in(event["words"]) == [], event["words"]
    # Names from the room's seats (these owners' usernames are "alice" and "bob").
    assert words["disclosure"] == "Disclosed to bob's agent (turn 3): alice's budget."
    assert words["grant_approved"] == (
        "A grant to book a table at Osteria Kanal was approved by alice."
    )
    assert words["fork_opened"] == (
        "The room stopped at a fork for alice. This costs more than alice's budget allows, "
        "so the room asked alice first."
    )
    refusals = [e["words"] for e in served if e["kind"] == "denial"]
    assert refusals == [
        "Bob's agent was refused when asking to make a payment. This action is not on bob's "
        "permission slip, so the room asked bob first.",
        "Bob's agent was refused when asking to make a payment. The server's tool policy does "
        "not allow this agent to use this tool.",
    ]


def test_the_receipt_keeps_its_fields_and_adds_words(client, ledger_room) -> None:
    client.force_login(ledger_room.alice.owner)
    receipt = client.get(f"/api/rooms/{ledger_room.room_id}/receipt").json()
    # The machine fields stay as they were.
    assert receipt["verified"] is True
    assert receipt["denials_by_rule"] == {"beyond_slip.not_in_slip": 1, "policy.deny.db.any": 1}
    assert receipt["summary"][0].startswith("Ledger verified")
    words = receipt["words"]
    for line in words:
        assert codes_in(line) == [], line
    assert words[0] == f"The server's own check: intact, {receipt['events']} events."
    assert "Disclosed once to bob's agent (turn 3): alice's budget." in words
    assert any(line.startswith("Refused once: The server's tool policy") for line in words)
    assert "Grants: 1 request, 1 approved, 0 refused, 0 expired." in words


def test_a_stranger_sees_neither_the_page_nor_the_words(client, ledger_room, make_owner) -> None:
    client.force_login(make_owner("mallory"))
    assert client.get(f"/rooms/{ledger_room.room_id}/ledger/").status_code == 404
    assert client.get(f"/api/rooms/{ledger_room.room_id}/ledger").status_code == 404
    assert client.get(f"/api/rooms/{ledger_room.room_id}/receipt").status_code == 404

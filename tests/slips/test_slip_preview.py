"""The slip in words and the preview of a draft: a sentence for every record the checklist can
offer, none leaking a code; the preview is what a real context turn discloses, and making one
signs, stores, spends and records nothing."""

from __future__ import annotations

import itertools
import re
import time
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from django.utils import timezone

from ledger.models import LedgerEvent
from rooms.context import context_for_agent
from slips import services as slip_services
from slips.capabilities import RECIPIENTS, VAULT_SCOPES, Capability, capability_under_tier
from slips.models import Slip, SlipCapability
from slips.preview import draft_capabilities, slip_preview
from slips.sentences import (
    TIER_EFFECTS,
    capability_sentence,
    checklist_sentences,
    slip_changes,
)
from slips.vault import vault_item_create, vault_scoped_view
from tests.frontend.browser import codes_in
from tests.slips.conftest import seat_slip_sign

pytestmark = pytest.mark.django_db

DAY = 86_400
# Code words that are also plain English: only their bare, code-like use is refused.
LEAKS = ("_", "tool:", "per_use", "free_busy", "own_agent", "peer_agent")


def _capability(resource: str, operation: str, scope: str, recipient: str, **extra) -> Capability:
    fields: dict[str, Any] = {
        "expires_at": 2**40,
        "max_uses": 1,
        "onward_disclosure": False,
        "approval": "none",
        **extra,
    }
    return Capability(resource, operation, scope, recipient, **fields)


def _no_code(sentence: str) -> None:
    assert sentence.endswith(".") and sentence[0].isupper(), sentence
    for leak in LEAKS:
        assert leak not in sentence, (leak, sentence)
    assert "{" not in sentence and "[" not in sentence, sentence


@pytest.mark.parametrize("currency", [None, "EUR", "JPY"])
def test_a_sentence_for_every_record_the_checklist_offers(currency) -> None:
    sentences = checklist_sentences(currency)
    combos = [
        (resource, operation, scope, recipient)
        for resource, scopes in VAULT_SCOPES.items()
        for operation, scope, recipient in itertools.product(
            ("read", "disclose"), scopes, RECIPIENTS
        )
    ]
    assert set(sentences) == {"|".join(c) for c in combos}
    for sentence in sentences.values():
        _no_code(sentence)
    # Records that differ in what they let through never read the same. ("read" and
    # "disclose" towards the owner's own agent clear exactly the same, so they read alike.)
    for resource, scopes in VAULT_SCOPES.items():
        for scope in scopes:
            read, disclose = (f"{resource}|{op}|{scope}|own_agent" for op in ("read", "disclose"))
            assert sentences[read] == sentences[disclose]
    distinct = {k: v for k, v in sentences.items() if "|disclose|" not in k or "own_agent" not in k}
    assert len(set(distinct.values())) == len(distinct)
    assert (
        sentences["availability|disclose|free_busy_14d|peer_agent"]
        == "Let the other agent see when I am free in the next 14 days, without titles."
    )
    if currency == "EUR":
        assert sentences["budget|disclose|band|peer_agent"] == (
            "Let the other agent see a rough band of my budget per person (rounded out to 10 EUR)."
        )


def test_a_sentence_for_every_action_the_slip_page_offers() -> None:
    from frontend.slip_views import slip_tools

    tools = slip_tools()
    assert "tool:book_table" in tools and "tool:venues_search" not in tools
    sentences = checklist_sentences(tools=tools)
    for tool in tools:
        sentence = sentences[f"{tool}|act|call|own_agent"]
        _no_code(sentence)
        assert sentence.startswith("Let my agent ") and "action for me" not in sentence


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({}, "(once)."),
        ({"max_uses": 100}, "(up to 100 times)."),
        ({"approval": "per_use"}, "asking me before each use"),
        ({"onward_disclosure": True}, "it may be carried out of the room"),
        ({"expires_at": 1_900_000_000}, "until Sun 17 Mar, 18:46"),
    ],
)
def test_detailed_sentences_say_every_option_in_words(extra, words) -> None:
    capability = _capability("allergies", "disclose", "list", "peer_agent", **extra)
    sentence = capability_sentence(
        capability, slip_expires_at=2_000_000_000, zone=ZoneInfo("Europe/Berlin")
    )
    _no_code(sentence)
    assert words in sentence
    tool = _capability("tool:book_table", "act", "call", "own_agent", **extra)
    _no_code(capability_sentence(tool, slip_expires_at=2_000_000_000))
    assert capability_sentence(tool).startswith("Let my agent book tables at venues")
    unknown = _capability("tool:share_itinerary", "act", "call", "own_agent", **extra)
    assert "the “share itinerary” action" in capability_sentence(unknown)


def test_the_diff_names_what_is_now_shared_no_longer_shared_and_changed() -> None:
    week = _capability("availability", "disclose", "free_busy_7d", "peer_agent")
    fortnight = _capability("availability", "disclose", "free_busy_14d", "peer_agent")
    allergies = _capability("allergies", "disclose", "list", "peer_agent")
    budget = _capability("budget", "read", "range", "own_agent")
    changes = slip_changes(
        (week, allergies), (fortnight, budget), before_expires_at=2**40, after_expires_at=2**40
    )
    assert changes.now_shared == ["Let my agent know my exact budget range per person (once)."]
    assert changes.no_longer_shared == ["Let the other agent see my allergies (once)."]
    (changed,) = changes.changed
    assert changed.startswith("Let the other agent see when I am free in the next 14 days")
    assert "(before: Let the other agent see when I am free in the next 7 days" in changed
    same = slip_changes((week,), (week,), before_expires_at=2**40, after_expires_at=2**40)
    assert not same.any


# --- the preview against a real context turn ---------------------------------------------------


def _vault(owner: Any, now: int) -> list[int]:
    soon = [now + 2 * DAY, now + 2 * DAY + 3600]
    vault_item_create(
        owner=owner,
        content={
            "kind": "availability",
            "busy": [
                {"start": soon[0], "end": soon[1]},
                {"start": now + 10 * DAY, "end": now + 10 * DAY + 3600},
            ],
        },
    )
    vault_item_create(
        owner=owner, content={"kind": "budget", "currency": "EUR", "minimum": 3300, "maximum": 7700}
    )
    vault_item_create(owner=owner, content={"kind": "allergies", "items": ["peanuts", "tree nuts"]})
    return soon


DRAFT = [
    {"resource": "availability", "operation": "disclose", "scope": "free_busy_14d",
     "recipient": "peer_agent", "approval": "none", "max_uses": 100},
    {"resource": "budget", "operation": "disclose", "scope": "range", "recipient": "peer_agent",
     "approval": "none", "max_uses": 100},
    {"resource": "budget", "operation": "read", "scope": "range", "recipient": "own_agent",
     "approval": "none", "max_uses": 100},
    {"resource": "allergies", "operation": "disclose", "scope": "list", "recipient": "both",
     "approval": "none", "max_uses": 100},
]  # fmt: skip


def _by_resource(items: list[Any]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        grouped.setdefault(item.resource, []).append(item.content)
    return grouped


def _comparable(resource: str, views: list[dict[str, Any]]) -> list[Any]:
    # A turn happens a moment after the preview: free/busy is compared by its windows and span.
    if resource == "availability":
        return [(v["busy"], v["until"] - v["from"]) for v in views]
    return views


@pytest.mark.parametrize("tier", ["collaborative", "room_only"])
def test_the_preview_is_what_a_context_turn_discloses(make_open_room, tier) -> None:
    setup = make_open_room()
    alice = setup.a.owner
    soon = _vault(alice, int(time.time()))
    seat_slip_sign(setup.a, setup.room.id, DRAFT)
    seat_slip_sign(setup.b, setup.room.id, [])
    slip_services.tier_choose(owner=setup.b.owner, room_id=setup.room.id, tier=tier)

    now = timezone.now()
    preview = slip_preview(
        owner_id=alice.pk,
        capabilities=draft_capabilities(DRAFT, now=now),
        tier=tier,
        now=now,
        currency="EUR",
    )
    own, peer = preview.agents
    seen_by_bob = _by_resource(
        context_for_agent(room_id=setup.room.id, agent_id=setup.b.agent.id).peer_items
    )
    seen_by_alices_agent = _by_resource(
        context_for_agent(room_id=setup.room.id, agent_id=setup.a.agent.id).own_items
    )
    for agent, seen in ((peer, seen_by_bob), (own, seen_by_alices_agent)):
        assert {i.resource for i in agent.items} == set(seen)
        for item in agent.items:
            assert _comparable(item.resource, item.views) == _comparable(
                item.resource, seen[item.resource]
            )
    # …and the same as the vault's own scoped view through the effective capability.
    for record in DRAFT:
        if record["recipient"] == "own_agent":
            continue
        effective = capability_under_tier(draft_capabilities([record], now=now)[0], tier)
        assert effective is not None
        direct = vault_scoped_view(owner_id=alice.pk, capability=effective, now=now)
        (item,) = [i for i in peer.items if i.resource == record["resource"]]
        assert _comparable(item.resource, item.views) == _comparable(item.resource, direct)

    words = {i.resource: i for i in peer.items}
    if tier == "room_only":
        assert words["budget"].shown == ["About 30 to 80 EUR per person (a rough band)"]
        assert "Room Only cuts this from the exact range to a rough band" in words["budget"].note
        assert len([line for line in words["availability"].shown if line.startswith("Busy")]) == 1
    else:
        assert words["budget"].shown == ["33 to 77 EUR per person"]
        assert len([line for line in words["availability"].shown if line.startswith("Busy")]) == 2
    assert words["allergies"].shown == ["peanuts, tree nuts"]
    own_words = {i.resource: i.shown for i in own.items}
    assert own_words["budget"] == ["33 to 77 EUR per person"]
    assert own_words["allergies"] == ["peanuts, tree nuts"]
    busy = next(line for line in words["availability"].shown if line.startswith("Busy"))
    # An hour from now: past midnight the end names its own day ("to Fri 4 Dec, 00:07").
    day = r"\w{3} \d{1,2} \w{3}, "
    assert re.fullmatch(rf"Busy {day}\d\d:\d\d to ({day})?\d\d:\d\d", busy), busy
    assert soon  # the meeting two days ahead is the one every tier shows


def _client(owner: Any) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def test_the_preview_endpoint_answers_in_words_and_changes_nothing(make_open_room) -> None:
    setup = make_open_room()
    _vault(setup.a.owner, int(time.time()))
    client = _client(setup.a.owner)
    events, uses = LedgerEvent.objects.count(), SlipCapability.objects.count()
    draft = [dict(DRAFT[1], approval="per_use"), DRAFT[3]]
    answer = client.post(
        f"/api/rooms/{setup.room.id}/slip-preview",
        {"capabilities": draft},
        content_type="application/json",
    )
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["tier"] == "collaborative" and body["tier_effect"] == TIER_EFFECTS["collaborative"]
    own, peer = body["agents"]
    assert (own["agent"], peer["agent"]) == ("Your agent", "The other agent")
    assert [i["title"] for i in own["items"]] == ["Your allergies"]
    budget = next(i for i in peer["items"] if i["resource"] == "budget")
    assert budget["shown"] == ["33 to 77 EUR per person"]
    assert budget["note"].startswith("Only after you approve it: the room asks you")
    words = [[*i["shown"], i["note"], i["title"]] for a in body["agents"] for i in a["items"]]
    text = "\n".join(line for lines in words for line in lines)
    # No id or code (an owner's number is not looked for: "33 to 77 EUR" may hold it).
    assert codes_in(text) == [] and "per_use" not in text and "_" not in text
    # Nothing signed, stored, spent or recorded.
    assert Slip.objects.count() == 0
    assert (LedgerEvent.objects.count(), SlipCapability.objects.count()) == (events, uses)


def test_under_sandbox_the_preview_shows_nothing_and_says_why(make_open_room) -> None:
    setup = make_open_room()
    _vault(setup.a.owner, int(time.time()))
    client = _client(setup.a.owner)
    client.put(
        f"/api/rooms/{setup.room.id}/tier", {"tier": "sandbox"}, content_type="application/json"
    )
    body = client.post(
        f"/api/rooms/{setup.room.id}/slip-preview",
        {"capabilities": DRAFT},
        content_type="application/json",
    ).json()
    assert [a["items"] for a in body["agents"]] == [[], []]
    assert body["tier_name"] == "Sandbox" and len(body["held_back"]) == len(DRAFT)
    assert "Let the other agent see my exact budget range per person." in body["held_back"]


@pytest.mark.parametrize(
    "draft",
    [
        [{"resource": "budget", "scope": "everything"}],
        [{"resource": "budget"}, {"resource": "budget"}],
        [{"resource": "passwords"}],
        "not a list",
    ],
)
def test_a_bad_draft_is_refused_in_words(make_open_room, draft) -> None:
    setup = make_open_room()
    answer = _client(setup.a.owner).post(
        f"/api/rooms/{setup.room.id}/slip-preview",
        {"capabilities": draft},
        content_type="application/json",
    )
    assert answer.status_code == 422
    if isinstance(draft, list):
        assert answer.json()["message"][0].isupper()


def test_the_preview_needs_a_seat(make_open_room, make_owner) -> None:
    setup = make_open_room()
    mallory = _client(make_owner("mallory"))
    answer = mallory.post(
        f"/api/rooms/{setup.room.id}/slip-preview",
        {"capabilities": DRAFT},
        content_type="application/json",
    )
    assert answer.status_code == 404


def test_free_busy_is_shown_in_the_owners_time_zone(make_owner) -> None:
    alice = make_owner("alice")
    now = timezone.now().replace(hour=10, minute=0, second=0, microsecond=0)
    start = int((now + timedelta(days=1)).timestamp())
    vault_item_create(
        owner=alice,
        content={"kind": "availability", "busy": [{"start": start, "end": start + 5400}]},
    )
    capability = draft_capabilities(
        [{"resource": "availability", "operation": "read", "scope": "free_busy_7d",
          "approval": "none"}], now=now
    )  # fmt: skip
    (own, _peer) = slip_preview(
        owner_id=alice.pk,
        capabilities=capability,
        tier="collaborative",
        now=now,
        zone=ZoneInfo("Asia/Tokyo"),
    ).agents
    (item,) = own.items
    assert "(Asia/Tokyo)" in item.shown[0]
    assert item.shown[1].endswith("19:00 to 20:30")  # 10:00 UTC is 19:00 in Tokyo


def test_an_action_in_the_draft_is_previewed_for_the_own_agent_only(make_open_room) -> None:
    setup = make_open_room()
    client = _client(setup.a.owner)
    booking = {"resource": "tool:book_table", "operation": "act", "approval": "none",
               "max_uses": 3}  # fmt: skip
    for tier, note in (("collaborative", ""), ("sandbox", "Sandbox makes it ask you")):
        client.put(
            f"/api/rooms/{setup.room.id}/tier", {"tier": tier}, content_type="application/json"
        )
        own, peer = client.post(
            f"/api/rooms/{setup.room.id}/slip-preview",
            {"capabilities": [booking]},
            content_type="application/json",
        ).json()["agents"]
        (item,) = own["items"]
        assert item["title"] == "Action: book table"
        assert item["shown"] == ["May book tables at venues, within my budget, up to 3 times"]
        assert item["note"].startswith(note)
        assert peer["items"] == []

"""A context request costs a constant number of SQL statements, whatever the number of items
it clears (issue 17): the live slips, capabilities, keys, vault items, seat and standing are
read set-based, each slip's signature is verified once per turn, uses are spent and every
disclosure recorded in one transaction with one insert. A test of structure, not of time.

Each scene clears ``n`` of Alice's items for Bob's agent and one of Bob's own items that asks
him before each use (``per_use``): the first turn asks him, he approves, the second turn
discloses it once (claiming and consuming the approval), the third asks again. Every turn
must stay within ``MAX_STATEMENTS``, and each still discloses exactly what is cleared.
"""

from __future__ import annotations

import time
import traceback
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from gatekeeper.records import Grant, GrantKind, GrantStatus
from ledger.events import Leave
from ledger.models import LedgerEvent, LedgerHead
from ledger.services import ledger_append, ledger_append_many
from ledger.verification import ledger_verify_room
from rooms import forks, services
from rooms.context import WITHDRAWN_NOTICE, context_for_agent
from rooms.models import Agent, RoomMember
from slips import vault
from tests.slips.conftest import seat_slip_sign
from tests.statement_parses import uncached_parses

# Real transactions: inside a test's own atomic block each turn would add a savepoint pair.
pytestmark = pytest.mark.django_db(transaction=True)

MAX_STATEMENTS = 12
DAY = 86_400

# One item of each single-item kind, then notes and links (an owner may keep several).
_SINGLE_ITEMS: list[dict[str, Any]] = [
    {"kind": "availability", "busy": []},
    {"kind": "budget", "currency": "EUR", "minimum": 3000, "maximum": 6000},
    {"kind": "food_likes", "items": ["ramen"]},
    {"kind": "food_dislikes", "items": ["okra"]},
    {"kind": "allergies", "items": ["sesame"]},
    {"kind": "link", "url": "https://example.org/0"},
]
_SCOPES = {"availability": "free_busy_7d", "budget": "range"}


def _alice_items(n: int) -> list[dict[str, Any]]:
    items = _SINGLE_ITEMS[:n]
    items += [{"kind": "note", "text": f"note {i}"} for i in range(max(0, n - len(items)))]
    return items


def _to_peer(kind: str) -> dict[str, Any]:
    record = {
        "resource": kind,
        "operation": "disclose",
        "recipient": "peer_agent",
        "approval": "none",
        "max_uses": 50,
    }
    if kind in _SCOPES:
        record["scope"] = _SCOPES[kind]
    return record


def _scene(make_open_room: Any, n: int, prefix: str = "") -> tuple[Any, Any]:
    setup = make_open_room(prefix=prefix)
    now = int(time.time())
    items = _alice_items(n)
    for content in items:
        if content["kind"] == "availability":
            content = {**content, "busy": [{"start": now + DAY, "end": now + DAY + 3600}]}
        vault.vault_item_create(owner=setup.a.owner, content=content)
    kinds = list(dict.fromkeys(c["kind"] for c in items))
    seat_slip_sign(setup.a, setup.room.id, [_to_peer(k) for k in kinds])
    vault.vault_item_create(owner=setup.b.owner, content={"kind": "neighbourhood", "name": "Mitte"})
    own_per_use = {
        "resource": "neighbourhood",
        "operation": "disclose",
        "recipient": "own_agent",
        "approval": "per_use",
        "max_uses": 5,
    }
    _key, device = seat_slip_sign(setup.b, setup.room.id, [own_per_use])
    services.message_say(
        room_id=setup.room.id, agent_id=setup.a.agent.id, client_id="m1", text="Friday?"
    )
    services.whisper_send(owner=setup.b.owner, room_id=setup.room.id, text="Keep it cheap.")
    return setup, (_key, device)


def _counted_turn(setup: Any) -> tuple[Any, int, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        context = context_for_agent(room_id=setup.room.id, agent_id=setup.b.agent.id)
    return context, len(captured), [q["sql"] for q in captured.captured_queries]


def _approve(setup: Any, key_and_device: tuple[Any, Any]) -> None:
    key, device = key_and_device
    [grant] = Grant.objects.filter(
        kind=GrantKind.DISCLOSURE, room_id=setup.room.id, status=GrantStatus.PENDING
    )
    forks.grant_decide(
        owner=setup.b.owner,
        room_id=setup.room.id,
        grant_id=grant.id,
        approve=True,
        key_id=key.id,
        signature=device.sign_grant(grant),
    )


@pytest.mark.parametrize("n", [1, 6, 20])
def test_a_context_request_costs_the_same_statements_for_1_6_and_20_items(
    make_open_room: Any, n: int
) -> None:
    setup, signer = _scene(make_open_room, n)

    asking, asking_count, asking_sql = _counted_turn(setup)
    assert len(asking.peer_items) == n and asking.own_items == []
    assert any("approval" in notice for notice in asking.notices)
    assert asking.whispers and asking.peer_messages  # the whole context, not only items
    _approve(setup, signer)

    claiming, claiming_count, claiming_sql = _counted_turn(setup)
    assert len(claiming.peer_items) == n
    assert [i.resource for i in claiming.own_items] == ["neighbourhood"]  # approved: once

    again, again_count, again_sql = _counted_turn(setup)
    assert len(again.peer_items) == n and again.own_items == []

    for count, sql in (
        (asking_count, asking_sql),
        (claiming_count, claiming_sql),
        (again_count, again_sql),
    ):
        # A turn whose events reach a multiple of LEDGER_HEAD_EVERY_EVENTS also signs the
        # ledger's head (one INSERT, docs/ledger.md "Heads the database cannot skip"): the
        # price of a ledger the database cannot rewrite alone, at most once per turn.
        heads = sum('INSERT INTO "ledger_signedhead"' in statement for statement in sql)
        assert heads <= 1, "\n".join(sql)
        assert count - heads <= MAX_STATEMENTS, f"{count} statements:\n" + "\n".join(sql)
    # Each item of each turn recorded, in one chain that still verifies.
    assert LedgerEvent.objects.filter(room_id=setup.room.id, kind="disclosure").count() == 3 * n + 1
    assert ledger_verify_room(room_id=setup.room.id).ok


def test_the_count_does_not_grow_with_the_items(make_open_room: Any) -> None:
    counts = []
    for n in (1, 20):
        setup, _signer = _scene(make_open_room, n, prefix=f"n{n}-")
        _counted_turn(setup)  # the first turn asks Bob (the same for both)
        counts.append(_counted_turn(setup)[1])  # waiting for Bob: no new request
    assert counts[0] == counts[1], counts


@pytest.mark.parametrize("standing", ["muted", "blocked", "stepped_in"])
def test_a_withdrawn_agent_is_given_no_vault_item_and_spends_no_use(
    make_open_room: Any, standing: str
) -> None:
    setup, _signer = _scene(make_open_room, 6)
    RoomMember.objects.filter(room=setup.room, agent=setup.b.agent).update(standing=standing)
    context = context_for_agent(room_id=setup.room.id, agent_id=setup.b.agent.id)
    assert context.peer_items == [] and context.own_items == []
    assert WITHDRAWN_NOTICE in context.notices
    assert not LedgerEvent.objects.filter(room_id=setup.room.id, kind="disclosure").exists()
    assert not Grant.objects.filter(room_id=setup.room.id).exists()  # nobody was asked
    # Back to active: the very next turn is decided live again.
    RoomMember.objects.filter(room=setup.room, agent=setup.b.agent).update(standing="active")
    assert len(context_for_agent(room_id=setup.room.id, agent_id=setup.b.agent.id).peer_items) == 6


def test_a_revoked_agent_is_given_no_vault_item(make_open_room: Any) -> None:
    setup, _signer = _scene(make_open_room, 6)
    Agent.objects.filter(id=setup.b.agent.id).update(revoked_at=timezone.now())
    context = context_for_agent(room_id=setup.room.id, agent_id=setup.b.agent.id)
    assert context.peer_items == [] and context.own_items == []
    assert not LedgerEvent.objects.filter(room_id=setup.room.id, kind="disclosure").exists()


def test_a_batch_appended_after_the_head_moved_still_chains(make_open_room: Any) -> None:
    """The turn appends from the head it read; if another writer moved it since (one that
    does not take the room's lock), the compare-and-set misses and the batch is chained
    after the real head instead: no fork, no gap."""
    setup = make_open_room()
    room_id = setup.room.id
    with transaction.atomic():
        seen = LedgerHead.objects.values_list("seq", "hash").get(room_id=room_id)
        ledger_append(
            room_id=room_id,
            event=Leave(participant_id=str(setup.a.agent.id), participant_kind="agent"),
        )
        appended = ledger_append_many(
            room_id=room_id,
            events=[Leave(participant_id=str(setup.b.agent.id), participant_kind="agent")] * 3,
            head_seen=(int(seen[0]), str(seen[1])),
        )
    assert [a.seq for a in appended] == [seen[0] + 2, seen[0] + 3, seen[0] + 4]
    assert LedgerHead.objects.get(room_id=room_id).seq == seen[0] + 4
    assert ledger_verify_room(room_id=room_id).ok


def _compilations_outside(excluded: tuple[str, ...], run: Any) -> tuple[Any, list[tuple[str, str]]]:
    """Run ``run()`` and list every ORM query compilation it made (the compiler's class and the
    innermost frame of ours that asked), except those made under the ``excluded`` modules."""
    from django.db.models.sql import compiler as sql_compiler

    made: list[tuple[str, str]] = []
    originals: dict[type, Any] = {}
    for cls in vars(sql_compiler).values():
        if (
            isinstance(cls, type)
            and issubclass(cls, sql_compiler.SQLCompiler)
            and "as_sql" in vars(cls)
        ):
            originals[cls] = vars(cls)["as_sql"]

    def wrap(cls: type, original: Any) -> Any:
        def as_sql(self: Any, *args: Any, **kwargs: Any) -> Any:
            stack = [f.filename for f in traceback.extract_stack()]
            ours = [f for f in stack if "/site-packages/" not in f and f.endswith(".py")]
            if not any(f.endswith(excluded) for f in ours):
                made.append((cls.__name__, ours[-2] if len(ours) > 1 else "?"))
            return original(self, *args, **kwargs)

        return as_sql

    try:
        for cls, original in originals.items():
            setattr(cls, "as_sql", wrap(cls, original))  # noqa: B010
        result = run()
    finally:
        for cls, original in originals.items():
            setattr(cls, "as_sql", original)  # noqa: B010
    return result, made


def test_a_turn_compiles_no_orm_query_outside_the_ledger(make_open_room: Any) -> None:
    """The hot path is precompiled statements (issue 17: "no ORM compilation on the hot
    path"): the turn's facts, slips, items, uses, messages and whispers, and the ledger's
    append of the turn's events (a written compare-and-set on the head and one multi-row
    INSERT). Only the server's head signature, once every N events (ledger/signing.py, one
    model save), is counted apart."""
    setup = make_open_room()
    for content in _alice_items(6):
        vault.vault_item_create(owner=setup.a.owner, content=content)
    seat_slip_sign(
        setup.a,
        setup.room.id,
        [_to_peer(k) for k in dict.fromkeys(c["kind"] for c in _alice_items(6))],
    )
    seat_slip_sign(setup.b, setup.room.id, [])
    services.message_say(
        room_id=setup.room.id, agent_id=setup.a.agent.id, client_id="m1", text="Friday?"
    )
    services.whisper_send(owner=setup.b.owner, room_id=setup.room.id, text="Keep it cheap.")
    context_for_agent(room_id=setup.room.id, agent_id=setup.b.agent.id)  # warm, as a server is

    context, made = _compilations_outside(
        ("ledger/signing.py",),
        lambda: context_for_agent(room_id=setup.room.id, agent_id=setup.b.agent.id),
    )
    assert len(context.peer_items) == 6 and context.peer_messages and context.whispers
    assert made == [], made


@pytest.mark.parametrize("n", [1, 20])
def test_a_turns_statements_are_parsed_once_whatever_it_clears(make_open_room: Any, n: int) -> None:
    """Each statement of a turn keeps psycopg's parse (PostgreSQL), however many items it
    clears and uses it spends: the ledger's insert with the uses it spends once took a value
    per event and record and was parsed again on every turn (``tests.statement_parses``)."""
    setup, signer = _scene(make_open_room, n, prefix=f"parse{n}-")
    _counted_turn(setup)  # asks Bob; the first turn of each statement text parses it
    _approve(setup, signer)
    with uncached_parses() as parsed:
        for _ in range(2):
            assert (
                len(context_for_agent(room_id=setup.room.id, agent_id=setup.b.agent.id).peer_items)
                == n
            )
    assert parsed == [], [q[:120] for q in parsed]

"""Limits on every socket input (docs/protocol.md, Limits): per-agent rates for `say`,
`context_request`, `act` and grant requests, contexts per turn, a bounded inbox and a bounded
outbox; an agent that keeps running into its limits is flared as looping."""

from __future__ import annotations

import time
from typing import Any

import pytest
from channels.db import database_sync_to_async

from gatekeeper.records import ActionRecord
from rooms import context, forks, limits, standing
from rooms.models import Flare, Message, Room, RoomMember, RoomState
from rooms.protocol import CloseCode
from tests.socket_frames import frame, join, next_frame_of, say

pytestmark = pytest.mark.django_db(transaction=True)

PROPOSE = {"start": "2026-12-04T19:00:00+00:00", "duration_minutes": 90}


@pytest.fixture
def rates(settings: Any) -> Any:
    """Set some socket limits for one test (the rest keep their defaults)."""

    def set_rates(**overrides: Any) -> None:
        synapsia = {**settings.SYNAPSIA}
        synapsia["SOCKET_RATES"] = {**synapsia["SOCKET_RATES"]}
        for key, value in overrides.items():
            if key in synapsia["SOCKET_RATES"]:
                synapsia["SOCKET_RATES"][key] = value
            else:
                synapsia[key] = value
        settings.SYNAPSIA = synapsia

    return set_rates


def _count(model: Any, **filters: Any) -> Any:
    return database_sync_to_async(lambda: model.objects.filter(**filters).count())()


async def test_says_past_the_rate_are_refused_and_not_stored(make_open_room, rates) -> None:
    rates(say="3/m")
    setup = await database_sync_to_async(make_open_room)()
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    for n in range(1, 6):
        await a.send_json_to(say(f"offer {n}", f"a-{n}"))
    answers = [await a.receive_json_from(timeout=5) for _ in range(5)]
    assert [(f["type"], f["body"].get("ref")) for f in answers if f["type"] == "sent"] == [
        ("sent", "a-1"),
        ("sent", "a-2"),
        ("sent", "a-3"),
    ]
    errors = [f["body"] for f in answers if f["type"] == "error"]
    assert [(e["code"], e["ref"]) for e in errors] == [
        ("say_rate_limited", "a-4"),
        ("say_rate_limited", "a-5"),
    ]
    assert errors[0]["message"].startswith("Too many messages. Try again in ")
    heard = [(await b.receive_json_from(timeout=5))["body"]["seq"] for _ in range(3)]
    assert heard == [1, 2, 3]
    assert await b.receive_nothing(timeout=0.2)
    assert await _count(Message, room_id=setup.room.id) == 3
    await a.disconnect()
    await b.disconnect()


async def test_a_reconnect_does_not_refill_the_rate(make_open_room, rates) -> None:
    rates(say="2/h")
    setup = await database_sync_to_async(make_open_room)()
    a = await join(setup.room.id, setup.a.token)
    for n in (1, 2):
        await a.send_json_to(say(f"m{n}", f"a-{n}"))
        assert (await a.receive_json_from(timeout=5))["type"] == "sent"
    await a.disconnect()
    again = await join(setup.room.id, setup.a.token)
    await again.send_json_to(say("m3", "a-3"))
    assert (await again.receive_json_from(timeout=5))["body"]["code"] == "say_rate_limited"
    await again.disconnect()


async def test_context_requests_are_rated_and_spend_nothing_when_refused(
    make_open_room, rates
) -> None:
    rates(context_request="2/m", CONTEXT_REQUESTS_PER_TURN=10)
    setup = await database_sync_to_async(make_open_room)()
    b = await join(setup.room.id, setup.b.token)
    for n in range(1, 4):
        await b.send_json_to(frame("context_request", {}, f"c-{n}"))
    answers = [await b.receive_json_from(timeout=5) for _ in range(3)]
    assert [f["type"] for f in answers] == ["context", "context", "error"]
    assert answers[2]["body"]["code"] == "context_rate_limited"
    assert answers[2]["body"]["ref"] == "c-3"
    seat = await database_sync_to_async(RoomMember.objects.get)(
        room_id=setup.room.id, agent=setup.b.agent
    )
    assert seat.context_turn == 2  # the refused request started no turn
    await b.disconnect()


async def test_contexts_per_turn_until_something_new_is_said(make_open_room, rates) -> None:
    rates(CONTEXT_REQUESTS_PER_TURN=2)
    setup = await database_sync_to_async(make_open_room)()
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    for n in range(1, 4):
        await b.send_json_to(frame("context_request", {}, f"c-{n}"))
    answers = [await b.receive_json_from(timeout=5) for _ in range(3)]
    assert [f["type"] for f in answers] == ["context", "context", "error"]
    assert answers[2]["body"]["code"] == "context_turn_limited"
    # The other agent speaks: a new turn of the conversation, so a new context is allowed.
    await a.send_json_to(say("Friday?", "a-1"))
    assert (await b.receive_json_from(timeout=5))["type"] == "message"
    await b.send_json_to(frame("context_request", {}, "c-4"))
    assert (await b.receive_json_from(timeout=5))["type"] == "context"
    await a.disconnect()
    await b.disconnect()


@pytest.fixture
def acts_run(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The frame ids of the acts that reached the action service."""
    ran: list[str] = []
    real = forks.action_for_agent

    def spy(**kwargs: Any) -> Any:
        ran.append(kwargs["client_id"])
        return real(**kwargs)

    monkeypatch.setattr(forks, "action_for_agent", spy)
    return ran


async def test_acts_past_the_rate_are_refused_before_anything_runs(
    make_open_room, rates, acts_run
) -> None:
    rates(act="1/m")
    setup = await database_sync_to_async(make_open_room)()
    a = await join(setup.room.id, setup.a.token)
    await a.send_json_to(frame("act", {"tool": "propose_time", "arguments": PROPOSE}, "act-1"))
    assert (await next_frame_of(a, "action_result"))["body"]["ref"] == "act-1"
    await a.send_json_to(frame("act", {"tool": "propose_time", "arguments": PROPOSE}, "act-2"))
    refused = await next_frame_of(a, "error")
    assert (refused["body"]["code"], refused["body"]["ref"]) == ("act_rate_limited", "act-2")
    assert acts_run == ["act-1"]
    assert await _count(ActionRecord, idempotency_key="act-2") == 0
    await a.disconnect()


async def test_no_act_runs_while_the_grant_requests_are_used_up(
    make_open_room, rates, acts_run
) -> None:
    rates(grant_request="1/h")
    setup = await database_sync_to_async(make_open_room)()
    a = await join(setup.room.id, setup.a.token)
    # One grant request already made in this hour (what an `awaiting_grant` result spends).
    assert limits.limits_book().of(setup.room.id, setup.a.agent.id).take("grant_request") == 0
    await a.send_json_to(frame("act", {"tool": "propose_time", "arguments": PROPOSE}, "act-1"))
    refused = await next_frame_of(a, "error")
    assert (refused["body"]["code"], refused["body"]["ref"]) == ("grant_rate_limited", "act-1")
    assert acts_run == []
    await a.disconnect()


async def test_an_agent_spinning_on_its_limits_is_flared(
    make_open_room, rates, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "LOOP_REFUSALS", 3)
    rates(say="1/h")
    setup = await database_sync_to_async(make_open_room)()
    a = await join(setup.room.id, setup.a.token)
    for n in range(1, 6):
        await a.send_json_to(say(f"again {n}", f"a-{n}"))
    await next_frame_of(a, "room_state")
    flare = await database_sync_to_async(Flare.objects.get)()
    assert (flare.reason, flare.raised_by) == ("loop", "server")
    room = await database_sync_to_async(Room.objects.get)(id=setup.room.id)
    assert room.state == RoomState.PAUSED
    assert await _count(Flare) == 1  # flared once, not once per refusal
    await a.disconnect()


async def test_a_client_flooding_its_inbox_is_closed(
    make_open_room, rates, monkeypatch: pytest.MonkeyPatch
) -> None:
    rates(SOCKET_INBOX_MAX_FRAMES=4)
    setup = await database_sync_to_async(make_open_room)()
    a = await join(setup.room.id, setup.a.token)
    real = context.context_for_agent_acked

    def held(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.5)  # held on any machine: a quick hop lets the pings through one by one
        return real(*args, **kwargs)

    monkeypatch.setattr(context, "context_for_agent_acked", held)
    # A database hop first, so the frames behind it queue up in the inbox.
    await a.send_json_to(frame("context_request", {}, "c-1"))
    for n in range(40):
        await a.send_json_to(frame("ping", {}, f"p-{n}"))
    outputs = []
    while True:
        output = await a.receive_output(timeout=5)
        outputs.append(output)
        if output["type"] == "websocket.close":
            break
    assert outputs[-1]["code"] == CloseCode.INBOX_FULL
    assert '"inbox_full"' in outputs[-2]["text"]
    pongs = [o for o in outputs if '"pong"' in o.get("text", "")]
    assert len(pongs) < 40  # the flood was dropped with the socket, not handled
    await a.disconnect()


async def test_a_full_outbox_is_read_back_from_the_record_in_order(
    make_open_room, rates, monkeypatch: pytest.MonkeyPatch
) -> None:
    rates(SOCKET_OUTBOX_MAX_FRAMES=2)
    setup = await database_sync_to_async(make_open_room)()
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    real = standing.readers_standing

    def slow_check(readers: Any) -> Any:
        time.sleep(0.3)  # the deliveries pile up behind a slow check
        return real(readers)

    monkeypatch.setattr(standing, "readers_standing", slow_check)
    for n in range(1, 11):
        await a.send_json_to(say(f"m{n}", f"a-{n}"))
    heard = [(await b.receive_json_from(timeout=10))["body"]["seq"] for _ in range(10)]
    assert heard == list(range(1, 11))  # each once, in order, nothing lost
    assert await b.receive_nothing(timeout=0.5)
    await a.disconnect()
    await b.disconnect()


# --- the limits themselves -----------------------------------------------------------------


def test_rates_parse_and_refill(settings: Any) -> None:
    assert limits.rate_parse("120/m") == limits.Rate(120, 60.0)
    assert limits.rate_parse("10/hour") == limits.Rate(10, 3600.0)
    assert limits.rate_parse("off") is None
    for bad in ("", "0/m", "x/m", "5/fortnight", "5"):
        with pytest.raises(ValueError):
            limits.rate_parse(bad)
    settings.SYNAPSIA = {
        **settings.SYNAPSIA,
        "SOCKET_RATES": {**settings.SYNAPSIA["SOCKET_RATES"], "say": "2/s"},
    }
    agent = limits.AgentLimits()
    assert [agent.take("say", now=100.0) for _ in range(3)] == [0.0, 0.0, 0.5]
    assert agent.wait("say", now=100.25) == pytest.approx(0.25)
    assert agent.take("say", now=100.5) == 0.0  # refilled at 2 a second


def test_a_loop_is_told_once_per_window() -> None:
    agent = limits.AgentLimits()
    told = [agent.refused(now=float(n)) for n in range(limits.LOOP_REFUSALS * 2)]
    assert told.count(True) == 1
    later = [agent.refused(now=1000.0 + n) for n in range(limits.LOOP_REFUSALS)]
    assert later.count(True) == 1


def test_the_book_remembers_a_bounded_number_of_agents(monkeypatch: pytest.MonkeyPatch) -> None:
    import uuid

    monkeypatch.setattr(limits, "MAX_AGENTS_REMEMBERED", 3)
    book = limits.LimitsBook()
    room = uuid.uuid4()
    agents = [uuid.uuid4() for _ in range(5)]
    first = book.of(room, agents[0])
    for agent_id in agents[1:]:
        book.of(room, agent_id)
    assert len(book._agents) == 3
    assert book.of(room, agents[0]) is not first  # forgotten first, as the least recent

"""Room socket frames as metrics: each frame a socket takes is counted by its type, each one a
limit refuses by the limit's name, and nothing else labels them (the scrape's label test in
tests/synapsia/test_metrics.py checks the series with the rest)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from channels.db import database_sync_to_async
from prometheus_client import Counter

from rooms import limits, services
from synapsia.metrics import (
    SOCKET_FRAME_TYPES,
    SOCKET_FRAMES_RECEIVED,
    SOCKET_FRAMES_REFUSED,
    SOCKET_LIMITS,
)
from synapsia_protocol import CLIENT_FRAME_TYPES, FrameError, parse_client_frame
from tests.socket_frames import frame, join, next_frame_of, say


def counted(counter: Counter, **labels: str) -> float:
    """One series' value, read from the counter alone (the registry's database collector
    would query from an async test)."""
    [metric] = counter.collect()
    [value] = [s.value for s in metric.samples if s.name.endswith("_total") and s.labels == labels]
    return float(value)


def received(kind: str) -> float:
    return counted(SOCKET_FRAMES_RECEIVED, frame=kind)


def refused(limit: str) -> float:
    return counted(SOCKET_FRAMES_REFUSED, limit=limit)


@pytest.fixture
def socket_limits(settings: Any) -> Any:
    """Set some socket limits for one test (the rest keep their defaults)."""

    def set_limits(**overrides: Any) -> None:
        synapsia = {**settings.SYNAPSIA, "SOCKET_RATES": {**settings.SYNAPSIA["SOCKET_RATES"]}}
        for key, value in overrides.items():
            if key in synapsia["SOCKET_RATES"]:
                synapsia["SOCKET_RATES"][key] = value
            else:
                synapsia[key] = value
        settings.SYNAPSIA = synapsia

    return set_limits


def test_every_series_exists_from_the_start_with_fixed_labels_only() -> None:
    assert set(SOCKET_FRAME_TYPES) == {*CLIENT_FRAME_TYPES, "unreadable"}
    assert set(SOCKET_LIMITS) == {
        "say_rate",
        "context_rate",
        "context_turn",
        "act_rate",
        "grant_rate",
        "inbox",
        "send_buffer",
    }
    for kind in SOCKET_FRAME_TYPES:
        assert received(kind) >= 0
    for limit in SOCKET_LIMITS:
        assert refused(limit) >= 0


def test_the_hooks_count_by_type_and_limit() -> None:
    say_before, unreadable_before = received("say"), received("unreadable")
    limits.frame_received(
        parse_client_frame('{"v":1,"type":"say","id":"s-1","body":{"text":"hi"}}', max_bytes=99)
    )
    with pytest.raises(FrameError) as unreadable:
        parse_client_frame("not a frame", max_bytes=99)
    limits.frame_received(unreadable.value)
    assert (received("say"), received("unreadable")) == (say_before + 1, unreadable_before + 1)
    before = {limit: refused(limit) for limit in SOCKET_LIMITS}
    for kind in ("say", "context_request", "act", "grant_request", None):
        limits.rate_refused(kind)
    limits.frame_refused("inbox")
    limits.frame_refused("send_buffer")
    assert {limit: refused(limit) - before[limit] for limit in SOCKET_LIMITS} == {
        limit: 1 for limit in SOCKET_LIMITS
    }


@pytest.mark.django_db(transaction=True)
async def test_a_socket_counts_what_it_takes_and_what_its_rate_refuses(
    make_open_room: Any, socket_limits: Any
) -> None:
    socket_limits(say="2/m")
    setup = await database_sync_to_async(make_open_room)()
    a = await join(setup.room.id, setup.a.token)
    says, pings, unreadable = received("say"), received("ping"), received("unreadable")
    rated = refused("say_rate")
    for n in range(1, 5):
        await a.send_json_to(say(f"offer {n}", f"a-{n}"))
    await a.send_to(text_data="not a frame")
    await a.send_json_to(frame("ping", {}, "p-1"))
    answers = [await a.receive_json_from(timeout=5) for _ in range(6)]
    assert sorted(f["type"] for f in answers) == ["error", "error", "error", "pong", "sent", "sent"]
    assert received("say") == says + 4
    assert received("ping") == pings + 1
    assert received("unreadable") == unreadable + 1
    assert refused("say_rate") == rated + 2  # a malformed frame is no limit's refusal
    await a.disconnect()


def _held(real: Any) -> Any:
    def held(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.5)
        return real(*args, **kwargs)

    return held


@pytest.mark.django_db(transaction=True)
async def test_contexts_past_the_turn_and_a_flooded_inbox_are_counted(
    make_open_room: Any, socket_limits: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    socket_limits(CONTEXT_REQUESTS_PER_TURN=1, SOCKET_INBOX_MAX_FRAMES=4)
    # The say's database hop is held, so the pings behind it queue up past the limit whatever
    # the machine's speed (a quick hop let them be handled one by one: no flood).
    for name in ("message_say", "messages_say_runs"):
        real = getattr(services, name)
        monkeypatch.setattr(services, name, _held(real))
    setup = await database_sync_to_async(make_open_room)()
    a = await join(setup.room.id, setup.a.token)
    contexts, turn, inbox = received("context_request"), refused("context_turn"), refused("inbox")
    await a.send_json_to(frame("context_request", {}, "c-1"))
    await next_frame_of(a, "context")
    await a.send_json_to(frame("context_request", {}, "c-2"))
    assert (await next_frame_of(a, "error"))["body"]["code"] == "context_turn_limited"
    assert received("context_request") == contexts + 2
    assert refused("context_turn") == turn + 1
    await a.send_json_to(say("something new", "s-1"))
    for n in range(40):
        await a.send_json_to(frame("ping", {}, f"p-{n}"))
    while (await a.receive_output(timeout=5))["type"] != "websocket.close":
        pass
    assert refused("inbox") == inbox + 1  # the socket closed on the first one past it
    await a.disconnect()

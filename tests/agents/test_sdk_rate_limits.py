"""The SDK waits out a rate's refusal and resends the same frame, a bounded number of times.

Against a real Daphne whose rates are set low (``say`` one a second, ``context_request`` one an
hour): refused frames come back stored exactly once after the wait the server named; a client
that may retry once gives up with ``RateLimitedError`` on the second refusal; a wait longer
than the client will wait is not waited at all. The protocol's hint and the backoff without
one are checked on their own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any
from uuid import UUID

import pytest

from agents import RateLimitedError, RoomClient
from agents.client import RATE_BACKOFF_FIRST, rate_limit_delay
from ledger.models import LedgerEvent
from rooms.models import Message
from synapsia.serving import running_daphne
from synapsia_protocol import ErrorCode
from synapsia_protocol.codes import code_is_rate_limited, retry_hint, retry_hint_seconds
from tests.e2e.daphne import server_env

# --- the hint and the backoff, on their own ---------------------------------------------------


def test_exactly_the_rate_refusals_are_waited_out() -> None:
    waited = {code.value for code in ErrorCode if code_is_rate_limited(code.value)}
    assert waited == {
        "say_rate_limited",
        "context_rate_limited",
        "act_rate_limited",
        "grant_rate_limited",
    }
    # Waiting does not end a turn's contexts being used up: something new must be said.
    assert not code_is_rate_limited(ErrorCode.CONTEXT_TURN_LIMITED.value)


@pytest.mark.parametrize(("wait", "said"), [(0.0, 1), (0.2, 1), (1.0, 1), (1.01, 2), (359.5, 360)])
def test_the_hint_is_whole_seconds_rounded_up_and_reads_back(wait: float, said: int) -> None:
    hint = retry_hint(wait)
    assert hint == f"Try again in {said} s."
    assert retry_hint_seconds(f"Too many messages. {hint}") == said
    assert retry_hint_seconds("Too many messages.") is None
    assert retry_hint_seconds("Try again in soon s.") is None


def test_the_wait_is_the_hint_plus_a_little_jitter_or_bounded_backoff() -> None:
    for _ in range(200):
        assert 1.0 <= rate_limit_delay(1, 1, max_wait=30) <= 1.1
        assert 20.0 <= rate_limit_delay(3, 20, max_wait=30) <= 22.0
        assert rate_limit_delay(1, 40, max_wait=30) == 30
        # No hint: exponential from RATE_BACKOFF_FIRST, each step jittered in its upper half.
        for refusals in (1, 2, 3, 4):
            step = RATE_BACKOFF_FIRST * 2 ** (refusals - 1)
            assert step / 2 <= rate_limit_delay(refusals, None, max_wait=30) <= step
        assert rate_limit_delay(20, None, max_wait=30) <= 30
    # Jittered: agents refused together do not all come back at the same instant.
    assert len({rate_limit_delay(2, None, max_wait=30) for _ in range(20)}) > 1


# --- against the room socket ------------------------------------------------------------------


@pytest.fixture(scope="module")
def limited_host(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """One Daphne for this file, on the test database, with low rates."""
    env = server_env() | {
        "SYNAPSIA_SOCKET_RATE_SAY": "1/s",
        "SYNAPSIA_SOCKET_RATE_CONTEXT_REQUEST": "1/h",
    }
    log = tmp_path_factory.mktemp("rate-limits") / "daphne.log"
    with running_daphne(log_path=log, env=env) as served:
        yield served.host


def _left(room_id: UUID) -> None:
    """Wait until the server has recorded the socket's leave, its last write for the room: the
    module's Daphne outlives each test, and the flush after a test must not race its writes
    (on PostgreSQL the two deadlocked once)."""
    deadline = time.monotonic() + 10
    while not LedgerEvent.objects.filter(room_id=room_id, kind="leave").exists():
        assert time.monotonic() < deadline, "the server never recorded the socket's leave"
        time.sleep(0.05)


def _texts(room_id: UUID) -> list[str]:
    return list(
        Message.objects.filter(room_id=room_id).order_by("seq").values_list("text", flat=True)
    )


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_refused_says_are_resent_after_the_hint_and_stored_once(
    make_open_room: Any, limited_host: str
) -> None:
    setup = make_open_room()
    url = f"ws://{limited_host}/ws/rooms/{setup.room.id}/"

    async def three_at_once() -> tuple[list[int], int]:
        async with RoomClient(url, setup.a.token) as a:
            seqs = await asyncio.gather(*(a.say(f"does {n} o'clock work?") for n in (6, 7, 8)))
            return list(seqs), a.rate_limit_waits

    seqs, waits = asyncio.run(three_at_once())
    _left(setup.room.id)
    # One a second: the first at once, the other two each waited out (one of them twice).
    assert sorted(seqs) == [1, 2, 3]
    assert waits >= 3
    texts = _texts(setup.room.id)
    assert sorted(texts) == sorted(f"does {n} o'clock work?" for n in (6, 7, 8))


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_after_its_retries_the_client_gives_up_with_the_servers_hint(
    make_open_room: Any, limited_host: str
) -> None:
    setup = make_open_room()
    url = f"ws://{limited_host}/ws/rooms/{setup.room.id}/"

    async def three_at_once() -> list[int | BaseException]:
        async with RoomClient(url, setup.a.token, rate_limit_retries=1) as a:
            return list(
                await asyncio.gather(
                    *(a.say(f"how about {n}?") for n in (1, 2, 3)), return_exceptions=True
                )
            )

    results = asyncio.run(three_at_once())
    _left(setup.room.id)
    stored = [r for r in results if isinstance(r, int)]
    [gave_up] = [r for r in results if isinstance(r, BaseException)]
    # Refused, resent once, refused again: the one that lost both times says so.
    assert isinstance(gave_up, RateLimitedError), gave_up
    assert (gave_up.code, gave_up.kind, gave_up.refusals) == ("say_rate_limited", "say", 2)
    assert gave_up.retry_after == 1  # read from the server's own refusal
    assert "gave up" in str(gave_up) and "say_rate_limited" in str(gave_up)
    assert sorted(stored) == [1, 2]
    assert len(_texts(setup.room.id)) == 2  # nothing of the refused one was recorded


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_wait_longer_than_the_client_waits_raises_at_once(
    make_open_room: Any, limited_host: str
) -> None:
    setup = make_open_room()
    url = f"ws://{limited_host}/ws/rooms/{setup.room.id}/"

    async def two_contexts() -> tuple[int, RateLimitedError, int]:
        async with RoomClient(url, setup.a.token) as a:
            first = await a.context()
            with pytest.raises(RateLimitedError) as refused:
                await a.context()
            return first.turn, refused.value, a.rate_limit_waits

    turn, refused, waits = asyncio.run(two_contexts())
    _left(setup.room.id)
    assert turn == 1
    assert refused.code == "context_rate_limited" and refused.refusals == 1
    # One an hour: the server named most of an hour, longer than the client's 30 s: not waited.
    assert refused.retry_after is not None and 3000 < refused.retry_after <= 3600
    assert waits == 0

"""Standing is checked where data moves: a socket whose reader was revoked, blocked, lost its
seat or whose room closed gets nothing more, even when the announcement never arrives.

The announcements (``agent.revoked``, ``agent.blocked``, ``room.state``) are dropped on the
channel layer here, or the layer is down altogether (the services pass: Redis behind a port
that stops answering); every delivery hop (live, whisper, catch-up, the record sweep, a
context) re-reads the reader's standing from the record and closes the socket instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.layers import channel_layers
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from rooms import flares, realtime, services, standing
from rooms.models import FlareChoice, FlareReason, Room, RoomMember, RoomState
from rooms.protocol import CloseCode
from tests.rooms.conftest import SWEEP_SECONDS
from tests.socket_frames import frame, join, layer_dropping, say

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def lost_closes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    return layer_dropping(monkeypatch, {"agent.revoked", "agent.blocked", "room.state"})


@pytest.fixture
def lost_everything(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The closes and the bells: only the record sweep is left to find anything."""
    return layer_dropping(
        monkeypatch, {"agent.revoked", "agent.blocked", "room.state", "room.messages"}
    )


async def _closed_with_nothing_before(socket: Any) -> int:
    """The socket's next output is its close (no message, whisper or context first)."""
    output = await socket.receive_output(timeout=5)
    assert output["type"] == "websocket.close", output
    return int(output["code"])


async def test_a_revoked_agent_whose_close_was_lost_hears_no_more_and_is_closed(
    make_open_room: Any, lost_closes: list[str]
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    await a.send_json_to(say("before", "a-1"))
    assert (await b.receive_json_from(timeout=5))["body"]["text"] == "before"

    await database_sync_to_async(services.agent_revoke)(
        owner=setup.b.owner, agent_id=setup.b.agent.id
    )
    assert "agent.revoked" in lost_closes
    assert await b.receive_nothing(timeout=0.2)  # the doorbell never rang
    await a.send_json_to(say("your owner's budget is 80", "a-2"))
    assert (await a.receive_json_from(timeout=5))["type"] == "sent"
    assert await _closed_with_nothing_before(b) == CloseCode.UNAUTHENTICATED
    await a.disconnect()
    await b.disconnect()


async def test_a_blocked_agent_whose_close_was_lost_gets_no_whisper_and_is_closed(
    make_open_room: Any, lost_closes: list[str]
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    b = await join(setup.room.id, setup.b.token)
    flare = await database_sync_to_async(flares.flare_raise)(
        room_id=setup.room.id,
        agent_id=setup.b.agent.id,
        reason=FlareReason.DISTRESS,
        raised_by="agent",
    )
    await database_sync_to_async(flares.flare_resolve)(
        owner=setup.b.owner, room_id=setup.room.id, flare_id=flare.id, choice=FlareChoice.BLOCK
    )
    assert "agent.blocked" in lost_closes
    await database_sync_to_async(services.whisper_send)(
        owner=setup.b.owner, room_id=setup.room.id, text="the secret word is heron"
    )
    assert await _closed_with_nothing_before(b) == CloseCode.FORBIDDEN
    await b.disconnect()


async def test_the_record_sweep_checks_standing_before_it_reads_back(
    make_open_room: Any, fast_sweep: None, lost_everything: list[str]
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    await database_sync_to_async(services.agent_revoke)(
        owner=setup.b.owner, agent_id=setup.b.agent.id
    )
    await a.send_json_to(say("only the sweep would find this", "a-1"))
    assert (await a.receive_json_from(timeout=5))["type"] == "sent"
    assert {"agent.revoked", "room.messages"} <= set(lost_everything)
    # Within a few sweeps b is found behind the room; the read-back checks standing first.
    assert await _closed_with_nothing_before(b) == CloseCode.UNAUTHENTICATED
    await a.disconnect()
    await b.disconnect()


async def test_a_silent_room_still_closes_a_revoked_agent_within_a_sweep(
    make_open_room: Any, fast_sweep: None, lost_closes: list[str]
) -> None:
    """Nothing is said, so nothing is delivered: the record sweep's one statement reads the
    seats too, and closes the socket whose reader lost its standing."""
    setup = await database_sync_to_async(make_open_room)()
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    await database_sync_to_async(services.agent_revoke)(
        owner=setup.b.owner, agent_id=setup.b.agent.id
    )
    assert "agent.revoked" in lost_closes
    assert await _closed_with_nothing_before(b) == CloseCode.UNAUTHENTICATED
    assert await a.receive_nothing(timeout=5 * SWEEP_SECONDS)  # a, in standing, stays
    await a.send_json_to(frame("ping", {}, "p-1"))
    assert (await a.receive_json_from(timeout=5))["type"] == "pong"
    await a.disconnect()
    await b.disconnect()


@pytest.mark.parametrize("writer", ["the sweep's connection", "another connection"])
async def test_a_quiet_sweep_still_finds_a_revocation_committed_anywhere(
    make_open_room: Any,
    fast_sweep: None,
    lost_closes: list[str],
    monkeypatch: pytest.MonkeyPatch,
    writer: str,
) -> None:
    """An idle process's sweeps read only the record's mark; a revocation committed on the
    sweep's own connection or on any other still makes the next sweep read the seats, and
    the socket is closed though nothing is said and its close was lost."""
    readings: list[bool] = []  # each sweep: True when it read nothing but the mark
    real_rooms_swept = standing.rooms_swept

    def rooms_swept(*args: Any) -> standing.Swept:
        swept = real_rooms_swept(*args)
        readings.append(swept.unchanged)
        return swept

    monkeypatch.setattr(standing, "rooms_swept", rooms_swept)
    setup = await database_sync_to_async(make_open_room)()
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    for _ in range(50):  # quiet: the last two sweeps read only the mark
        if readings[-2:] == [True, True]:
            break
        await asyncio.sleep(SWEEP_SECONDS)
    assert readings[-2:] == [True, True], readings

    def revoke() -> None:
        services.agent_revoke(owner=setup.b.owner, agent_id=setup.b.agent.id)

    def revoke_elsewhere() -> None:
        try:
            revoke()
        finally:
            connection.close()  # this pool thread's own connection

    quiet_until = len(readings)
    if writer == "the sweep's connection":
        await database_sync_to_async(revoke)()
    else:
        await sync_to_async(revoke_elsewhere, thread_sensitive=False)()
    assert "agent.revoked" in lost_closes
    assert await _closed_with_nothing_before(b) == CloseCode.UNAUTHENTICATED
    assert False in readings[quiet_until:]  # a sweep read the seats again
    await a.send_json_to(frame("ping", {}, "p-1"))
    assert (await a.receive_json_from(timeout=5))["type"] == "pong"  # a, in standing, stays
    await a.disconnect()
    await b.disconnect()


async def test_a_deleted_room_closes_its_sockets_within_a_sweep(
    make_open_room: Any, fast_sweep: None
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    b = await join(setup.room.id, setup.b.token)
    await database_sync_to_async(
        lambda: RoomMember.objects.filter(room_id=setup.room.id).delete()
    )()  # the seats gone (as a deletion leaves them), announced to no one
    assert await _closed_with_nothing_before(b) == CloseCode.FORBIDDEN
    await b.disconnect()


async def test_a_context_request_of_a_revoked_agent_is_answered_by_the_close(
    make_open_room: Any, lost_closes: list[str]
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    await a.send_json_to(say("peer text a revoked agent must not read", "a-1"))
    assert (await b.receive_json_from(timeout=5))["type"] == "message"
    await database_sync_to_async(services.agent_revoke)(
        owner=setup.b.owner, agent_id=setup.b.agent.id
    )
    await b.send_json_to(frame("context_request", {}, "c-1"))
    assert await _closed_with_nothing_before(b) == CloseCode.UNAUTHENTICATED
    seat = await database_sync_to_async(RoomMember.objects.get)(
        room_id=setup.room.id, agent=setup.b.agent
    )
    assert seat.context_turn == 0  # no turn started, so no slip use spent and nothing disclosed
    await a.disconnect()
    await b.disconnect()


async def test_an_agent_in_a_room_closed_without_its_announcement_gets_no_context(
    make_open_room: Any, lost_closes: list[str]
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    b = await join(setup.room.id, setup.b.token)
    await database_sync_to_async(services.room_transition)(
        owner=setup.a.owner, room_id=setup.room.id, to=RoomState.CLOSED
    )
    assert lost_closes.count("room.state") >= 2  # the open, then the close
    await b.send_json_to(frame("context_request", {}, "c-1"))
    assert await _closed_with_nothing_before(b) == CloseCode.ROOM_NOT_JOINABLE
    await b.disconnect()


async def test_a_muted_agent_still_hears_the_room(make_open_room: Any) -> None:
    """Muted is not out: the agent may not speak, but it is told what is said (the limit of
    the check is standing, not silence)."""
    setup = await database_sync_to_async(make_open_room)()
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    await database_sync_to_async(
        RoomMember.objects.filter(room_id=setup.room.id, agent=setup.b.agent).update
    )(standing="muted")
    await a.send_json_to(say("still told", "a-1"))
    heard = await b.receive_json_from(timeout=5)
    assert (heard["type"], heard["body"]["text"]) == ("message", "still told")
    await a.disconnect()
    await b.disconnect()


# --- the check itself: one statement, read from the record, for any number of readers -----


def _session_of(owner: Any) -> str:
    """A browser session signed in as ``owner`` (an owner's reader is its browser's)."""
    client = Client()
    client.force_login(owner)
    return str(client.cookies["sessionid"].value)


def _readers(setup: Any) -> tuple[standing.Reader, standing.Reader, standing.Reader]:
    agent_b = standing.Reader(setup.room.id, setup.b.owner.pk, setup.b.agent.id)
    owner_a = standing.Reader(setup.room.id, setup.a.owner.pk, None, _session_of(setup.a.owner))
    agent_a = standing.Reader(setup.room.id, setup.a.owner.pk, setup.a.agent.id)
    return agent_b, owner_a, agent_a


def test_standing_verdicts_follow_the_record(make_open_room: Any, make_owner: Any) -> None:
    setup = make_open_room()
    agent_b, owner_a, agent_a = _readers(setup)
    assert standing.readers_standing([agent_b, owner_a, agent_a]) == {
        agent_b: None,
        owner_a: None,
        agent_a: None,
    }
    mallory = make_owner("mallory")
    stranger = standing.Reader(setup.room.id, mallory.pk, None, _session_of(mallory))
    wrong_seat = standing.Reader(setup.room.id, setup.b.owner.pk, setup.a.agent.id)
    assert standing.reader_standing(stranger) == CloseCode.FORBIDDEN
    assert standing.reader_standing(wrong_seat) == CloseCode.FORBIDDEN

    RoomMember.objects.filter(room=setup.room, agent=setup.b.agent).update(standing="blocked")
    assert standing.reader_standing(agent_b) == CloseCode.FORBIDDEN
    RoomMember.objects.filter(room=setup.room, agent=setup.b.agent).update(standing="stepped_in")
    assert standing.reader_standing(agent_b) is None
    services.agent_revoke(owner=setup.b.owner, agent_id=setup.b.agent.id)
    assert standing.reader_standing(agent_b) == CloseCode.UNAUTHENTICATED

    Room.objects.filter(id=setup.room.id).update(state=RoomState.CLOSED)
    assert standing.reader_standing(agent_a) == CloseCode.ROOM_NOT_JOINABLE
    assert standing.reader_standing(owner_a) == CloseCode.ROOM_NOT_JOINABLE
    Room.objects.filter(id=setup.room.id).update(state=RoomState.DRAFT)
    assert standing.reader_standing(owner_a) is None  # an owner may watch a draft
    assert standing.reader_standing(agent_a) == CloseCode.ROOM_NOT_JOINABLE

    # A seat lost: the room deleted (its seats go with it).
    RoomMember.objects.filter(room=setup.room).delete()
    assert standing.reader_standing(agent_a) == CloseCode.FORBIDDEN
    assert standing.reader_standing(owner_a) == CloseCode.FORBIDDEN


@pytest.mark.parametrize("rooms", [1, 6])
def test_one_statement_checks_every_reader(make_open_room: Any, rooms: int) -> None:
    """Every reader's seat in one statement; the owners' browsers among them add one more,
    for all their sessions at once (tests/rooms/test_owner_session.py); agents alone, none."""
    readers: list[standing.Reader] = []
    for n in range(rooms):
        readers += _readers(make_open_room(prefix=f"s{n}-"))
    agents = [r for r in readers if r.agent_id is not None]
    with CaptureQueriesContext(connection) as queries:
        verdicts = standing.readers_standing(agents)
    assert len(queries) == 1
    assert list(verdicts.values()) == [None] * len(agents)
    with CaptureQueriesContext(connection) as queries:
        verdicts = standing.readers_standing(readers)
    assert len(queries) == 2
    assert list(verdicts.values()) == [None] * len(readers)


# --- the channel layer down (services pass: Redis behind a port that stops answering) ------


class _Doorway:
    """A loopback TCP forwarder to Redis that can stop answering: afterwards its port is a
    dead port (connections refused), as when Redis is unreachable."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []

    async def open(self) -> int:
        self.server = await asyncio.start_server(self._pipe, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self.writers += [writer, up_writer]

        async def copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(Exception):
                dst.close()

        await asyncio.gather(copy(reader, up_writer), copy(up_reader, writer))

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.close()
        await self.server.wait_closed()


@pytest.fixture
async def redis_doorway(settings: Any) -> AsyncIterator[_Doorway]:
    url = urlsplit(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/11"))
    doorway = _Doorway((url.hostname or "127.0.0.1", url.port or 6379))
    port = await doorway.open()
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [f"redis://127.0.0.1:{port}{url.path or '/11'}"]},
        }
    }
    channel_layers.backends.clear()
    try:
        yield doorway
    finally:
        with contextlib.suppress(Exception):
            await doorway.stop()
        channel_layers.backends.clear()


@pytest.mark.services
async def test_with_the_channel_layer_down_a_revoked_agent_hears_nothing_and_is_closed(
    make_open_room: Any, fast_sweep: None, redis_doorway: _Doorway
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    await a.send_json_to(say("heard while Redis answers", "a-1"))
    assert (await a.receive_json_from(timeout=5))["type"] == "sent"
    assert (await b.receive_json_from(timeout=5))["body"]["seq"] == 1

    await redis_doorway.stop()  # Redis is now a dead port for this process
    await database_sync_to_async(services.agent_revoke)(
        owner=setup.b.owner, agent_id=setup.b.agent.id
    )  # its announcement fails (logged); the revocation committed
    await a.send_json_to(say("said while Redis is down", "a-2"))
    sent = await a.receive_json_from(timeout=5)
    assert (sent["type"], sent["body"]["seq"]) == ("sent", 2)  # stored; its bell failed
    # The sweep (the database, not the layer) finds b behind; standing closes it unread.
    assert await _closed_with_nothing_before(b) == CloseCode.UNAUTHENTICATED
    # a, in standing, is untouched: its socket is open and answers.
    await a.send_json_to(frame("ping", {}, "p-1"))
    assert (await a.receive_json_from(timeout=5))["type"] == "pong"
    assert realtime.record_sweep().sweeps > 0
    await a.disconnect()
    await b.disconnect()

"""Failing closed, visibly: an unexpected error answers with an `error` frame, then a close
code from the documented table (Daphne refuses 1011 and 1013: the socket would stay open and
mute), and the leave is recorded; a check that fails because the database does not answer
pauses the room, recorded as soon as the database answers again."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from autobahn.exception import Disconnected
from channels.db import database_sync_to_async
from django.db import OperationalError, connections
from django.db.backends.utils import CursorWrapper

from ledger.models import LedgerEvent
from rooms import consumers, forks, realtime, services
from rooms.models import Message, Room, RoomState
from rooms.protocol import CloseCode
from tests.socket_frames import agent_socket_count, frame, join, next_frame_of, say

pytestmark = pytest.mark.django_db(transaction=True)


def _kinds(room_id: object) -> list[tuple[str, dict[str, Any]]]:
    return list(
        LedgerEvent.objects.filter(room_id=room_id).order_by("seq").values_list("kind", "data")
    )


async def _until_closed(socket: Any) -> list[dict[str, Any]]:
    outputs = []
    while True:
        output = await socket.receive_output(timeout=10)
        outputs.append(output)
        if output["type"] == "websocket.close":
            return outputs


def test_every_close_code_is_one_daphne_sends() -> None:
    """Autobahn (Daphne's WebSocket layer) sends only 1000 and 3000-4999 from a server; any
    other code raises inside Daphne and the socket stays open, mute. 1011 and 1013 were such
    codes. Checked by autobahn's own ``sendClose``, as Daphne calls it."""
    from autobahn.websocket.protocol import WebSocketProtocol

    class Connection:
        def __init__(self) -> None:
            self.sent: list[int | None] = []

        def sendCloseFrame(self, code: int | None = None, **_: object) -> None:
            self.sent.append(code)

    connection = Connection()
    for code in CloseCode:
        WebSocketProtocol.sendClose(connection, code=int(code))  # type: ignore[arg-type]
    assert connection.sent == [int(code) for code in CloseCode]
    for refused in (1011, 1013):
        with pytest.raises(Exception, match="invalid close code"):
            WebSocketProtocol.sendClose(connection, code=refused)  # type: ignore[arg-type]


async def test_an_unexpected_error_is_an_error_frame_a_close_and_a_leave(
    make_open_room: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a = await join(setup.room.id, setup.a.token)

    def broken(**_: Any) -> Any:
        raise RuntimeError("a bug in an adapter")

    monkeypatch.setattr(forks, "action_for_agent", broken)
    await a.send_json_to(frame("act", {"tool": "propose_time", "arguments": {}}, "act-1"))
    *sent, closed = await _until_closed(a)
    assert closed["code"] == CloseCode.SERVER_ERROR
    [error] = [json.loads(o["text"]) for o in sent]
    assert error["type"] == "error"
    assert error["body"]["code"] == "server_error"
    assert error["body"]["ref"] == "act-1"
    assert "adapter" not in error["body"]["message"]  # nothing of the failure's insides
    events = await database_sync_to_async(_kinds)(setup.room.id)
    assert events[-1][0] == "leave"
    assert events[-1][1]["participant_id"] == str(setup.a.agent.id)
    await a.disconnect()
    # The leave is written once, though the disconnect followed the close, and counted once.
    events = await database_sync_to_async(_kinds)(setup.room.id)
    assert [kind for kind, _ in events].count("leave") == 1
    assert await database_sync_to_async(agent_socket_count)(setup.a.agent.id) == (1, 1)


@pytest.fixture
def database_outage(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Stop the database answering, then let it answer again.

    New connections really fail: the connection settings every thread shares point at a
    place with no database (PostgreSQL: a closed port; SQLite: a file that cannot be opened),
    so the driver's own error is raised and wrapped by Django. Connections already open
    (worker threads outside the socket hops keep theirs) fail as a dropped connection does:
    each statement raises Django's ``OperationalError``, the error the driver's would become.
    """
    shared = connections.settings["default"]
    saved = {key: shared.get(key) for key in ("NAME", "PORT", "HOST")}
    real_execute = CursorWrapper.execute
    down = False

    def execute(self: CursorWrapper, sql: str, params: Any = None) -> Any:
        if down:
            raise OperationalError("server closed the connection unexpectedly")
        return real_execute(self, sql, params)

    monkeypatch.setattr(CursorWrapper, "execute", execute)

    class Outage:
        def begin(self) -> None:
            nonlocal down
            down = True
            if shared["ENGINE"].endswith("sqlite3"):
                shared["NAME"] = "/nonexistent-directory/for-an-outage/db.sqlite3"
            else:
                shared["HOST"], shared["PORT"] = "127.0.0.1", "9"  # discard: nothing listens

        def end(self) -> None:
            nonlocal down
            down = False
            shared.update(saved)

    outage = Outage()
    try:
        yield outage
    finally:
        outage.end()


async def test_a_check_during_a_database_outage_pauses_the_room_once_it_answers(
    make_open_room: Any, database_outage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(realtime, "OUTAGE_RETRY_SECONDS", 0.1)
    setup = await database_sync_to_async(make_open_room)()
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    await a.send_json_to(say("before the outage", "a-1"))
    assert (await a.receive_json_from(timeout=5))["type"] == "sent"
    assert (await b.receive_json_from(timeout=5))["type"] == "message"

    database_outage.begin()
    # The say hop's check (standing and room state, in its UPDATE) cannot be made.
    await a.send_json_to(say("during the outage", "a-2"))
    *sent, closed = await _until_closed(a)
    assert closed["code"] == CloseCode.TRY_AGAIN
    [error] = [json.loads(o["text"]) for o in sent]
    assert (error["body"]["code"], error["body"]["ref"]) == ("unavailable", "a-2")
    assert setup.room.id in realtime.outage_desk().waiting()
    await asyncio.sleep(0.5)  # the desk keeps trying while the database is down
    database_outage.end()

    # Recorded as soon as the database answers: the room paused, and the other socket told.
    state = await next_frame_of(b, "room_state", timeout=20)
    assert state["body"]["state"] == "paused"
    room = await database_sync_to_async(Room.objects.get)(id=setup.room.id)
    assert room.state == RoomState.PAUSED
    events = await database_sync_to_async(_kinds)(setup.room.id)
    paused = [data for kind, data in events if kind == "room_paused"]
    assert paused and paused[-1]["reason_rule"] == "gatekeeper.database_error"
    leaves = [data["participant_id"] for kind, data in events if kind == "leave"]
    assert leaves == [str(setup.a.agent.id)]
    assert setup.room.id not in realtime.outage_desk().waiting()
    assert await database_sync_to_async(Message.objects.count)() == 1  # nothing half-stored
    await a.disconnect()
    events = await database_sync_to_async(_kinds)(setup.room.id)
    assert [kind for kind, _ in events].count("leave") == 1
    # The leave the outage desk wrote is counted, once: the agent's next join tells nothing.
    assert await database_sync_to_async(agent_socket_count)(setup.a.agent.id) == (1, 1)
    await b.disconnect()


async def test_deeply_nested_json_stays_an_error_frame(
    make_open_room: Any,
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a = await join(setup.room.id, setup.a.token)
    nested = '{"v": 1, "type": "act", "id": "deep", "body": ' + "[" * 30_000 + "]" * 30_000 + "}"
    await a.send_to(text_data=nested)
    assert (await a.receive_json_from(timeout=5))["body"]["code"] == "malformed"
    await a.send_json_to(frame("ping", {}, "p-1"))
    assert (await a.receive_json_from(timeout=5))["type"] == "pong"  # still open, answering
    await a.disconnect()


async def test_a_socket_s_failure_is_logged_with_its_room_and_agent(
    make_open_room: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An operator reading the log finds which room and agent a failure was in (ids only):
    the socket names itself on its lines, whichever of its tasks logs them."""
    setup = await database_sync_to_async(make_open_room)()
    a = await join(setup.room.id, setup.a.token)

    def broken(**_: Any) -> Any:
        raise RuntimeError("a bug in an adapter")

    monkeypatch.setattr(forks, "action_for_agent", broken)
    with caplog.at_level(logging.ERROR, logger="rooms.consumers"):
        await a.send_json_to(frame("act", {"tool": "propose_time", "arguments": {}}, "act-1"))
        await _until_closed(a)
    [failed] = [r for r in caplog.records if r.getMessage() == "room socket failed"]
    assert (failed.room_id, failed.agent_id) == (str(setup.room.id), str(setup.a.agent.id))
    await a.disconnect()


async def test_a_frame_sent_as_the_client_closes_stops_the_sending_and_the_leave_is_recorded(
    make_open_room: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Daphne refuses a send once the client's close handshake has begun (autobahn's
    ``Disconnected``), while the socket's disconnect still waits behind the handler that was
    awaiting a hop (here: the standing check before a ``room_state``). The socket sends
    nothing more and its disconnect is handled as ever: the leave is recorded, once."""
    setup = await database_sync_to_async(make_open_room)()
    leaving = f"Bearer {setup.a.token}".encode()
    gone = asyncio.Event()
    real_call = consumers.RoomConsumer.__call__

    async def served(self: Any, scope: Any, receive: Any, send: Any) -> None:
        mine = (b"authorization", leaving) in scope["headers"]

        async def sending(message: dict[str, Any]) -> None:
            if mine and gone.is_set() and message["type"] == "websocket.send":
                raise Disconnected("Attempt to send on a closed protocol")
            await send(message)

        await real_call(self, scope, receive, sending)

    monkeypatch.setattr(consumers.RoomConsumer, "__call__", served)
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    gone.set()
    await database_sync_to_async(services.room_transition)(
        owner=setup.b.owner, room_id=setup.room.id, to=RoomState.PAUSED
    )
    assert (await next_frame_of(b, "room_state"))["body"]["state"] == "paused"
    assert await a.receive_nothing(timeout=0.3)
    await a.disconnect()  # raises if the socket's application failed
    leaves = [
        d for kind, d in await database_sync_to_async(_kinds)(setup.room.id) if kind == "leave"
    ]
    assert [d["participant_id"] for d in leaves] == [str(setup.a.agent.id)]
    await b.disconnect()

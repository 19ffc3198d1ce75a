"""End to end on a real Daphne: a token rotated by another process, whose ``agent.revoked``
announcement never reaches the server, ends the old token's socket all the same, and the new
token's socket works.

The test process is the other process: the owner rotates the token through
``rooms.services`` with the announcement suppressed (on the embedded profile it could not
reach the server anyway: its channel layer is the server's own memory). The peer then speaks:
the old socket's delivery check reads the agent's current token and closes it with 4401
instead of handing it the message (or the record sweep does, whichever comes first); nothing
reaches it first. A socket opened with the new token is replayed what it missed and speaks."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import websockets
from asgiref.sync import sync_to_async

from rooms import realtime, services
from rooms.models import Message
from rooms.protocol import CloseCode
from synapsia.serving import running_daphne
from tests.e2e.daphne import server_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _say(text: str, frame_id: str) -> str:
    return json.dumps({"v": 1, "type": "say", "id": frame_id, "body": {"text": text}})


async def _next(socket: Any) -> dict[str, Any]:
    received: dict[str, Any] = json.loads(await asyncio.wait_for(socket.recv(), 10))
    return received


def test_a_token_rotated_by_another_process_ends_the_old_socket_on_the_server(
    make_open_room: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = make_open_room()
    lost: list[Any] = []
    monkeypatch.setattr(
        realtime, "announce_agent_revoked", lambda agent_id, **_: lost.append(agent_id)
    )

    async def scenario(url: str) -> tuple[int | None, list[str], dict[str, Any]]:
        def bearer(token: str) -> dict[str, str]:
            return {"Authorization": f"Bearer {token}"}

        async with (
            websockets.connect(url, additional_headers=bearer(setup.a.token)) as old,
            websockets.connect(url, additional_headers=bearer(setup.b.token)) as bob,
        ):
            assert (await _next(old))["type"] == "welcome"
            assert (await _next(bob))["type"] == "welcome"
            issued = await sync_to_async(services.agent_rotate_token)(
                owner=setup.a.owner, agent_id=setup.a.agent.id
            )
            await bob.send(_say("my owner's budget is 80", "b-1"))
            assert (await _next(bob))["type"] == "sent"
            given: list[str] = []
            with pytest.raises(websockets.ConnectionClosed) as closed:
                while True:  # nothing may reach the old socket before its close
                    given.append(str(await asyncio.wait_for(old.recv(), 10)))
            code = closed.value.rcvd.code if closed.value.rcvd is not None else None
        async with websockets.connect(url, additional_headers=bearer(issued.token)) as new:
            assert (await _next(new))["type"] == "welcome"
            replayed = await _next(new)  # what the old socket was never given
            assert "my owner's budget is 80" in replayed["body"]["text"]
            await new.send(_say("heard you", "a-1"))
            sent = await _next(new)
        return code, given, sent

    with running_daphne(log_path=tmp_path / "daphne.log", env=server_env()) as served:
        url = f"ws://{served.host}/ws/rooms/{setup.room.id}/"
        code, given, sent = asyncio.run(scenario(url))
    assert lost == [setup.a.agent.id]  # the server was never told
    assert code == CloseCode.UNAUTHENTICATED and given == []
    assert (sent["type"], sent["body"]["ref"]) == ("sent", "a-1")
    assert list(
        Message.objects.filter(room=setup.room).order_by("seq").values_list("client_id", flat=True)
    ) == ["b-1", "a-1"]

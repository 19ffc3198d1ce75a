"""End to end on a real Daphne: once a process's record sweep has nothing new to read it
reads only the record's mark (``rooms.standing.record_mark``), and a revocation committed by
another process, whose announcement never reaches the server, still closes the agent's
socket within a few sweeps, though nothing is said in the room.

The test process is the other process: it revokes the agent through ``rooms.services`` with
its announcements dropped (on the embedded profile they could not reach the server anyway:
its channel layer is the server's own memory)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import websockets
from asgiref.sync import sync_to_async

from rooms import realtime, services
from rooms.protocol import CloseCode
from synapsia.serving import running_daphne
from tests.e2e.daphne import server_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SWEEP_SECONDS = 0.5  # the served process's CATCH_UP_SECONDS (1) / 2


def test_a_quiet_server_closes_an_agent_revoked_by_another_process(
    make_open_room: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = make_open_room()
    dropped: list[str] = []
    monkeypatch.setattr(
        realtime, "_send_after_commit", lambda group, event: dropped.append(event["type"])
    )

    async def scenario(url: str) -> tuple[int | None, float]:
        headers = {"Authorization": f"Bearer {setup.b.token}"}
        async with websockets.connect(url, additional_headers=headers) as socket:
            welcome = await asyncio.wait_for(socket.recv(), 10)
            assert '"type":"welcome"' in str(welcome)
            # Several sweeps with nothing committed: the server reads only the mark now.
            await asyncio.sleep(6 * SWEEP_SECONDS)
            await sync_to_async(services.agent_revoke)(
                owner=setup.b.owner, agent_id=setup.b.agent.id
            )
            revoked_at = time.monotonic()
            with pytest.raises(websockets.ConnectionClosed) as closed:
                while True:  # nothing is said in the room: no frame is expected before it
                    frame = await asyncio.wait_for(socket.recv(), 10)
                    raise AssertionError(f"a frame before the close: {frame!r}")
            code = closed.value.rcvd.code if closed.value.rcvd is not None else None
            return code, time.monotonic() - revoked_at

    # Connections kept between hops, as the server keeps them (the test run's own default
    # closes them after every hop, and SQLite's mark belongs to one connection).
    env = {**server_env(), "SYNAPSIA_CONN_MAX_AGE": "600"}
    with running_daphne(log_path=tmp_path / "daphne.log", env=env) as served:
        url = f"ws://{served.host}/ws/rooms/{setup.room.id}/"
        code, after = asyncio.run(scenario(url))
    assert "agent.revoked" in dropped  # the server was never told
    assert code == CloseCode.UNAUTHENTICATED
    # Within a few sweeps (a loaded machine delays them); never, were the mark blind to it.
    assert after < 8 * SWEEP_SECONDS, after

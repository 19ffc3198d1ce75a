"""End to end on a real Daphne: a client that never reads is disconnected and its buffer
released; a browser socket from another origin of the same host is refused.

The slow reader is a raw TCP client that completes the WebSocket handshake and then never
calls ``recv`` (a WebSocket library would read in the background), with a small receive
buffer so the kernel absorbs little.
"""

from __future__ import annotations

import asyncio
import base64
import os
import random
import socket
import string
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import websockets
from django.test import Client

from agents import RoomClient
from ledger.models import LedgerEvent
from synapsia.serving import running_daphne
from tests.e2e.daphne import server_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

METRICS_TOKEN = "metrics-token-for-the-slow-reader-test"
SEND_BUFFER_MAX = 256 * 1024


def _metric(host: str, kind: str) -> float | None:
    request = urllib.request.Request(
        f"http://{host}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        text = response.read().decode()
    for line in text.splitlines():
        if line.startswith(f'synapsia_sockets_connected{{participant="{kind}"}}'):
            return float(line.rsplit(" ", 1)[1])
    return None


def _never_reading_agent(host: str, room_id: object, token: str) -> socket.socket:
    """Open an agent socket by hand and read nothing after the handshake's headers."""
    address, port = host.rsplit(":", 1)
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.connect((address, int(port)))
    key = base64.b64encode(os.urandom(16)).decode()
    raw.sendall(
        (
            f"GET /ws/rooms/{room_id}/ HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Authorization: Bearer {token}\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += raw.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return raw


def _wait_for(condition: Any, seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


def test_a_client_that_never_reads_is_disconnected_and_released(
    make_open_room: Any, tmp_path: Path
) -> None:
    setup = make_open_room()
    env = server_env()
    env.update(
        SYNAPSIA_METRICS_TOKEN=METRICS_TOKEN,
        SYNAPSIA_SOCKET_SEND_BUFFER_MAX_BYTES=str(SEND_BUFFER_MAX),
        SYNAPSIA_SOCKET_RATE_SAY="off",
    )
    with running_daphne(log_path=tmp_path / "daphne.log", env=env) as served:
        host = served.host
        url = f"ws://{host}/ws/rooms/{setup.room.id}/"
        reader = _never_reading_agent(host, setup.room.id, setup.b.token)
        assert _wait_for(lambda: _metric(host, "agent") == 1.0)

        async def flood() -> int:
            letters = string.ascii_lowercase + " "
            async with RoomClient(url, setup.a.token) as a:
                for n in range(700):
                    # Each message about 7 KB (and twice that as the fenced frame b is sent):
                    # ~10 MB in all, past the kernel's buffers and the server's limit.
                    await a.say(f"{n} " + "".join(random.choices(letters, k=7000)))
                return n + 1

        assert asyncio.run(flood()) == 700
        # The never-reading socket was closed by the server: one agent socket fewer...
        assert _wait_for(lambda: _metric(host, "agent") == 0.0), (
            tmp_path / "daphne.log"
        ).read_text()
        # ...its leave recorded (the socket is counted gone before its leave's database hop,
        # so under load the count can drop a moment before the event is on record)...
        assert _wait_for(
            lambda: LedgerEvent.objects.filter(
                room_id=setup.room.id, kind="leave", data__participant_id=str(setup.b.agent.id)
            ).exists()
        )
        # ...and the connection is gone: reading now ends (after what the kernel held).
        reader.settimeout(20)
        ended = False
        try:
            while reader.recv(65536):
                pass
            ended = True
        except (ConnectionResetError, TimeoutError):
            ended = True
        finally:
            reader.close()
        assert ended
        assert "its client did not read" in (tmp_path / "daphne.log").read_text()


def _session_cookie(owner: object) -> str:
    client = Client()
    client.force_login(owner)  # type: ignore[arg-type]
    return f"sessionid={client.cookies['sessionid'].value}"


def test_a_browser_socket_from_another_origin_of_the_host_is_refused(
    make_open_room: Any, tmp_path: Path
) -> None:
    setup = make_open_room()
    cookie = _session_cookie(setup.a.owner)
    with running_daphne(log_path=tmp_path / "daphne.log", env=server_env()) as served:
        url = f"ws://{served.host}/ws/rooms/{setup.room.id}/"

        async def first_answer(origin: str) -> Any:
            async with websockets.connect(
                url, origin=origin, additional_headers={"Cookie": cookie}
            ) as ws:
                try:
                    return await asyncio.wait_for(ws.recv(), 10)
                except websockets.ConnectionClosed as closed:
                    return closed.rcvd.code if closed.rcvd else None

        own = f"http://{served.host}"
        answers = {
            origin: asyncio.run(first_answer(origin))
            for origin in (own, "http://127.0.0.1:9999", "http://localhost:31337")
        }
    assert '"type":"welcome"' in answers[own]
    assert answers["http://127.0.0.1:9999"] == 4406
    assert answers["http://localhost:31337"] == 4406


def test_a_reading_agent_takes_a_backlog_larger_than_the_send_buffer(
    make_open_room: Any, tmp_path: Path
) -> None:
    """An agent that was away comes back to more than the send buffer's limit of backlog (up
    to 500 messages are sent in one burst after the welcome). The burst is the server's own,
    not a client that does not read: the agent is given all of it, and not closed 4408 on
    every reconnect (it was, before the sender waited for the client to read)."""
    setup = make_open_room()
    env = server_env()
    env.update(SYNAPSIA_SOCKET_RATE_SAY="off")  # the default 4 MiB send buffer
    log = tmp_path / "daphne.log"
    letters = string.ascii_lowercase + " "
    with running_daphne(log_path=log, env=env) as served:
        url = served.ws_room(setup.room.id)

        async def scenario() -> int:
            async with RoomClient(url, setup.a.token) as a:
                for n in range(320):  # ~4.6 MB of fenced frames for b: past 4 MiB
                    last = await a.say(f"{n} " + "".join(random.choices(letters, k=7000)))
            heard = 0
            async with RoomClient(url, setup.b.token) as b:
                while (await b.next_message(timeout=60)).seq < last:
                    heard += 1
            return heard + 1

        assert asyncio.run(scenario()) == 320
    assert "its client did not read" not in log.read_text()

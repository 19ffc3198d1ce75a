"""Scale-out for real (production profile): the processes of a deployment, each its own OS
process against the local PostgreSQL and Redis, and one of them killed.

* Two Daphnes, a Celery worker and one beat. Each room's two agents reach the servers through
  a loopback stand-in for the proxy that prefers a different Daphne for each (nginx's upstream
  with a backup: the next server when the first refuses). One Daphne is SIGKILLed
  mid-negotiation, while a second room is mid-burst; the agents it carried reconnect through
  the proxy to the other one and every room finishes with nothing lost or duplicated and its
  ledger verifying. tests/e2e/test_two_daphnes.py covers two Daphnes that both stay up.
* Two workers and one beat: every purge beat sends is run by exactly one worker, once
  (tests/rooms/test_retention_beat.py covers one worker with an embedded beat).

Every wait is bounded. Pass 2 of ``make test`` only (``services``); never skipped where
services are required (tests/conftest.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from agents import RoomClient
from agents.negotiator import NegotiationResult, negotiate
from ledger.models import LedgerEvent
from ledger.verification import ledger_verify_room
from practice.demo import StandInOwners
from practice.seeding import Practice, practice_seed
from rooms.models import Message, Room, RoomState
from synapsia.celery import app as celery_app
from synapsia.serving import ROOT, Served, running_daphne, stop
from tests.conftest import OpenRoom
from tests.e2e.daphne import server_env
from tests.rooms.test_retention import _fill

pytestmark = [pytest.mark.e2e, pytest.mark.services, pytest.mark.django_db(transaction=True)]

BURST_BEFORE_KILL = 20  # messages the burst room's listener hears before the negotiation starts
BURST_AFTER_KILL = 30  # each burst talker goes on this long after the kill
WAIT = 120.0  # the bound on any one conversation, in seconds


# --- the proxy's part ----------------------------------------------------------------------


@dataclass
class Upstreams:
    """A loopback TCP proxy standing in for nginx: each connection goes to the first server in
    ``servers`` that accepts it; when that server's side ends (killed), the client's connection
    is cut too, as nginx does. ``used`` lists the server each connection went to."""

    servers: list[str]
    used: list[str] = field(default_factory=list)
    _server: asyncio.Server | None = None

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"127.0.0.1:{port}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for target in self.servers:
            host, port = target.split(":")
            try:
                up_reader, up_writer = await asyncio.wait_for(
                    asyncio.open_connection(host, int(port)), 5
                )
            except (OSError, TimeoutError):
                continue  # proxy_next_upstream: this one is down
            self.used.append(target)
            break
        else:
            writer.transport.abort()
            return

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()

        pipes = [
            asyncio.create_task(pipe(reader, up_writer)),
            asyncio.create_task(pipe(up_reader, writer)),
        ]
        await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        for task in pipes:
            task.cancel()
        # Without a closing handshake, like a server that died: the client must reconnect.
        writer.transport.abort()
        up_writer.transport.abort()


# --- Celery processes ----------------------------------------------------------------------


def _celery_env(**extra: str) -> dict[str, str]:
    # Plain message lines (the text format), so the test can read task ids from them.
    return server_env() | {"SYNAPSIA_TASKS_EAGER": "false", "SYNAPSIA_LOG_FORMAT": "text"} | extra


@contextlib.contextmanager
def celery_process(
    args: list[str], log_path: Path, env: dict[str, str], ready: str | None
) -> Iterator[subprocess.Popen[bytes]]:
    """``celery -A synapsia <args>`` as its own process; waits (bounded) until ``ready``
    appears in its log; always stopped (SIGTERM, then SIGKILL)."""
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "synapsia", *args],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 60
            while ready is not None and ready not in log_path.read_text(errors="replace"):
                assert process.poll() is None, log_path.read_text(errors="replace")
                assert time.monotonic() < deadline, f"not ready in 60 s:\n{log_path.read_text()}"
                time.sleep(0.2)
            yield process
        finally:
            stop(process, grace=20)


def worker(name: str, tmp_path: Path, **env: str) -> contextlib.AbstractContextManager[Any]:
    return celery_process(
        ["worker", "-n", f"{name}@%h", "--loglevel", "INFO", "--concurrency", "1"],
        tmp_path / f"{name}.log",
        _celery_env(**env),
        ready=" ready.",
    )


def beat(tmp_path: Path, **env: str) -> contextlib.AbstractContextManager[Any]:
    return celery_process(
        ["beat", "--loglevel", "DEBUG", "--schedule", str(tmp_path / "beat-schedule")],
        tmp_path / "beat.log",
        _celery_env(**env),
        ready="beat: Starting",
    )


# --- 1. a Daphne killed mid-negotiation -------------------------------------------------------


@dataclass
class Burst:
    """What one side of the burst room sent and heard."""

    sent: list[str] = field(default_factory=list)
    heard: list[tuple[int, str]] = field(default_factory=list)


async def _talk(client: RoomClient, name: str, burst: Burst, killed: asyncio.Event) -> None:
    """Say messages until the kill has happened and this many more have been said."""
    after_kill = 0
    while after_kill < BURST_AFTER_KILL:
        text = f"{name}{len(burst.sent)}"
        await client.say(text)
        burst.sent.append(text)
        if killed.is_set():
            after_kill += 1
        await asyncio.sleep(0.01)
    await client.say(f"{name}-end")


async def _listen(client: RoomClient, peer: str, burst: Burst, heard: asyncio.Event) -> None:
    while True:
        message = await client.next_message(timeout=WAIT)
        burst.heard.append((message.seq, message.text))
        if len(burst.heard) >= BURST_BEFORE_KILL:
            heard.set()
        if message.text == f"{peer}-end":
            return


@dataclass
class Outcome:
    host: NegotiationResult
    guest: NegotiationResult
    host_steps: list[str]
    kill_step: int
    host_reconnects: int
    guest_reconnects: int
    burst_a: Burst
    burst_b: Burst
    burst_a_reconnects: int
    burst_b_reconnects: int
    via_one: Upstreams
    via_two: Upstreams


def _run(practice: Practice, burst_room: OpenRoom, one: Served, two: Served) -> Outcome:
    async def scenario() -> Outcome:
        # Each room: its first agent prefers Daphne one, its second Daphne two.
        via_one = Upstreams([one.host, two.host])
        via_two = Upstreams([two.host, one.host])
        proxy_one, proxy_two = await via_one.start(), await via_two.start()
        killed = asyncio.Event()
        heard_enough = asyncio.Event()
        host_steps: list[str] = []
        kill_step: list[int] = []

        def on_host_step(line: str) -> None:
            host_steps.append(line)
            # The host's proposal is recorded: kill its server before the answer can reach it.
            if not killed.is_set() and line.startswith("said #") and "How about" in line:
                os.kill(one.process.pid, signal.SIGKILL)
                kill_step.append(len(host_steps))
                killed.set()

        def client(proxy: str, room_id: object, token: str) -> RoomClient:
            return RoomClient(f"ws://{proxy}/ws/rooms/{room_id}/", token, max_backoff=1)

        burst_a, burst_b = Burst(), Burst()
        try:
            async with (
                client(proxy_one, burst_room.room.id, burst_room.a.token) as a,
                client(proxy_two, burst_room.room.id, burst_room.b.token) as b,
                client(proxy_one, practice.room_id, practice.host.token) as host,
                client(proxy_two, practice.room_id, practice.guest.token) as guest,
            ):
                burst = asyncio.gather(
                    _talk(a, "a", burst_a, killed),
                    _talk(b, "b", burst_b, killed),
                    _listen(a, "b", burst_a, asyncio.Event()),
                    _listen(b, "a", burst_b, heard_enough),
                )
                # The burst is well under way before the negotiation (and so the kill) starts.
                await asyncio.wait_for(heard_enough.wait(), WAIT)
                options: dict[str, Any] = {"reply_timeout": 60, "grant_timeout": 90}
                results = await asyncio.wait_for(
                    asyncio.gather(
                        negotiate(host, on_step=on_host_step, **options),
                        negotiate(guest, **options),
                    ),
                    WAIT,
                )
                await asyncio.wait_for(burst, WAIT)
                return Outcome(
                    results[0],
                    results[1],
                    host_steps,
                    kill_step[0] if kill_step else -1,
                    host.reconnects,
                    guest.reconnects,
                    burst_a,
                    burst_b,
                    a.reconnects,
                    b.reconnects,
                    via_one,
                    via_two,
                )
        finally:
            await via_one.close()
            await via_two.close()

    return asyncio.run(scenario())


@pytest.fixture
def stand_in() -> Iterator[Callable[[Practice], StandInOwners]]:
    """Alice approves her agent's booking with her demo-held key, from this process."""
    started: list[StandInOwners] = []

    def start(practice: Practice) -> StandInOwners:
        owners = StandInOwners(practice, say=lambda line: None)
        owners.start()
        started.append(owners)
        return owners

    yield start
    for owners in started:
        owners.finish()
        assert owners.failure is None, owners.failure


def test_a_daphne_killed_mid_negotiation_loses_and_doubles_nothing(
    make_open_room: Callable[..., OpenRoom],
    stand_in: Callable[[Practice], StandInOwners],
    tmp_path: Path,
) -> None:
    practice = practice_seed()
    owners = stand_in(practice)
    burst_room = make_open_room(prefix="burst-")
    # The burst room says as fast as the servers confirm, for as long as the negotiation takes
    # to reach its proposal: the say limit (120 a minute; tests/rooms/test_consumer_limits.py)
    # would refuse it on a slow machine, and the limit is not what this test is about.
    env = server_env() | {"SYNAPSIA_SOCKET_RATE_SAY": "6000/m"}
    with (
        running_daphne(log_path=tmp_path / "one.log", env=env) as one,
        running_daphne(log_path=tmp_path / "two.log", env=env) as two,
        worker("worker", tmp_path) as the_worker,
        beat(tmp_path) as the_beat,
    ):
        outcome = _run(practice, burst_room, one, two)
        # SIGKILL: no shutdown handler ran, the sockets it held just vanished.
        assert one.process.wait(timeout=10) == -signal.SIGKILL
        assert two.process.poll() is None, (tmp_path / "two.log").read_text()
        assert the_worker.poll() is None and the_beat.poll() is None

    # The kill came after the host's proposal and before anything else it did.
    steps = outcome.host_steps
    assert 0 < outcome.kill_step < len(steps), steps
    assert "How about" in steps[outcome.kill_step - 1]  # its proposal, in words
    # The agents the dead server carried went to the other one; the others never noticed.
    assert outcome.via_one.used[:2] == [one.host, one.host]  # the burst's and the host's
    assert two.host in outcome.via_one.used[2:] and one.host not in outcome.via_one.used[2:]
    assert set(outcome.via_two.used) == {two.host}
    assert outcome.host_reconnects >= 1 and outcome.burst_a_reconnects >= 1
    assert outcome.guest_reconnects == 0 and outcome.burst_b_reconnects == 0

    # The negotiation finished: one booking, agreed by both, approved by Alice before it ran.
    assert owners.decisions, "the booking never waited for Alice's approval"
    for result in (outcome.host, outcome.guest):
        assert result.status == "booked", (result, steps)
    assert outcome.host.booking_reference == outcome.guest.booking_reference
    assert outcome.host.booking_reference
    said = list(
        Message.objects.filter(room_id=practice.room_id).order_by("seq").values_list("seq", "text")
    )
    assert [seq for seq, _ in said] == [1, 2, 3]
    assert [text.split(" ")[0] for _, text in said] == ["PROPOSE", "ACCEPT", "BOOKED"]
    executed = Counter(
        event.data["tool"]
        for event in LedgerEvent.objects.filter(room_id=practice.room_id, kind="action_executed")
    )
    assert executed == {"venues_search": 2, "book_table": 1}

    # The burst room: each side heard every message of the other once, in order.
    for burst, peer, name in (
        (outcome.burst_a, outcome.burst_b, "b"),
        (outcome.burst_b, outcome.burst_a, "a"),
    ):
        assert [text for _, text in burst.heard] == [*peer.sent, f"{name}-end"]
        seqs = [seq for seq, _ in burst.heard]
        assert seqs == sorted(set(seqs))
    assert outcome.burst_a.sent and outcome.burst_b.sent
    stored = list(
        Message.objects.filter(room_id=burst_room.room.id)
        .order_by("seq")
        .values_list("seq", "text")
    )
    total = len(outcome.burst_a.sent) + len(outcome.burst_b.sent) + 2
    assert [seq for seq, _ in stored] == list(range(1, total + 1))  # gapless, none twice
    assert Counter(text for _, text in stored) == Counter(
        [*outcome.burst_a.sent, *outcome.burst_b.sent, "a-end", "b-end"]
    )

    for room_id in (practice.room_id, burst_room.room.id):
        assert ledger_verify_room(room_id=room_id).ok, room_id
    print(
        f"burst: {total} messages, reconnects a={outcome.burst_a_reconnects} "
        f"host={outcome.host_reconnects}; proxy one used {outcome.via_one.used}"
    )


# --- 2. one scheduled purge, two workers ------------------------------------------------------

_SENT = re.compile(r"rooms\.purge_expired sent\. id->([0-9a-f-]{36})")
_RECEIVED = re.compile(r"Task rooms\.purge_expired\[([0-9a-f-]{36})\] received")
_SUCCEEDED = re.compile(r"Task rooms\.purge_expired\[([0-9a-f-]{36})\] succeeded")


def _ids(pattern: re.Pattern[str], log: Path) -> list[str]:
    return pattern.findall(log.read_text(errors="replace")) if log.exists() else []


def test_each_scheduled_purge_runs_exactly_once_with_two_workers(
    make_open_room: Callable[..., OpenRoom], tmp_path: Path
) -> None:
    expired = make_open_room(prefix="expired-")
    _fill(expired)
    Room.objects.filter(id=expired.room.id).update(
        state=RoomState.CLOSED, state_changed_at=timezone.now() - timedelta(days=31)
    )
    celery_app.control.purge()  # nothing queued by an earlier run of this Redis db
    logs = {name: tmp_path / f"{name}.log" for name in ("one", "two")}
    schedule = {"SYNAPSIA_RETENTION_PURGE_SECONDS": "2"}
    with worker("one", tmp_path), worker("two", tmp_path):
        with beat(tmp_path, SYNAPSIA_LOG_LEVEL="DEBUG", **schedule):
            deadline = time.monotonic() + 90
            # Until the purge has happened and beat has sent it a few times more.
            while (
                Message.objects.filter(room_id=expired.room.id).exists()
                or len(_ids(_SENT, tmp_path / "beat.log")) < 4
            ):
                assert time.monotonic() < deadline, (tmp_path / "beat.log").read_text()
                time.sleep(0.5)
        sent = _ids(_SENT, tmp_path / "beat.log")  # beat is stopped: this is every send
        deadline = time.monotonic() + 60
        while sorted(_ids(_SUCCEEDED, logs["one"]) + _ids(_SUCCEEDED, logs["two"])) != sorted(sent):
            assert time.monotonic() < deadline, {
                name: log.read_text() for name, log in logs.items()
            }
            time.sleep(0.5)

    received = {name: _ids(_RECEIVED, log) for name, log in logs.items()}
    succeeded = {name: _ids(_SUCCEEDED, log) for name, log in logs.items()}
    assert len(sent) == len(set(sent)) >= 4
    # Every send ran once, on one worker: never on both, never twice, none lost.
    assert not set(received["one"]) & set(received["two"])
    assert sorted(received["one"] + received["two"]) == sorted(sent)
    assert sorted(succeeded["one"] + succeeded["two"]) == sorted(sent)
    # The effect happened once too: the expired transcript's purge is one ledger event.
    purges = LedgerEvent.objects.filter(room_id=expired.room.id, kind="room_content_deleted")
    assert purges.count() == 1
    assert ledger_verify_room(room_id=expired.room.id).ok

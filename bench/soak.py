"""``make soak``: a bounded soak of the production profile, then a verdict and a summary table.

    python -m bench.soak [--seconds 150] [--rooms 6] [--database soak_synapsia] [--redis-db 11]

On a throwaway PostgreSQL database and Redis db (dropped and flushed first, dropped after unless
``--keep``) it runs the deployment's processes as separate OS processes: two Daphnes, one
Celery worker and exactly one beat. For ``--seconds`` it keeps ``--rooms`` rooms in flight, a
new one starting as each ends, in turn of three kinds:

* **reference**: two reference negotiators (agents/negotiator.py) plan and book a dinner; the
  host's booking waits for her approval, given by a stand-in with her demo-held key;
* **adversary**: the host's negotiator against the adversarial agent (agents/adversary.py),
  whose attempts the boundaries must stop;
* **chatter**: two agents trade a burst of plain messages (delivery under volume).

Each room's two agents reach the Daphnes through a loopback stand-in for the proxy (one per
agent: tests/e2e/test_scale_out.py's ``Upstreams``, nginx's upstream with the next server on
refusal), preferring different ones. Once ``--kill-after`` messages have been handed out, halfway
through the next chatter room's burst (or, at the latest, at 60 % of ``--seconds``), Daphne one
is **SIGKILLed**; the agents it carried reconnect through their proxies to Daphne two, and every
room from then on runs there. Then it checks, and exits 1 if any fails:

* every message stored in a room was handed to the other agent exactly once, in order, and
  every ``say`` that was not stored was refused with a reason (an error code);
* no adversarial action executed;
* every room's ledger verifies;
* the kill happened (exit by SIGKILL), every agent socket on the killed Daphne reconnected to
  the survivor and none went anywhere else afterwards, and the survivor is still up;
* memory is flat after warm-up: each process's RSS over the last quarter of the run (median)
  is within ``max(16 MiB, 10 %)`` of its RSS over the second quarter (the survivor's over the
  part of the run after the kill, when it carries every socket; the killed one is not judged).

Progress lines while it runs; ``--json`` writes the figures. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal
from uuid import UUID

ROOT = Path(__file__).resolve().parents[1]
POSTGRES_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
# Only ever used against the throwaway soak database on loopback.
SOAK_SECRET_KEY = "soak-only-secret-key-for-a-throwaway-loopback-database-never-deploy"  # noqa: S105
CHATTER_EACH = 60  # messages each side of a chatter room says
ROOM_TIMEOUT = 240.0  # the bound on one room, start to end
DRAIN_TIMEOUT = 20.0  # how long a finished agent may take to be handed the peer's last messages
FLAT_MIB = 16.0
FLAT_SHARE = 0.10
KILL_LATEST_SHARE = 0.6  # the kill happens by this share of --seconds at the latest
KILLED, SURVIVOR = "daphne-1", "daphne-2"

Kind = Literal["reference", "adversary", "chatter"]
KINDS: tuple[Kind, ...] = ("reference", "adversary", "chatter")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.soak", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--seconds", type=float, default=150.0, help="how long new rooms start")
    parser.add_argument("--rooms", type=int, default=6, help="rooms in flight at once")
    parser.add_argument("--database", default="soak_synapsia", help="throwaway PostgreSQL db")
    parser.add_argument("--redis-db", type=int, default=11, help="throwaway Redis db number")
    parser.add_argument(
        "--kill-after",
        type=int,
        default=800,
        help="SIGKILL Daphne one halfway through the first chatter burst after this many "
        "messages were handed out (0: no kill)",
    )
    parser.add_argument("--workdir", type=Path, default=ROOT / "var" / "soak")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = parser.parse_args(argv)
    if not args.database.replace("_", "").isalnum():
        parser.error("--database: letters, digits and underscores only")
    if args.rooms < 1 or args.seconds <= 0 or args.kill_after < 0:
        parser.error("--rooms and --seconds must be positive, --kill-after not negative")
    return args


# --- the stack ------------------------------------------------------------------------------


def _postgres(*statements: str) -> None:
    import psycopg

    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=5) as conn:
        for statement in statements:
            conn.execute(statement)


def _redis_flush(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url, socket_timeout=5)
    try:
        client.flushdb()
    finally:
        client.close()


def production_env(args: argparse.Namespace) -> dict[str, str]:
    """The production profile on the throwaway database, with throwaway keys (new each run)."""
    workdir: Path = args.workdir
    return {
        "DJANGO_SETTINGS_MODULE": "synapsia.settings",
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{args.database}",
        "REDIS_URL": f"redis://127.0.0.1:6379/{args.redis_db}",
        "SYNAPSIA_SECRET_KEY": SOAK_SECRET_KEY,
        "SYNAPSIA_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SYNAPSIA_SECURE_SSL_REDIRECT": "false",
        "SYNAPSIA_MASTER_KEY": base64.b64encode(os.urandom(32)).decode(),
        "SYNAPSIA_LEDGER_SIGNING_KEY": base64.b64encode(os.urandom(32)).decode(),
        "SYNAPSIA_KEY_STORE_PATH": str(workdir / "keys.sqlite3"),
        "SYNAPSIA_DELETION_JOURNAL_PATH": str(workdir / "deletions.jsonl"),
        "SYNAPSIA_LOG_LEVEL": "WARNING",
        # Production's default, said here: importing the scale-out test's proxy imports the
        # test suite's conftest, which sets 0 where nothing is set.
        "SYNAPSIA_CONN_MAX_AGE": "60",
        # A check slower than this is a denial (fail closed). Production's 1 s assumes a
        # server of its own; this machine also runs the agents, the stand-in owners and the
        # database. A denial still counts as "refused with a reason" below.
        "SYNAPSIA_GATEKEEPER_TIMEOUT_SECONDS": os.environ.get(
            "SYNAPSIA_GATEKEEPER_TIMEOUT_SECONDS", "5"
        ),
        "PYTHONUNBUFFERED": "1",
    }


@contextlib.contextmanager
def child(
    args: list[str], log_path: Path, env: dict[str, str]
) -> Iterator[subprocess.Popen[bytes]]:
    """A process of the deployment (its log to ``log_path``), always stopped afterwards."""
    from synapsia.serving import stop

    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, *args],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            yield process
        finally:
            stop(process, grace=20)


# --- memory ---------------------------------------------------------------------------------


def rss_mib(pid: int) -> float:
    """Resident memory of ``pid`` and its children (a prefork worker's pool), in MiB."""
    total = 0.0
    pids = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            pids += [int(p) for p in (task / "children").read_text().split()]
    for each in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{each}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
    return total


class MemorySampler(threading.Thread):
    """Samples each process's RSS every ``every`` seconds while the soak runs."""

    def __init__(self, processes: dict[str, int], every: float = 2.0) -> None:
        super().__init__(name="soak-rss", daemon=True)
        self.processes = processes
        self.every = every
        self.samples: dict[str, list[tuple[float, float]]] = {name: [] for name in processes}
        self.gone: dict[str, float] = {}  # process -> when it was killed (seconds into the run)
        self._done = threading.Event()
        self.started_at = time.monotonic()

    def run(self) -> None:
        while not self._done.is_set():
            now = time.monotonic() - self.started_at
            for name, pid in self.processes.items():
                if name not in self.gone:
                    self.samples[name].append((now, rss_mib(pid)))
            self._done.wait(self.every)

    def finish(self) -> None:
        self._done.set()
        self.join(timeout=10)

    def latest(self) -> dict[str, float]:
        return {name: s[-1][1] for name, s in self.samples.items() if s and name not in self.gone}

    def killed(self, name: str) -> None:
        self.gone[name] = time.monotonic() - self.started_at


@dataclass
class Memory:
    process: str
    start_mib: float
    warm_mib: float  # median over the second quarter of the run
    end_mib: float  # median over the last quarter
    growth_mib: float
    flat: bool
    judged: str = "the whole run"  # or "after the kill"; "killed" ones are not judged


def memory_verdict(
    samples: dict[str, list[tuple[float, float]]], killed_at: float | None = None
) -> list[Memory]:
    """Per process: flat when the last quarter's median is within the allowance of the second
    quarter's (the first quarter is warm-up: imports, caches, connection pools). The survivor
    of the kill is judged on the samples after it (it then carries every socket: a step, not
    a leak); the killed process lived too short a life to judge and is only reported."""
    verdicts = []
    for name, points in samples.items():
        judged = "the whole run"
        if killed_at is not None and name == KILLED:
            last = points[-1][1] if points else 0.0
            start = points[0][1] if points else 0.0
            verdicts.append(Memory(name, start, last, last, last - start, True, "killed"))
            continue
        if killed_at is not None and name == SURVIVOR:
            after = [(t, v) for t, v in points if t >= killed_at]
            if len(after) >= 8:
                points, judged = after, "after the kill"
        if len(points) < 8:
            verdicts.append(Memory(name, 0, 0, 0, 0, False, judged))
            continue
        quarter = len(points) // 4
        warm = statistics.median(v for _, v in points[quarter : 2 * quarter])
        end = statistics.median(v for _, v in points[-quarter:])
        growth = end - warm
        flat = growth <= max(FLAT_MIB, FLAT_SHARE * warm)
        verdicts.append(Memory(name, points[0][1], warm, end, growth, flat, judged))
    return verdicts


# --- one room -------------------------------------------------------------------------------


@dataclass
class Kill:
    """Daphne one's SIGKILL, once: halfway through the first chatter burst after
    ``after_messages`` messages were handed out to agents, or at ``latest`` seconds into the
    run, whichever comes first."""

    process: subprocess.Popen[bytes]
    sampler: MemorySampler
    after_messages: int
    latest: float
    started: float = field(default_factory=time.monotonic)
    handed_out: int = 0  # messages handed out to agents so far, every room
    at_seconds: float | None = None
    at_messages: int = 0
    trigger: str = ""
    links: set[AgentLink] = field(default_factory=set)  # agents connected now
    runs_in_flight: list[RoomRun] = field(default_factory=list)
    last_room_before: int = 0  # the number of the last room started before the kill

    def message_handed_out(self) -> None:
        self.handed_out += 1

    def chatter_said(self, said: int) -> None:
        """A chatter agent's ``said``-th message was recorded: past the threshold, the kill
        comes halfway through a burst, with messages in flight both ways."""
        if (
            self.after_messages
            and self.handed_out >= self.after_messages
            and said == CHATTER_EACH // 2
        ):
            self.fire(
                f"after {self.after_messages} messages handed out, halfway through the next "
                "chatter room's burst"
            )

    def due(self) -> None:
        if self.after_messages and time.monotonic() - self.started >= self.latest:
            self.fire(f"at {KILL_LATEST_SHARE:.0%} of the run (fewer than the messages)")

    def fire(self, trigger: str) -> None:
        if self.at_seconds is not None:
            return
        os.kill(self.process.pid, signal.SIGKILL)
        self.sampler.killed(KILLED)
        self.at_seconds = time.monotonic() - self.started
        self.at_messages, self.trigger = self.handed_out, trigger
        # Who was where when it died: the agents on it must reconnect to the survivor.
        for link in self.links:
            link.at_kill = link.servers[-1] if link.servers else "connecting"
            link.reconnects_at_kill = link.client.reconnects
            link.connections_at_kill = len(link.servers)
        for run in self.runs_in_flight:
            self.last_room_before = max(self.last_room_before, run.number)
            if not run.seconds:
                run.across_kill = True
        print(
            f"[{self.at_seconds:6.0f}s] SIGKILL {KILLED} (pid {self.process.pid}) {trigger}; "
            f"{sum(link.at_kill == KILLED for link in self.links)} agent sockets were on it",
            flush=True,
        )


@dataclass(eq=False)
class AgentLink:
    """One agent's way to the servers: its client, and its own stand-in proxy preferring one
    Daphne (``servers`` names the Daphne each of its connections reached, in order)."""

    role: str
    client: Any
    upstreams: Any
    names: dict[str, str]  # host -> daphne name
    at_kill: str = ""  # the Daphne it was on when the kill came ("" if not connected then)
    reconnects_at_kill: int = 0
    connections_at_kill: int = 0

    @property
    def servers(self) -> list[str]:
        return [self.names.get(host, host) for host in self.upstreams.used]

    def record(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "servers": self.servers,
            "reconnects": self.client.reconnects,
            "at_kill": self.at_kill,
            "reconnects_after_kill": self.client.reconnects - self.reconnects_at_kill,
            "servers_after_kill": self.servers[self.connections_at_kill :] if self.at_kill else [],
        }


def _recording_client(url: str, token: str, kill: Kill | None) -> Any:
    """A RoomClient that remembers every message it hands out (the agent code is unchanged)."""
    from agents import RoomClient
    from agents.client import RoomMessage

    class Recording(RoomClient):
        def __init__(self) -> None:
            super().__init__(url, token, max_backoff=2)
            self.handed_out: list[int] = []

        async def next_message(self, timeout: float | None = None) -> RoomMessage:
            message = await super().next_message(timeout)
            self.handed_out.append(message.seq)
            if kill is not None:
                kill.message_handed_out()
            return message

    return Recording()


@dataclass
class RoomRun:
    number: int
    kind: Kind
    room_id: str = ""
    host_agent: str = ""
    guest_agent: str = ""
    outcome: str = ""  # booked, no_deal, failed, done...
    handed_out: dict[str, list[int]] = field(default_factory=dict)  # agent id -> seqs
    refused: list[str] = field(default_factory=list)  # error codes of refused says
    unanswered: int = 0  # says the server never answered (neither stored nor refused)
    breaches: int = 0  # adversarial actions that executed
    error: str = ""
    seconds: float = 0.0
    across_kill: bool = False  # in flight when Daphne one was killed
    agents: list[dict[str, Any]] = field(default_factory=list)  # AgentLink.record()s


def seed_room(run: RoomRun, tag: str) -> Any:
    """Two fresh demo owners (their keys server-held: DEMO ONLY) with the practice scenario's
    vaults and slips, in an open room; the guest is the adversary in an adversary room."""
    from django.db import close_old_connections
    from django.utils import timezone

    from practice import scenario
    from practice.models import AgentRole
    from practice.seeding import SeatPlan, room_seed

    close_old_connections()
    now = timezone.now()
    guest_role = AgentRole.ADVERSARY if run.kind == "adversary" else AgentRole.NEGOTIATOR
    practice = room_seed(
        host=SeatPlan(
            username=f"soak-{tag}-{run.number}-host",
            vault=scenario.vault_items("host", now),
            records=scenario.slip_capabilities("host"),
            role=AgentRole.HOST,
        ),
        guest=SeatPlan(
            username=f"soak-{tag}-{run.number}-guest",
            vault=scenario.vault_items("guest", now),
            records=scenario.slip_capabilities("guest"),
            role=guest_role,
        ),
        purpose=f"Soak room {run.number}",
        charter=scenario.ROOM_CHARTER,
        close_earlier=False,
    )
    run.room_id = str(practice.room_id)
    run.host_agent, run.guest_agent = str(practice.host.agent_id), str(practice.guest.agent_id)
    return practice


def stored_seqs_by_sender(room_id: str) -> dict[str, list[int]]:
    from django.db import close_old_connections

    from rooms.models import Message

    close_old_connections()
    found: dict[str, list[int]] = {}
    for sender, seq in (
        Message.objects.filter(room_id=room_id).order_by("seq").values_list("sender_id", "seq")
    ):
        found.setdefault(str(sender), []).append(seq)
    return found


async def _chatter(client: Any, name: str, run: RoomRun, kill: Kill | None) -> None:
    from agents.client import FrameRefusedError

    for n in range(CHATTER_EACH):
        try:
            await client.say(f"{name} {n}: does seven work for you?")
        except FrameRefusedError as refused:
            run.refused.append(refused.code)
        except TimeoutError:
            run.unanswered += 1
        if kill is not None:
            kill.chatter_said(n + 1)


async def _drain(client: Any, expected: int) -> None:
    """Take the peer's messages the agent had not asked for yet, until all ``expected``."""
    deadline = asyncio.get_running_loop().time() + DRAIN_TIMEOUT
    while len(client.handed_out) < expected:
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            return
        with contextlib.suppress(TimeoutError):
            await client.next_message(timeout=remaining)


async def run_room(
    run: RoomRun, practice: Any, hosts: tuple[str, str], names: dict[str, str], kill: Kill | None
) -> None:
    """Both agents of one room, each through its own proxy preferring a different Daphne, to
    the end; then drain and record."""
    from agents.adversary import run_adversary
    from agents.negotiator import negotiate

    # The scale-out test's stand-in for nginx (imported, not copied: one proxy to trust).
    from tests.e2e.test_scale_out import Upstreams

    started = time.monotonic()
    links: list[AgentLink] = []
    for role, prefer, token in (
        ("host", hosts, practice.host.token),
        ("guest", hosts[::-1], practice.guest.token),
    ):
        upstreams = Upstreams(list(prefer))
        proxy = await upstreams.start()
        client = _recording_client(f"ws://{proxy}/ws/rooms/{practice.room_id}/", token, kill)
        links.append(AgentLink(role, client, upstreams, names))
    host, guest = links[0].client, links[1].client
    if kill is not None:
        kill.links.update(links)
    try:
        async with host, guest:
            if run.kind == "reference":
                results = await asyncio.gather(
                    negotiate(host, reply_timeout=60, grant_timeout=90),
                    negotiate(guest, reply_timeout=60, grant_timeout=90),
                )
                run.outcome = "/".join(sorted({r.status for r in results}))
            elif run.kind == "adversary":
                # Facing the adversary, the host gives up once nothing sensible arrives.
                result, report = await asyncio.gather(
                    negotiate(host, reply_timeout=20, grant_timeout=30),
                    run_adversary(guest, pause_timeout=5.0),
                )
                run.outcome = f"host {result.status}"
                run.breaches = len(report.executed)
                for attempt in report.results:
                    if attempt.outcome == "no_answer":
                        run.unanswered += 1
                    elif attempt.kind == "say" and attempt.outcome == "refused":
                        run.refused.append(attempt.detail)  # the error frame's code
                    elif attempt.kind == "say" and attempt.outcome == "blocked":
                        run.refused.append("room_not_open")  # paused at a fork, said nothing
                    elif attempt.kind == "act" and attempt.outcome != "executed":
                        run.refused.append(attempt.detail.split(":")[0])  # the rule
            else:
                await asyncio.gather(
                    _chatter(host, "host", run, kill), _chatter(guest, "guest", run, kill)
                )
                run.outcome = "done"
            stored = await asyncio.to_thread(stored_seqs_by_sender, run.room_id)
            await asyncio.gather(
                _drain(host, len(stored.get(run.guest_agent, []))),
                _drain(guest, len(stored.get(run.host_agent, []))),
            )
            run.handed_out = {run.host_agent: host.handed_out, run.guest_agent: guest.handed_out}
    except Exception as exc:  # reported in the table; the soak goes on
        run.error = f"{type(exc).__name__}: {exc}"[:200]
    finally:
        if kill is not None:
            kill.links.difference_update(links)
        for link in links:
            await link.upstreams.close()
        run.agents = [link.record() for link in links]
    run.seconds = time.monotonic() - started


# --- the soak -------------------------------------------------------------------------------


@dataclass
class RoomVerdict:
    number: int
    kind: Kind
    outcome: str
    messages: int
    delivered_once: bool
    ledger_ok: bool
    refused: list[str]  # the reason of each refusal
    unanswered: int
    breaches: int
    error: str
    across_kill: bool = False
    agents: list[dict[str, Any]] = field(default_factory=list)


def judge(run: RoomRun) -> RoomVerdict:
    """Exactly once, in order: what each agent was handed is the peer's stored messages."""
    from ledger.verification import ledger_verify_room

    stored = stored_seqs_by_sender(run.room_id) if run.room_id else {}
    delivered = bool(run.room_id) and not run.error
    if delivered:
        for receiver, sender in (
            (run.host_agent, run.guest_agent),
            (run.guest_agent, run.host_agent),
        ):
            if run.handed_out.get(receiver, []) != stored.get(sender, []):
                delivered = False
    ledger_ok = bool(run.room_id) and ledger_verify_room(room_id=UUID(run.room_id)).ok
    return RoomVerdict(
        run.number,
        run.kind,
        run.outcome or "-",
        sum(len(seqs) for seqs in stored.values()),
        delivered,
        ledger_ok,
        run.refused,
        run.unanswered,
        run.breaches,
        run.error,
        run.across_kill,
        run.agents,
    )


@dataclass
class KillVerdict:
    """What the SIGKILL did to the agents, from their proxies' records."""

    happened: bool
    at_seconds: float | None
    at_messages: int
    trigger: str
    exit_code: int | None
    survivor_up: bool
    on_killed: int  # agent sockets on the killed Daphne when it died
    moved: int  # of those, reconnected, and only ever to the survivor afterwards
    done_before_reconnecting: int  # of those, their room over before they needed to
    on_survivor: int  # agent sockets on the survivor when it died
    survivor_reconnects: int  # reconnects among those (the others should not notice)
    strayed: int  # connections to the killed Daphne after it died (none can succeed)
    last_room_before: int  # the number of the last room started before the kill

    @property
    def ok(self) -> bool:
        return (
            self.happened
            and self.exit_code == -signal.SIGKILL
            and self.survivor_up
            and self.on_killed > 0
            and self.moved + self.done_before_reconnecting == self.on_killed
            and self.strayed == 0
        )


def kill_verdict(
    kill: Kill | None, verdicts: list[RoomVerdict], exit_code: int | None, survivor_up: bool
) -> KillVerdict | None:
    if kill is None:
        return None
    agents = [agent for v in verdicts for agent in v.agents]
    on_killed = [a for a in agents if a["at_kill"] == KILLED]
    on_survivor = [a for a in agents if a["at_kill"] == SURVIVOR]
    moved = [
        a
        for a in on_killed
        if a["reconnects_after_kill"] >= 1
        and a["servers_after_kill"]
        and set(a["servers_after_kill"]) == {SURVIVOR}
    ]
    done = [a for a in on_killed if not a["servers_after_kill"]]
    # After the kill, no connection can have reached the killed Daphne: rooms in flight
    # (their later connections) and rooms started after it (every connection).
    strayed = sum(a["servers_after_kill"].count(KILLED) for a in agents if a["at_kill"])
    strayed += sum(
        a["servers"].count(KILLED)
        for v in verdicts
        if v.number > kill.last_room_before
        for a in v.agents
    )
    return KillVerdict(
        kill.at_seconds is not None,
        kill.at_seconds,
        kill.at_messages,
        kill.trigger,
        exit_code,
        survivor_up,
        len(on_killed),
        len(moved),
        len(done),
        len(on_survivor),
        sum(a["reconnects_after_kill"] for a in on_survivor),
        strayed,
        kill.last_room_before,
    )


async def soak(
    args: argparse.Namespace,
    hosts: list[str],
    sampler: MemorySampler,
    kill: Kill | None,
) -> list[RoomRun]:
    """Keep ``args.rooms`` rooms in flight until ``args.seconds`` have passed (Daphne one
    killed on the way, if ``kill``)."""
    from practice.demo import StandInOwners

    tag = f"{int(time.time())}"
    kinds = itertools.cycle(KINDS)
    numbers = itertools.count(1)
    runs: list[RoomRun] = []
    in_flight: set[asyncio.Task[None]] = set()
    stand_ins: list[StandInOwners] = []
    started = time.monotonic()
    last_progress = 0.0
    names = {hosts[0]: KILLED, hosts[1]: SURVIVOR}
    if kill is not None:
        kill.started, kill.runs_in_flight = started, runs

    async def one(run: RoomRun) -> None:
        practice = await asyncio.to_thread(seed_room, run, tag)
        owners = StandInOwners(practice, say=lambda line: None)
        owners.start()
        stand_ins.append(owners)
        # Alternate which Daphne carries the host, so both carry both roles.
        pair = (hosts[0], hosts[1]) if run.number % 2 else (hosts[1], hosts[0])
        try:
            await asyncio.wait_for(run_room(run, practice, pair, names, kill), ROOM_TIMEOUT)
        except TimeoutError:
            run.error = f"did not finish within {ROOM_TIMEOUT:.0f}s"
        finally:
            await asyncio.to_thread(owners.finish)

    try:
        while time.monotonic() - started < args.seconds:
            while len(in_flight) < args.rooms:
                run = RoomRun(next(numbers), next(kinds))
                runs.append(run)
                task = asyncio.create_task(one(run))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
            await asyncio.wait(in_flight, timeout=1.0, return_when=asyncio.FIRST_COMPLETED)
            if kill is not None:
                kill.due()
            elapsed = time.monotonic() - started
            if elapsed - last_progress >= 10:
                last_progress = elapsed
                _progress(elapsed, args.seconds, runs, sampler, kill)
        print(f"[{time.monotonic() - started:6.0f}s] no new rooms; {len(in_flight)} finishing")
        if in_flight:
            await asyncio.wait(in_flight, timeout=ROOM_TIMEOUT + 30)
    finally:
        for task in in_flight:
            task.cancel()
    for owners in stand_ins:
        if owners.failure is not None:
            print(f"stand-in owner failed: {owners.failure!r}")
    return runs


def _progress(
    elapsed: float, total: float, runs: list[RoomRun], sampler: MemorySampler, kill: Kill | None
) -> None:
    done = [r for r in runs if r.seconds]
    outcomes = Counter(r.outcome or "error" for r in done)
    memory = " ".join(f"{name} {mib:.0f}MiB" for name, mib in sampler.latest().items())
    handed = f"; {kill.handed_out} messages handed out" if kill is not None else ""
    killed = " (daphne-1 killed)" if kill is not None and kill.at_seconds is not None else ""
    print(
        f"[{elapsed:6.0f}s/{total:.0f}s] rooms started {len(runs)}, finished {len(done)} "
        f"({', '.join(f'{k} {v}' for k, v in sorted(outcomes.items())) or '-'}){handed}; "
        f"{memory}{killed}",
        flush=True,
    )


def table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _kill_table(verdicts: list[RoomVerdict], killed: KillVerdict) -> list[list[str]]:
    """The rooms by where they stood at the kill."""
    rows = [["rooms", "count", "messages", "delivered once", "ledgers verify",
             "agents reconnected", "errors"]]  # fmt: skip
    last = killed.last_room_before
    groups = [
        ("done before the kill", [v for v in verdicts if v.number <= last and not v.across_kill]),
        ("in flight at the kill", [v for v in verdicts if v.across_kill]),
        ("started after the kill", [v for v in verdicts if v.number > last]),
    ]
    for label, group in groups:
        rows.append(
            [
                label,
                str(len(group)),
                str(sum(v.messages for v in group)),
                f"{sum(v.delivered_once for v in group)}/{len(group)}",
                f"{sum(v.ledger_ok for v in group)}/{len(group)}",
                str(sum(a["reconnects"] >= 1 for v in group for a in v.agents)),
                str(sum(bool(v.error) for v in group)),
            ]
        )
    return rows


def summary(
    verdicts: list[RoomVerdict],
    memory: list[Memory],
    seconds: float,
    load: str,
    killed: KillVerdict | None = None,
) -> tuple[str, bool]:
    rows = [["kind", "rooms", "outcomes", "messages", "delivered once", "refused (reason)",
             "unanswered", "breaches", "ledgers verify", "errors"]]  # fmt: skip
    for kind in KINDS:
        of_kind = [v for v in verdicts if v.kind == kind]
        if not of_kind:
            continue
        outcomes = Counter(v.outcome for v in of_kind)
        rows.append(
            [
                kind,
                str(len(of_kind)),
                ", ".join(f"{k} {n}" for k, n in sorted(outcomes.items())),
                str(sum(v.messages for v in of_kind)),
                f"{sum(v.delivered_once for v in of_kind)}/{len(of_kind)}",
                str(sum(len(v.refused) for v in of_kind)),
                str(sum(v.unanswered for v in of_kind)),
                str(sum(v.breaches for v in of_kind)),
                f"{sum(v.ledger_ok for v in of_kind)}/{len(of_kind)}",
                str(sum(bool(v.error) for v in of_kind)),
            ]
        )
    mem_rows = [["process", "RSS start", "after warm-up", "end", "growth", "flat", "judged on"]]
    for m in memory:
        mem_rows.append(
            [
                m.process,
                f"{m.start_mib:.0f} MiB",
                f"{m.warm_mib:.0f} MiB",
                f"{m.end_mib:.0f} MiB",
                f"{m.growth_mib:+.1f} MiB",
                "killed (not judged)" if m.judged == "killed" else "yes" if m.flat else "NO",
                m.judged,
            ]
        )
    ok = (
        bool(verdicts)
        and all(
            v.delivered_once and v.ledger_ok and not v.breaches and not v.error for v in verdicts
        )
        and all(v.unanswered == 0 for v in verdicts)
        and all(m.flat for m in memory)
        and (killed is None or killed.ok)
    )
    kill_lines: list[str] = []
    if killed is not None and killed.at_seconds is None:
        kill_lines = ["", "the kill: it never happened (FAIL)"]
    elif killed is not None:
        kill_lines = [
            "",
            f"the kill: {KILLED} SIGKILLed at {killed.at_seconds:.0f} s, {killed.trigger} "
            f"({killed.at_messages} then); exit {killed.exit_code} "
            f"({'SIGKILL' if killed.exit_code == -signal.SIGKILL else 'NOT a SIGKILL'}), "
            f"{SURVIVOR} {'still up' if killed.survivor_up else 'DOWN'}",
            f"  agent sockets on {KILLED} at the kill: {killed.on_killed}; reconnected to "
            f"{SURVIVOR} (and only there): {killed.moved}; room over before they needed to: "
            f"{killed.done_before_reconnecting}",
            f"  agent sockets on {SURVIVOR} at the kill: {killed.on_survivor} "
            f"(their reconnects after it: {killed.survivor_reconnects}); connections that "
            f"reached {KILLED} after it died: {killed.strayed}",
            "",
            table(_kill_table(verdicts, killed)),
        ]
    errors = [f"  room {v.number} ({v.kind}): {v.error}" for v in verdicts if v.error]
    reasons = Counter(reason for v in verdicts for reason in v.refused)
    refused = ", ".join(f"{reason} {n}" for reason, n in reasons.most_common()) or "none"
    text = "\n".join(
        [
            f"soak: {len(verdicts)} rooms over {seconds:.0f} s, production profile "
            f"(PostgreSQL, Redis, 2 Daphnes, 1 worker, 1 beat); load average {load}",
            "",
            table(rows),
            "",
            f"refused, by reason: {refused}",
            *kill_lines,
            "",
            table(mem_rows),
            *(["", "errors:", *errors] if errors else []),
            "",
            f"verdict: {'PASS' if ok else 'FAIL'} (every message delivered exactly once or refused "
            f"with a reason; no adversarial action executed; every ledger verifies; "
            f"{'every agent on the killed Daphne reconnected to the survivor; ' if killed else ''}"
            f"RSS growth after warm-up within max({FLAT_MIB:.0f} MiB, {FLAT_SHARE:.0%}))",
        ]
    )
    return text, ok


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    workdir: Path = args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    for stale in ("keys.sqlite3", "deletions.jsonl", "beat-schedule"):
        with contextlib.suppress(FileNotFoundError):
            (workdir / stale).unlink()
    env = production_env(args)
    database = args.database
    _postgres(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)", f"CREATE DATABASE {database}")
    _redis_flush(env["REDIS_URL"])
    os.environ.update(env)
    child_env = {**os.environ, **env}
    import django

    django.setup()
    from django.core.management import call_command

    from synapsia.serving import running_daphne

    began = time.monotonic()
    load_before = os.getloadavg()[0]
    try:
        call_command("migrate", verbosity=0)
        print(f"soak: database {database}, Redis db {args.redis_db}; logs in {workdir}", flush=True)
        celery = ["-m", "celery", "-A", "synapsia"]
        with (
            running_daphne(log_path=workdir / "daphne-1.log", env=child_env) as one,
            running_daphne(log_path=workdir / "daphne-2.log", env=child_env) as two,
            child([*celery, "worker", "--loglevel", "WARNING", "--concurrency", "2"],
                  workdir / "worker.log", child_env) as worker,
            child([*celery, "beat", "--loglevel", "WARNING", "--schedule",
                   str(workdir / "beat-schedule")], workdir / "beat.log", child_env),
        ):  # fmt: skip
            sampler = MemorySampler(
                {"daphne-1": one.process.pid, "daphne-2": two.process.pid, "worker": worker.pid}
            )
            sampler.start()
            kill = (
                Kill(one.process, sampler, args.kill_after, KILL_LATEST_SHARE * args.seconds)
                if args.kill_after
                else None
            )
            print(
                f"soak: {args.rooms} rooms in flight for {args.seconds:.0f} s "
                f"({', '.join(KINDS)} in turn)"
                + (
                    f"; {KILLED} SIGKILLed after {args.kill_after} messages handed out "
                    f"(at the latest {KILL_LATEST_SHARE * args.seconds:.0f} s in)"
                    if kill
                    else ""
                ),
                flush=True,
            )
            try:
                runs = asyncio.run(soak(args, [one.host, two.host], sampler, kill))
            finally:
                sampler.finish()
            exit_code = one.process.poll() if kill is not None else None
            survivor_up = two.process.poll() is None
        verdicts = [judge(run) for run in runs]
        memory = memory_verdict(sampler.samples, sampler.gone.get(KILLED))
        killed = kill_verdict(kill, verdicts, exit_code, survivor_up)
        load = f"{load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
        text, ok = summary(verdicts, memory, time.monotonic() - began, load, killed)
        print("\n" + text, flush=True)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(
                json.dumps(
                    {
                        "ok": ok,
                        "seconds": args.seconds,
                        "rooms_in_flight": args.rooms,
                        "rooms": [asdict(v) for v in verdicts],
                        "kill": asdict(killed) if killed is not None else None,
                        "memory": [asdict(m) for m in memory],
                        "rss_samples": sampler.samples,
                    },
                    indent=1,
                )
            )
        return 0 if ok else 1
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            with contextlib.suppress(Exception):
                _postgres(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
            with contextlib.suppress(Exception):
                _redis_flush(env["REDIS_URL"])


if __name__ == "__main__":
    raise SystemExit(main())

"""The throwaway stack a benchmark runs on: database, channel layer and Daphne processes.

Two profiles, as in ``synapsia/settings.py``: **embedded** (a temporary SQLite file and the
in-memory layer) and **services** (PostgreSQL database ``bench_synapsia`` and Redis db 12,
or ``BENCH_PG_DATABASE`` and ``BENCH_REDIS_DB``).
Everything started here is stopped here, also on errors and Ctrl-C.
"""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from synapsia.cpu import SERVER_CPU

ROOT = Path(__file__).resolve().parents[1]
POSTGRES_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
# Overridable so two benchmarks on one machine (several people, or CI jobs) do not drop each
# other's database or flush each other's Redis db.
BENCH_DATABASE = os.environ.get("BENCH_PG_DATABASE", "bench_synapsia")
if not BENCH_DATABASE.replace("_", "").isalnum():
    raise SystemExit("BENCH_PG_DATABASE: letters, digits and underscores only")
BENCH_DATABASE_URL = f"postgres://postgres@127.0.0.1:5432/{BENCH_DATABASE}"
BENCH_REDIS_URL = f"redis://127.0.0.1:6379/{int(os.environ.get('BENCH_REDIS_DB', '12'))}"
# Only ever used against the throwaway benchmark database on loopback.
BENCH_SECRET_KEY = "bench-only-secret-key-for-a-throwaway-loopback-database-never-deploy"  # noqa: S105
DAPHNE_MAX_MESSAGE_BYTES = 1_048_576


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Stack:
    """Where a profile's processes find their database and channel layer."""

    profile: str  # "embedded" | "services"
    env: dict[str, str]
    workdir: Path


# A fresh token per bench run for the servers' /metrics (read by the say cell).
METRICS_TOKEN = secrets.token_urlsafe(24)


# The caller's settings for where the record lives and how its connections are kept: the
# bench chooses its own (``make test``'s environment closes a connection after every hop,
# ``SYNAPSIA_CONN_MAX_AGE=0``, which would price a reconnect into every turn).
_CALLERS_DATABASE_SETTINGS = ("DATABASE_URL", "REDIS_URL", "SYNAPSIA_CONN_MAX_AGE")


def base_env(debug: bool, settings: str) -> dict[str, str]:
    """The parent's environment without any database/layer settings of its own."""
    env = {k: v for k, v in os.environ.items() if k not in _CALLERS_DATABASE_SETTINGS}
    env.update(
        DJANGO_SETTINGS_MODULE=settings,
        PYTHONUNBUFFERED="1",
        SYNAPSIA_LOG_LEVEL="WARNING",
        SYNAPSIA_DEBUG="true" if debug else "false",
        SYNAPSIA_ALLOWED_HOSTS="127.0.0.1,localhost",
    )
    # The servers' /metrics, read by the say cell for the say desk's hop phases (loopback).
    env.setdefault("SYNAPSIA_METRICS_TOKEN", METRICS_TOKEN)
    env.setdefault("SYNAPSIA_SAY_DESK_TIMING", "1")
    # Per-agent socket rates sized for people's agents (120 says a minute) would refuse a
    # load client; rates this high are still counted on every frame (their cost is in the
    # figures) and never refuse. The contexts-per-turn cap is the turn cell's own business.
    for kind in ("SAY", "CONTEXT_REQUEST", "ACT", "GRANT_REQUEST"):
        env.setdefault(f"SYNAPSIA_SOCKET_RATE_{kind}", "100000000/m")
    # The say cell's two owners hold an agent and a room per room of the cell (hundreds),
    # beyond what one person may hold (gatekeeper.owner_limits); each add is still counted.
    for held in ("AGENTS", "ROOMS"):
        env.setdefault(f"SYNAPSIA_OWNER_LIMIT_{held}", "1000000")
    return env


def run_checked(args: list[str], env: dict[str, str], what: str) -> None:
    """Run a short setup command; fail with its output if it fails."""
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


def run_module(module: str, *args: str, env: dict[str, str], timeout: float) -> None:
    """Run ``python -m module args`` in the stack's environment, its output on this terminal
    (progress); fail if it fails."""
    command = [sys.executable, "-m", module, *args]
    done = subprocess.run(command, cwd=ROOT, env=env, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)} exited with {done.returncode}")


def _postgres_execute(*statements: str) -> None:
    import psycopg

    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=5) as conn:
        for statement in statements:
            conn.execute(statement)


def _redis_flush() -> None:
    import redis

    client = redis.Redis.from_url(BENCH_REDIS_URL, socket_timeout=5)
    try:
        client.flushdb()
    finally:
        client.close()


@contextlib.contextmanager
def provisioned(
    profile: str, workdir: Path, *, debug: bool, keep: bool, settings: str = "synapsia.settings"
) -> Iterator[Stack]:
    """Create, migrate and (unless ``keep``) afterwards remove the profile's database."""
    env = base_env(debug, settings)
    workdir.mkdir(parents=True, exist_ok=True)
    if profile == "embedded":
        env["SYNAPSIA_SQLITE_PATH"] = str(workdir / "bench.sqlite3")
    else:
        env.update(
            DATABASE_URL=BENCH_DATABASE_URL,
            REDIS_URL=BENCH_REDIS_URL,
            SYNAPSIA_SECRET_KEY=BENCH_SECRET_KEY,
            SYNAPSIA_SECURE_SSL_REDIRECT="false",
            # Throwaway keys, new each run: the production profile wants them set.
            SYNAPSIA_VAULT_KEY=base64.b64encode(os.urandom(32)).decode(),
            SYNAPSIA_LEDGER_SIGNING_KEY=base64.b64encode(os.urandom(32)).decode(),
        )
        drop = f"DROP DATABASE IF EXISTS {BENCH_DATABASE} WITH (FORCE)"
        _postgres_execute(drop, f"CREATE DATABASE {BENCH_DATABASE}")
        _redis_flush()
    try:
        run_checked([sys.executable, "manage.py", "migrate", "--no-input", "-v0"], env, "migrate")
        yield Stack(profile, env, workdir)
    finally:
        if profile == "services" and not keep:
            with contextlib.suppress(Exception):
                _postgres_execute(drop)
            with contextlib.suppress(Exception):
                _redis_flush()
        if profile == "embedded" and not keep:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    (workdir / f"bench.sqlite3{suffix}").unlink()


@dataclass
class Server:
    """A running Daphne: where it listens and the pid whose CPU time we read."""

    host: str
    pid: int


@dataclass
class Servers:
    """One application served by several Daphne processes, as production runs it (two in
    the Procfile and deploy/docker-compose.yml, behind nginx): each socket goes to one of
    them, and what they say reaches each other through the channel layer (Redis)."""

    members: list[Server]

    @property
    def pids(self) -> list[int]:
        return [server.pid for server in self.members]

    def host_for(self, socket: int) -> str:
        """Where socket number ``socket`` connects: the processes in turn, as nginx's
        round robin hands out new connections."""
        return self.members[socket % len(self.members)].host


def _descendant_daphne(pid: int) -> int:
    """py-spy runs Daphne as its child; the CPU we want is the child's."""
    for _ in range(50):
        for task in Path(f"/proc/{pid}/task").glob("*"):
            children = (task / "children").read_text().split()
            if children:
                return int(children[0])
        time.sleep(0.1)
    return pid


@contextlib.contextmanager
def running_daphne(
    env: dict[str, str],
    application: str,
    log_path: Path,
    *,
    profile_to: Path | None = None,
    daphne_args: Sequence[str] = (),
    timeout: float = 40.0,
) -> Iterator[Server]:
    """Serve ``application`` with Daphne on a free loopback port, in ``env`` (a stack's
    environment; ``daphne_args``: more of Daphne's flags); always stop it afterwards.

    With ``profile_to``, Daphne runs under ``py-spy record`` (raw collapsed stacks), which
    writes the profile when Daphne exits.
    """
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "daphne",
        "-b",
        "127.0.0.1",
        "-p",
        str(port),
        "--websocket-max-message-size",
        str(DAPHNE_MAX_MESSAGE_BYTES),
        *daphne_args,
        application,
    ]
    if profile_to is not None:
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        command = [
            py_spy,
            "record",
            "--format",
            "raw",
            "--rate",
            # BENCH_PYSPY_RATE: samples a second (more for a short phase such as the idle
            # cell's connects; py-spy says when it falls behind).
            os.environ.get("BENCH_PYSPY_RATE", "200"),
            # BENCH_PYSPY_GIL=1: only the thread holding the GIL is sampled, so a thread that
            # waits for it (after a syscall, a commit) is not counted as if it were working.
            *(["--gil"] if os.environ.get("BENCH_PYSPY_GIL") == "1" else []),
            "-o",
            str(profile_to),
            "--",
            *command,
        ]
    with open(log_path, "wb") as log:
        # Own session: a Ctrl-C in the terminal reaches us, and we stop the server in order.
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + timeout
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"daphne exited early:\n{log_path.read_text()}")
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(
                            f"daphne did not answer in {timeout}s:\n{log_path.read_text()}"
                        ) from None
                    time.sleep(0.1)
            pid = _descendant_daphne(process.pid) if profile_to is not None else process.pid
            yield Server(f"127.0.0.1:{port}", pid)
        finally:
            if profile_to is not None:
                # py-spy writes its profile once its child is gone: stop Daphne, then wait.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(_descendant_daphne(process.pid), signal.SIGTERM)
            else:
                process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _nth_server_env(env: dict[str, str], n: int) -> dict[str, str]:
    """``env`` for a target's ``n``-th server process (from 1): its CPU, if one is set, the
    ``n - 1``-th after the first's."""
    first = env.get(SERVER_CPU)
    if not first or n == 1:
        return env
    return {**env, SERVER_CPU: str(int(first) + n - 1)}


@contextlib.contextmanager
def running_daphnes(
    env: dict[str, str],
    application: str,
    log_path: Path,
    *,
    processes: int = 1,
    profile_to: Path | None = None,
) -> Iterator[Servers]:
    """``processes`` Daphne processes serving ``application`` (``running_daphne`` each; the
    second and later log to ``<log>-2`` and so on). With ``profile_to``, only the first runs
    under py-spy. ``SYNAPSIA_SERVER_CPU`` in ``env`` is the first's CPU, the next one's the
    CPU after it, and so on, as the Procfile pins its two. Always all stopped afterwards."""
    with contextlib.ExitStack() as stack:
        members = [
            stack.enter_context(
                running_daphne(
                    _nth_server_env(env, n),
                    application,
                    log_path
                    if n == 1
                    else log_path.with_name(f"{log_path.stem}-{n}{log_path.suffix}"),
                    profile_to=profile_to if n == 1 else None,
                )
            )
            for n in range(1, processes + 1)
        ]
        yield Servers(members)

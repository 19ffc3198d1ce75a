"""Start a real Daphne serving Synapsia as a child process, on the database this process uses.

Used by ``manage.py demo`` (the practice room) and by the end-to-end tests, so both run the
server exactly as ``make run`` does: a separate process, speaking HTTP and WebSocket on a
loopback port.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[1]
MAX_MESSAGE_BYTES = 1024 * 1024  # Daphne's WebSocket frame limit; the app enforces its own


@dataclass(frozen=True)
class Served:
    host: str  # "127.0.0.1:<port>"
    process: subprocess.Popen[bytes]

    @property
    def http(self) -> str:
        return f"http://{self.host}"

    def ws_room(self, room_id: object) -> str:
        return f"ws://{self.host}/ws/rooms/{room_id}/"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_env(**extra: str) -> dict[str, str]:
    """This process's environment, pointed at the database it is using right now (a test run's
    database differs from the one the settings name)."""
    env = dict(os.environ)
    db = connection.settings_dict
    if settings.PROFILE == "embedded":
        env["SYNAPSIA_SQLITE_PATH"] = str(db["NAME"])
    else:
        password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
        env["DATABASE_URL"] = (
            f"postgres://{db['USER']}{password}@{db['HOST'] or '127.0.0.1'}:"
            f"{db['PORT'] or 5432}/{db['NAME']}"
        )
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def _wait_healthy(process: subprocess.Popen[bytes], url: str, timeout: float) -> str | None:
    """None once ``/healthz`` answers; otherwise why not."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            return f"daphne exited early (code {process.returncode})"
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=1):  # noqa: S310 (our http URL)
                return None
        except OSError:
            if time.monotonic() > deadline:
                return f"daphne did not answer {url} within {timeout}s"
            time.sleep(0.1)


@contextlib.contextmanager
def running_daphne(
    *,
    log_path: Path | None,
    env: dict[str, str] | None = None,
    host: str = "127.0.0.1",
    port: int | None = None,
    timeout: float = 30.0,
) -> Iterator[Served]:
    """Start Daphne (its log goes to ``log_path``; ``None`` leaves it on this terminal), wait
    until ``/healthz`` answers, yield it; always stop it (SIGTERM, then SIGKILL after 10 s)."""
    port = port or free_port()
    with contextlib.ExitStack() as stack:
        log = stack.enter_context(open(log_path, "wb")) if log_path is not None else None
        process = _start(log, env, host, port)
        try:
            problem = _wait_healthy(process, f"http://{host}:{port}", timeout)
            if problem is not None:
                shown = log_path.read_text() if log_path is not None else "(see above)"
                raise RuntimeError(f"{problem}; its log:\n{shown}")
            yield Served(f"{host}:{port}", process)
        finally:
            stop(process)


def _start(
    log: IO[bytes] | None, env: dict[str, str] | None, host: str, port: int
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(  # noqa: S603 (our own interpreter and arguments)
        [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            host,
            "-p",
            str(port),
            "--websocket-max-message-size",
            str(MAX_MESSAGE_BYTES),
            "synapsia.asgi:application",
        ],
        cwd=ROOT,
        env=env if env is not None else server_env(),
        stdout=log,
        stderr=subprocess.STDOUT if log is not None else None,
        # Its own process group: a Ctrl-C reaches us only, and we stop the server in order.
        start_new_session=True,
    )


def stop(process: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """Stop a child process we started (and its group), politely first."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()

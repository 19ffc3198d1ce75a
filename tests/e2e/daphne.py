"""Run a real Daphne on a free loopback port against the test database."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_env() -> dict[str, str]:
    """The environment a server process needs to share this test run's database and layer."""
    env = dict(os.environ)
    db = connection.settings_dict
    if settings.PROFILE == "embedded":
        env["SYNAPSIA_SQLITE_PATH"] = str(db["NAME"])
    else:
        password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
        env["DATABASE_URL"] = (
            f"postgres://{db['USER']}{password}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"
        )
    env["SYNAPSIA_CATCH_UP_SECONDS"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env


@contextlib.contextmanager
def running_daphne(log_path: Path, *, timeout: float = 30.0) -> Iterator[str]:
    """Start Daphne, wait until /healthz answers, yield ``host:port``; always stop it."""
    port = free_port()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "daphne",
                "-b",
                "127.0.0.1",
                "-p",
                str(port),
                "synapsia.asgi:application",
            ],
            cwd=ROOT,
            env=server_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
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
            yield f"127.0.0.1:{port}"
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

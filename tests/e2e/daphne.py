"""Run a real Daphne on a free loopback port against the test database (synapsia.serving)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from synapsia.serving import ROOT, free_port
from synapsia.serving import running_daphne as _running_daphne
from synapsia.serving import server_env as _server_env

__all__ = ["ROOT", "free_port", "running_daphne", "server_env"]


def server_env() -> dict[str, str]:
    """The environment a server process needs to share this test run's database and layer;
    it re-reads the record every second while idle, so tests never wait long for a catch-up."""
    return _server_env(SYNAPSIA_CATCH_UP_SECONDS="1")


@contextlib.contextmanager
def running_daphne(log_path: Path, *, timeout: float = 30.0) -> Iterator[str]:
    """Start Daphne, wait until /healthz answers, yield ``host:port``; always stop it."""
    with _running_daphne(log_path=log_path, env=server_env(), timeout=timeout) as served:
        yield served.host

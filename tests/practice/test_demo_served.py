"""What `make run` runs after migrating: `manage.py demo` serves the practice room and starts
both reference agents as processes; a login link works; Ctrl-C (or SIGTERM) stops it all."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from queue import Empty, Queue

import pytest

from synapsia.serving import ROOT, free_port, server_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _lines(process: subprocess.Popen[str]) -> Queue[str]:
    lines: Queue[str] = Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line.rstrip())

    threading.Thread(target=read, daemon=True).start()
    return lines


def _until(lines: Queue[str], seen: list[str], text: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not any(text in line for line in seen):
        try:
            seen.append(lines.get(timeout=max(0.1, deadline - time.monotonic())))
        except Empty:
            raise AssertionError(f"never printed {text!r}; printed:\n" + "\n".join(seen)) from None


def _get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 (loopback http)
        return int(response.status)


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "term"])
def test_demo_serves_the_practice_room_with_both_agents_until_stopped(stop_signal: int) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "manage.py", "demo", "--port", str(port)],
        cwd=ROOT,
        env=server_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    seen: list[str] = []
    try:
        lines = _lines(process)
        # The agents agree and the booking waits for Alice, who has not approved yet. Each
        # agent is a process of its own and the demo passes on their lines as they come, so
        # Bob's line of his acceptance can follow Alice's line of what she did with it.
        _until(lines, seen, "[alice's agent] waiting for my owner's approval")
        _until(lines, seen, "[bob's agent] said #2: That works for us: Osteria Kanal")
        links = [s.split()[-1] for s in seen if "/practice/login/" in s]
        assert len(links) == 2 and all(
            link.startswith(f"http://127.0.0.1:{port}/") for link in links
        )
        assert _get(f"http://127.0.0.1:{port}/healthz") == 200
        assert _get(links[0]) == 200  # the sign-in page; looking does not use the link
        process.send_signal(stop_signal)  # Ctrl-C in the terminal, or a supervisor stopping it
        assert process.wait(timeout=30) == 0
        _until(lines, seen, "stopped", timeout=5)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    with pytest.raises(OSError):  # the server went with it
        _get(f"http://127.0.0.1:{port}/healthz")
    assert _processes_mentioning(f"127.0.0.1:{port}/ws/rooms/") == []  # and so did the agents


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # the process ended while we looked
            continue
        if text in argv:
            found.append(argv)
    return found

"""``SYNAPSIA_SERVER_CPU``: a server process and every thread it has or starts on one CPU; a
bad value or a system that cannot pin refused with a message saying what to do. Pinning is
tried in child processes only (this test process keeps the CPUs it has)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from synapsia import cpu
from synapsia.serving import ROOT, running_daphne
from tests.e2e.daphne import server_env

linux_only = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity"), reason="only Linux pins a process to a CPU"
)


def _threads_cpus(pid: int) -> dict[int, set[int]]:
    """Each thread of ``pid`` and the CPUs it may run on (a thread that ended between the
    listing and the read is left out: it runs nowhere)."""
    found: dict[int, set[int]] = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):
            found[int(task)] = os.sched_getaffinity(int(task))
    return found


@contextlib.contextmanager
def _threads_watched(pid: int) -> Iterator[dict[int, set[int]]]:
    """Every thread ``pid`` had while the block ran, and its CPUs: Django starts a thread for
    a request's database work and ends it with the request, so one look afterwards could
    miss them all."""
    seen: dict[int, set[int]] = {}
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.update(_threads_cpus(pid))
            done.wait(0.001)

    watcher = threading.Thread(target=watch, name="threads-watched", daemon=True)
    watcher.start()
    try:
        yield seen
    finally:
        done.set()
        watcher.join(5)
        seen.update(_threads_cpus(pid))


@pytest.mark.parametrize("value", ["", "  "])
def test_unset_or_empty_pins_nothing(value: str) -> None:
    before = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    assert cpu.server_cpu_pin(value) is None
    if before is not None:
        assert os.sched_getaffinity(0) == before


@pytest.mark.parametrize("value", ["one", "-1", "1.5", "0x1", "²"])
def test_a_value_that_is_not_a_cpu_number_is_refused(value: str) -> None:
    before = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    with pytest.raises(ImproperlyConfigured) as refused:
        cpu.server_cpu_pin(value)
    assert "SYNAPSIA_SERVER_CPU must be a whole number from 0" in str(refused.value)
    assert "unset it" in str(refused.value)
    if before is not None:
        assert os.sched_getaffinity(0) == before


def test_a_system_that_cannot_pin_is_told_to_unset_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "sched_setaffinity", raising=False)
    with pytest.raises(ImproperlyConfigured, match="cannot pin a process to a CPU"):
        cpu.server_cpu_pin("0")


_CHILD = textwrap.dedent(
    """
    import json, os, sys, threading
    started = threading.Event()
    stop = threading.Event()
    def wait():
        started.set()
        stop.wait()
    before = threading.Thread(target=wait)
    before.start()
    started.wait()
    from synapsia.cpu import server_cpu_pin
    pinned = server_cpu_pin(sys.argv[1])
    after = threading.Thread(target=stop.wait)
    after.start()
    seen = {t: sorted(os.sched_getaffinity(int(t))) for t in os.listdir("/proc/self/task")}
    stop.set()
    print(json.dumps({"pinned": pinned, "threads": seen}))
    """
)


def _pinned_in_child(value: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, value],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return dict(json.loads(done.stdout))


@linux_only
def test_every_thread_before_and_after_the_pin_runs_on_the_one_cpu() -> None:
    allowed = sorted(os.sched_getaffinity(0))
    index = len(allowed) - 1
    result = _pinned_in_child(str(index))
    assert result["pinned"] == allowed[index]
    threads = result["threads"]
    assert isinstance(threads, dict)
    assert len(threads) == 3  # the main thread, one started before the pin, one after
    assert all(cpus == [allowed[index]] for cpus in threads.values()), threads


@linux_only
def test_a_number_past_the_machines_cpus_counts_round() -> None:
    allowed = sorted(os.sched_getaffinity(0))
    result = _pinned_in_child(str(len(allowed) + 1))
    assert result["pinned"] == allowed[1 % len(allowed)]


@linux_only
@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_real_daphne_serves_with_every_thread_on_its_cpu(tmp_path: Path) -> None:
    """Daphne with the setting: its loop and the threads it starts for database work (after
    the pin, to answer requests) all on the CPU asked for; refused at start with a bad value."""
    allowed = sorted(os.sched_getaffinity(0))
    want = allowed[-1]
    env = server_env()
    env[cpu.SERVER_CPU] = str(len(allowed) - 1)
    # Requests whose database work runs on a thread started after the pin (the readiness
    # probe's; the liveness probe is async all through and starts none), watched while they
    # run: the thread ends with its request.
    with (
        running_daphne(log_path=tmp_path / "daphne.log", env=env) as served,
        _threads_watched(served.process.pid) as threads,
    ):
        for _ in range(5):
            with urllib.request.urlopen(f"{served.http}/readyz", timeout=10) as answer:  # noqa: S310
                assert answer.status == 200
    assert len(threads) > 1
    assert all(cpus == {want} for cpus in threads.values()), threads
    assert f"runs on CPU {want}" in (tmp_path / "daphne.log").read_text()

    env[cpu.SERVER_CPU] = "first"
    with (
        pytest.raises(RuntimeError, match="SYNAPSIA_SERVER_CPU must be a whole number"),
        running_daphne(log_path=tmp_path / "refused.log", env=env, timeout=20),
    ):
        pytest.fail("Daphne served with SYNAPSIA_SERVER_CPU=first")

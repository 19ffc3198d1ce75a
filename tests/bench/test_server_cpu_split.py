"""The bench splits a server's CPU into its event loop's thread (the process's main thread,
where Daphne runs the loop) and the rest (its database threads), from ``/proc``."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from bench.loadgen import process_cpu_seconds, servers_cpu_seconds

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _spin(seconds: float) -> int:
    """Keep this thread busy for ``seconds`` of its own CPU (how many rounds it took)."""
    end, rounds = time.thread_time() + seconds, 0
    while time.thread_time() < end:
        rounds += 1
    return rounds


def test_a_side_thread_s_cpu_is_the_process_s_and_not_the_main_thread_s() -> None:
    pid = os.getpid()
    config = {"server_pid": pid}
    total, main = servers_cpu_seconds(config), servers_cpu_seconds(config, main_thread=True)
    assert total is not None and main is not None and main <= total
    side = threading.Thread(target=_spin, args=(0.4,))
    side.start()
    side.join()
    total_after = servers_cpu_seconds(config)
    main_after = servers_cpu_seconds(config, main_thread=True)
    assert total_after is not None and main_after is not None
    assert total_after - total >= 0.3  # the side thread's 0.4 s, in clock ticks
    assert main_after - main < 0.2  # the main thread only waited for it


def test_the_main_thread_s_own_work_is_counted_as_its_own() -> None:
    pid = os.getpid()
    main = process_cpu_seconds(pid, main_thread=True)
    assert main is not None
    _spin(0.3)
    after = process_cpu_seconds(pid, main_thread=True)
    assert after is not None and after - main >= 0.2


def test_a_process_that_is_gone_reads_as_none() -> None:
    assert process_cpu_seconds(2**22 + 12345, main_thread=True) is None
    assert servers_cpu_seconds({"server_pids": [2**22 + 12345]}, main_thread=True) is None

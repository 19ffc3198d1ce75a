"""``python -m bench --processes N``: the say and turn cells against the production topology,
several Daphne processes with sockets spread over them (issue 17)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from websockets.asyncio.client import connect

from bench.cli import parse_args
from bench.stack import SERVER_CPU, running_daphnes


def test_more_than_one_process_needs_the_services_profile() -> None:
    with pytest.raises(SystemExit):
        parse_args(["--profile", "embedded", "--processes", "2"])
    with pytest.raises(SystemExit):
        parse_args(["--profile", "services", "--processes", "9"])
    assert parse_args(["--profile", "services", "--processes", "2"]).processes == 2


async def _across(a_host: str, b_host: str) -> str:
    async with (
        connect(f"ws://{a_host}/ws/relay/across/a/") as a,
        connect(f"ws://{b_host}/ws/relay/across/b/") as b,
    ):
        await a.send("from the first process")
        return str(await asyncio.wait_for(b.recv(), timeout=15))


@pytest.mark.services
def test_a_room_split_over_two_processes_hears_itself_through_the_layer(tmp_path: Path) -> None:
    with running_daphnes(
        dict(os.environ), "bench.relay_asgi:application", tmp_path / "relay.log", processes=2
    ) as servers:
        assert len(set(servers.pids)) == 2
        # A room's two sockets (numbers 0 and 1) land on different processes.
        a_host, b_host = servers.host_for(0), servers.host_for(1)
        assert a_host != b_host and servers.host_for(2) == a_host
        assert asyncio.run(_across(a_host, b_host)) == "from the first process"
    assert (tmp_path / "relay.log").exists() and (tmp_path / "relay-2.log").exists()


def test_a_cpu_for_the_servers_is_a_number_from_zero() -> None:
    assert parse_args(["--server-cpu", "1"]).server_cpu == 1
    assert parse_args([]).server_cpu is None
    with pytest.raises(SystemExit):
        parse_args(["--server-cpu", "-1"])


@pytest.mark.services
@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="only Linux pins a process")
def test_each_process_of_a_target_runs_on_the_cpu_after_the_one_before(tmp_path: Path) -> None:
    """``--server-cpu K``: the relay (as Synapsia) with its first process on CPU K, its second
    on the next, as the Procfile's two are pinned."""
    allowed = sorted(os.sched_getaffinity(0))
    env = {**os.environ, SERVER_CPU: "0"}
    with running_daphnes(env, "bench.relay_asgi:application", tmp_path / "r.log", processes=2) as s:
        pinned = [os.sched_getaffinity(pid) for pid in s.pids]
    assert pinned == [{allowed[0]}, {allowed[1 % len(allowed)]}]

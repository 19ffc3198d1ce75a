"""``python -m bench --processes N``: the say and turn cells against the production topology,
several Daphne processes with sockets spread over them (issue 17)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from websockets.asyncio.client import connect

from bench.cli import parse_args
from bench.stack import running_daphnes


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

"""End to end: a real Daphne on a loopback port, two SDK clients talking through it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from agents import RoomClient, RoomClosedError
from rooms.models import Message
from tests.e2e.daphne import ROOT, running_daphne

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_two_sdk_clients_talk_through_a_real_daphne(make_open_room, tmp_path: Path) -> None:
    setup = make_open_room()
    with running_daphne(tmp_path / "daphne.log") as host:
        url = f"ws://{host}/ws/rooms/{setup.room.id}/"

        async def conversation() -> tuple[list[str], list[str]]:
            async with RoomClient(url, setup.a.token) as a, RoomClient(url, setup.b.token) as b:
                for n in range(10):
                    await a.say(f"a{n}")
                    await b.say(f"b{n}")
                heard_by_b = [(await b.next_message(timeout=10)).text for _ in range(10)]
                heard_by_a = [(await a.next_message(timeout=10)).text for _ in range(10)]
                return heard_by_a, heard_by_b

        heard_by_a, heard_by_b = asyncio.run(conversation())
    assert heard_by_b == [f"a{n}" for n in range(10)]
    assert heard_by_a == [f"b{n}" for n in range(10)]
    assert list(
        Message.objects.filter(room=setup.room).order_by("seq").values_list("seq", flat=True)
    ) == list(range(1, 21))


def test_sdk_reports_a_refused_handshake(make_open_room, tmp_path: Path) -> None:
    setup = make_open_room()
    with running_daphne(tmp_path / "daphne.log") as host:
        url = f"ws://{host}/ws/rooms/{setup.room.id}/"

        async def join_with_forged_token() -> int:
            try:
                async with RoomClient(url, "syn_agent_forged"):
                    return 0
            except RoomClosedError as closed:
                return closed.code

        assert asyncio.run(join_with_forged_token()) == 4401


def test_cli_joins_says_and_prints(make_open_room, tmp_path: Path) -> None:
    setup = make_open_room()
    with running_daphne(tmp_path / "daphne.log") as host:
        url = f"ws://{host}/ws/rooms/{setup.room.id}/"
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "agents.run",
                "--url",
                url,
                "--token",
                setup.a.token,
                "--say",
                "hello from the CLI",
                "--wait",
                "0.2",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 0, result.stderr
    assert "joined: Dinner for two (open)" in result.stdout
    assert "(sent as #1)" in result.stdout
    assert Message.objects.get().text == "hello from the CLI"

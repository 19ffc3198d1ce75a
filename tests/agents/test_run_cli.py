"""``python -m agents.run`` as the owner at the command line reads it: who said each line in
words (never a piece of an agent's id), and a refused line or a closed connection said in
words with what to do (never a traceback, an error code or a close code), exiting 2. Driven
over a real loopback socket by a scripted server, so each refusal is exactly the one we mean."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection, serve

from agents import run
from agents.cli import REFUSED, UNREACHABLE, closed_in_words
from agents.client import PROTOCOL_ERROR, RoomClosedError
from synapsia_protocol.codes import CLOSE_CODE_MEANINGS, FINAL_CLOSE_CODES, CloseCode

ROOM = str(uuid.uuid4())
PEER = str(uuid.uuid4())
ME = str(uuid.uuid4())


def _welcome() -> dict[str, Any]:
    return {
        "v": 1,
        "type": "welcome",
        "id": "w1",
        "body": {
            "room": {"id": ROOM, "purpose": "Dinner for two", "charter": "", "state": "open"},
            "participant": "agent",
            "agent_id": ME,
            "acked_seq": 0,
            "max_frame_bytes": 65536,
            "tools": [],
        },
    }


def _message(seq: int, sender: str, text: str, author: str = "agent") -> dict[str, Any]:
    body = {
        "seq": seq,
        "sender_agent_id": sender,
        "text": text,
        "fenced": None,
        "flags": [],
        "sent_at": "2026-12-01T18:00:00Z",
        "author": author,
    }
    return {"v": 1, "type": "message", "id": f"m{seq}", "body": body}


Answer = Callable[[dict[str, Any]], dict[str, Any]]


@asynccontextmanager
async def _room(
    *, first: list[dict[str, Any]], answer: Answer | None = None, close: int | None = None
) -> AsyncIterator[str]:
    """A scripted room: sends ``first``, then answers each ``say`` with ``answer(frame)``;
    with ``close``, closes the socket with that code at once instead."""

    async def handler(socket: ServerConnection) -> None:
        if close is not None:
            await socket.close(close, "scripted")
            return
        for frame in first:
            await socket.send(json.dumps(frame))
        async for raw in socket:
            frame = json.loads(raw)
            if frame["type"] == "say" and answer is not None:
                await socket.send(json.dumps(answer(frame)))

    async with serve(handler, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        yield f"ws://127.0.0.1:{port}/ws/rooms/{ROOM}/"


def _recorded(frame: dict[str, Any]) -> dict[str, Any]:
    body = {"ref": frame["id"], "seq": 4, "duplicate": False}
    return {"v": 1, "type": "sent", "id": "s1", "body": body}


def _room_not_open(frame: dict[str, Any]) -> dict[str, Any]:
    body = {"code": "room_not_open", "message": "The room is not open.", "ref": frame["id"]}
    return {"v": 1, "type": "error", "id": "e1", "body": body}


def _args(url: str, *say: str) -> list[str]:
    return ["--url", url, "--token", "syn_agent_x", *[a for s in say for a in ("--say", s)]]


async def test_each_line_heard_names_its_speaker_in_words(
    capsys: pytest.CaptureFixture[str],
) -> None:
    first = [
        _welcome(),
        _message(1, PEER, "Friday at 19:30?"),
        _message(2, PEER, "I'll decide myself.", author="owner"),
        _message(3, ME, "Your own line, heard back."),
    ]
    async with _room(first=first, answer=_recorded) as url:
        code = await run.main([*_args(url, "Friday works."), "--wait", "0.5"])
    out = capsys.readouterr().out
    assert code == 0
    assert "joined: Dinner for two (open)" in out and "(sent as #4)" in out
    assert "[1] The other agent: Friday at 19:30?" in out
    assert "[2] The other owner, in person: I'll decide myself." in out
    assert "[3] You: Your own line, heard back." in out
    for agent_id in (PEER, ME):  # no piece of an id, of either agent
        assert agent_id[:8] not in out


async def test_a_line_said_while_the_room_is_paused_is_refused_in_words(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with _room(first=[_welcome()], answer=_room_not_open) as url:
        code = await run.main([*_args(url, "Friday works."), "--wait", "0"])
    err = capsys.readouterr().err
    assert code == REFUSED
    assert err.strip() == (
        "The room refused what this agent sent: the room is not open. The room is paused (at "
        "a fork or a Signal Flare) or closed: settle it on the room's page, then run this again."
    )
    assert "room_not_open" not in err and "Traceback" not in err


@pytest.mark.parametrize("close", sorted(FINAL_CLOSE_CODES))
async def test_a_refused_join_is_said_in_words_without_the_close_code(
    close: int, capsys: pytest.CaptureFixture[str]
) -> None:
    async with _room(first=[], close=close) as url:
        code = await run.main(_args(url, "hello"))
    err = capsys.readouterr().err
    assert code == REFUSED
    assert err.startswith("The room ended this agent's session: ")
    meaning = CLOSE_CODE_MEANINGS[close].rstrip(".")
    assert meaning[:1].lower() + meaning[1:] in err
    assert str(close) not in err and "Traceback" not in err


async def test_an_unknown_room_or_token_says_what_to_check(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with _room(first=[], close=CloseCode.FORBIDDEN) as url:
        await run.main(_args(url, "hello"))
    assert "Check the room's code in --url" in capsys.readouterr().err
    async with _room(first=[], close=CloseCode.UNAUTHENTICATED) as url:
        await run.main(_args(url, "hello"))
    assert "issue a new one on the Agents page" in capsys.readouterr().err


def test_a_close_the_protocol_does_not_name_is_still_said_in_words() -> None:
    unreadable = closed_in_words(RoomClosedError(PROTOCOL_ERROR, "the server broke the protocol"))
    assert "cannot read" in unreadable and str(PROTOCOL_ERROR) not in unreadable
    ended = closed_in_words(RoomClosedError(1000, "closed"))
    assert ended == "The connection to the room ended. Run this again to rejoin."


async def test_a_server_that_is_not_there_is_said_in_words(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import socket

    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"ws://127.0.0.1:{port}/ws/rooms/{uuid.uuid4()}/"
    code = await run.main(_args(url, "hello"))
    err = capsys.readouterr().err
    assert code == UNREACHABLE
    assert err.startswith(f"Could not connect to {url}: ")
    assert "Check the address and that the server is running" in err
    assert ": ." not in err and "Traceback" not in err

"""Issue 13, finding 5 ("parsing limits (depth, surrogates, number size) are error frames,
never exceptions"), on a live socket: numbers JSON allows but a tool cannot take (NaN,
Infinity, overflowing floats, integers of thousands of digits) and lone surrogates where
the frame tests do not put them (an argument's key, a say's text, the frame id) are each
answered with an error frame; nothing is stored or run, and the socket stays open."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async

from gatekeeper.records import ActionRecord
from gatekeeper.tools.registry import tools_all
from rooms.models import Message
from rooms.protocol import ErrorCode
from tests.socket_frames import join

pytestmark = pytest.mark.django_db(transaction=True)

DIGITS = "9" * 5_000  # past Python's 4,300-digit limit for int(str)
NUMBERS = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", DIGITS, f"-{DIGITS}"]


def _act(tool: str, arguments_json: str, frame_id: str) -> str:
    body = f'{{"tool":"{tool}","arguments":{arguments_json}}}'
    return f'{{"v":1,"type":"act","id":"{frame_id}","body":{body}}}'


def _hostile_frames() -> list[tuple[str, str]]:
    """(frame id, raw frame): every tool's first field given each odd number, every tool
    given a lone surrogate as a key, and a lone surrogate in a say and in an ack's place."""
    frames = []
    for spec in sorted(tools_all(), key=lambda s: s.name):
        fields = sorted(spec.input_model.model_fields)
        for i, number in enumerate(NUMBERS):
            if fields:
                frames.append((f"{spec.name}-{i}", f'{{"{fields[0]}": {number}}}'))
        frames.append((f"{spec.name}-key", '{"\\ud800": 1}'))
    raw = [
        (frame_id, _act(frame_id.rsplit("-", 1)[0], args, frame_id)) for frame_id, args in frames
    ]
    raw.append(("say-lone", '{"v":1,"type":"say","id":"say-lone","body":{"text":"hi \\udc00"}}'))
    raw.append(
        ("ack-digits", f'{{"v":1,"type":"ack","id":"ack-digits","body":{{"seq":{DIGITS}}}}}')
    )
    raw.append(("ack-inf", '{"v":1,"type":"ack","id":"ack-inf","body":{"seq":1e400}}'))
    return raw


REFUSALS = {ErrorCode.MALFORMED, ErrorCode.INVALID_BODY}


async def test_odd_numbers_and_lone_surrogates_are_error_frames_and_the_socket_stays_open(
    make_open_room: Any, settings: Any
) -> None:
    # The act rate off: every frame here must reach the parser and the argument check (at
    # the default rate most would be refused before either, which proves nothing).
    rates = {**settings.SYNAPSIA["SOCKET_RATES"], "act": "off"}
    settings.SYNAPSIA = {**settings.SYNAPSIA, "SOCKET_RATES": rates}
    setup = await database_sync_to_async(make_open_room)()
    a = await join(setup.room.id, setup.a.token)
    hostile = _hostile_frames()
    assert len(hostile) >= 3 * len(NUMBERS)
    refused = 0
    for frame_id, raw in hostile:
        await a.send_to(text_data=raw)
        while True:
            answer = await a.receive_json_from(timeout=10)
            if answer["type"] == "error":
                break  # room frames (a state change) may come first
            # Refused at the parser, never handed to the Gatekeeper as arguments.
            assert answer["type"] != "action_result", (frame_id, answer)
        assert answer["body"]["code"] in {c.value for c in REFUSALS}, (frame_id, answer)
        # A frame that is not JSON to us has no id to refer to; the rest name theirs.
        assert answer["body"]["ref"] in (frame_id, None), (frame_id, answer)
        refused += 1
    assert refused == len(hostile)
    await a.send_json_to({"v": 1, "type": "ping", "id": "still-here", "body": {}})
    pong = await a.receive_json_from(timeout=5)
    assert pong["type"] == "pong"
    assert await database_sync_to_async(ActionRecord.objects.count)() == 0
    assert await database_sync_to_async(Message.objects.count)() == 0
    await a.disconnect()

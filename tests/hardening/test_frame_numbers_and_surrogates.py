"""The frame parser refuses what JSON's grammar lets through but no frame field can hold (issue
13, finding 5): NaN and the infinities, a float no double holds, and lone UTF-16 surrogates
anywhere in the frame. Each is a ``FrameError`` (an error frame on the socket), never an
exception and never a tool call's arguments; escaped surrogate pairs (every emoji Python's
``json.dumps`` writes) and an escaped backslash before ``ud800`` are ordinary text."""

from __future__ import annotations

import json

import pytest

from synapsia_protocol import ErrorCode
from synapsia_protocol.wire import FrameError, parse_client_frame

MAX = 64 * 1024


def _say(text_json: str, frame_id: str = "f1") -> str:
    return f'{{"v":1,"type":"say","id":"{frame_id}","body":{{"text":{text_json}}}}}'


def _act(arguments_json: str) -> str:
    return (
        '{"v":1,"type":"act","id":"a1","body":{"tool":"propose_plan","arguments":'
        f"{arguments_json}}}}}"
    )


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1E309"])
def test_a_number_no_field_takes_is_a_malformed_frame(number: str) -> None:
    with pytest.raises(FrameError) as refused:
        parse_client_frame(_act(f'{{"party_size": {number}}}'), max_bytes=MAX)
    assert refused.value.code is ErrorCode.MALFORMED
    assert "number" in refused.value.message


@pytest.mark.parametrize(
    "frame",
    [
        _act('{"\\ud800": 1}'),  # an argument's key
        _act('{"note": "x\\udfff"}'),  # an argument's value
        _say('"hi \\udc00"'),  # a low half alone
        _say('"\\ud83d then text"'),  # a high half not followed by its low half
        _say('"\\ude00\\ud83d"'),  # both halves, in the wrong order
    ],
)
def test_a_lone_surrogate_anywhere_is_an_invalid_body_naming_the_frame(frame: str) -> None:
    with pytest.raises(FrameError) as refused:
        parse_client_frame(frame, max_bytes=MAX)
    assert (refused.value.code, refused.value.ref) == (
        ErrorCode.INVALID_BODY,
        "a1" if '"act"' in frame else "f1",
    )
    assert "surrogate" in refused.value.message


def test_a_lone_surrogate_in_the_id_is_not_echoed() -> None:
    with pytest.raises(FrameError) as refused:
        parse_client_frame(_say('"hi"', frame_id="\\ud800"), max_bytes=MAX)
    assert refused.value.ref is None
    assert refused.value.code is ErrorCode.MALFORMED


@pytest.mark.parametrize(
    ("text_json", "text"),
    [
        (json.dumps("dinner at 8 \U0001f37d\ufe0f"), "dinner at 8 \U0001f37d\ufe0f"),  # a pair
        ('"a path C:\\\\ud800"', "a path C:\\ud800"),  # an escaped backslash, then letters
        ('"1e400 is only text here"', "1e400 is only text here"),
    ],
)
def test_escaped_pairs_and_lookalikes_are_ordinary_text(text_json: str, text: str) -> None:
    frame = parse_client_frame(_say(text_json), max_bytes=MAX)
    assert frame.body.text == text  # type: ignore[union-attr]


def test_finite_floats_still_reach_the_arguments() -> None:
    frame = parse_client_frame(
        _act('{"budget": 62.5, "tiny": 1e-400, "big": 1e308}'), max_bytes=MAX
    )
    assert frame.body.arguments == {"budget": 62.5, "tiny": 0.0, "big": 1e308}  # type: ignore[union-attr]

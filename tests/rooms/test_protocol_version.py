"""The envelope's ``v`` is the JSON integer 1 and nothing else, and decoding any frame never
raises anything but ``FrameError`` (hypothesis strategies for every client frame type).

Finding 6 of issue 13: ``"v": true`` and ``"v": 1.0`` were accepted as version 1, because
``True == 1 == 1.0`` in Python and pydantic's lax ``Literal[1]`` agrees.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from channels.db import database_sync_to_async
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gatekeeper.errors import ToolArgumentsInvalid, ToolUnknown
from gatekeeper.tools.registry import tool_arguments_validate, tools_all
from rooms.models import Message
from rooms.protocol import (
    CLIENT_FRAME_TYPES,
    MAX_MESSAGE_CHARS,
    ActFrame,
    ErrorCode,
    FrameError,
    PingFrame,
    parse_client_frame,
)
from tests.rooms.test_consumer import frame, join

MAX_BYTES = 64 * 1024

# Each spelling of "one" that is not the JSON integer 1, as raw JSON text.
NOT_THE_INTEGER_ONE = ["true", "1.0", "1e0", '"1"', "[1]", "{}", "null", "false", "0", "2", "-1"]


def envelope(v_json: str, kind: str = "ping", body: str = "{}") -> str:
    return f'{{"v": {v_json}, "type": "{kind}", "id": "f1", "body": {body}}}'


@pytest.mark.parametrize("v_json", NOT_THE_INTEGER_ONE)
def test_only_the_integer_one_is_version_one(v_json: str) -> None:
    with pytest.raises(FrameError) as refused:
        parse_client_frame(envelope(v_json), max_bytes=MAX_BYTES)
    assert refused.value.code is ErrorCode.UNSUPPORTED_VERSION
    assert refused.value.message == "This server speaks v1."
    assert refused.value.ref == "f1"


def test_the_integer_one_is_accepted() -> None:
    parsed = parse_client_frame(envelope("1"), max_bytes=MAX_BYTES)
    assert isinstance(parsed, PingFrame)
    assert type(parsed.v) is int


@pytest.mark.parametrize("v", [True, 1.0])
def test_the_models_refuse_lookalikes_too(v: object) -> None:
    # Not only the envelope check: a frame built in Python (the SDK, a test) is held to it too.
    with pytest.raises(ValueError, match="v must be the integer 1"):
        PingFrame.model_validate({"v": v, "type": "ping", "id": "f1", "body": {}})


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("v_json", ["true", "1.0", '"1"'])
async def test_a_socket_gets_an_error_frame_and_stays_open(make_open_room, v_json: str) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a, _ = await join(setup.room.id, setup.a.token)
    await a.send_to(text_data=envelope(v_json, "say", '{"text": "hello"}'))
    error = await a.receive_json_from(timeout=5)
    assert error["type"] == "error"
    assert error["body"] == {
        "code": "unsupported_version",
        "message": "This server speaks v1.",
        "ref": "f1",
    }
    await a.send_json_to(frame("ping", {}, "p1"))
    assert (await a.receive_json_from(timeout=5))["type"] == "pong"
    assert await database_sync_to_async(Message.objects.count)() == 0
    await a.disconnect()


# --- Hypothesis: every client frame type ---------------------------------------------------

frame_ids = st.from_regex(r"\A[A-Za-z0-9._:-]{1,64}\Z")
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
any_json = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=12,
)
vault_kinds = st.sampled_from(
    [
        "availability",
        "budget",
        "food_likes",
        "food_dislikes",
        "allergies",
        "neighbourhood",
        "link",
        "note",
    ]
)
iso_starts = st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat())

# Bodies of the right shape for each type (most valid, some on the edges of the schema).
bodies: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "say": st.fixed_dictionaries({"text": st.text(min_size=0, max_size=MAX_MESSAGE_CHARS + 2)}),
    "ack": st.fixed_dictionaries({"seq": st.integers(min_value=-2, max_value=2**54)}),
    "ping": st.just({}),
    "act": st.fixed_dictionaries(
        {"tool": st.text(max_size=70), "arguments": st.dictionaries(st.text(), any_json)}
    ),
    "context_request": st.fixed_dictionaries({"ask": st.lists(vault_kinds, max_size=9)}),
    "flare": st.fixed_dictionaries(
        {"reason": st.sampled_from(["loop", "contradiction", "distress", "boredom"])}
    ),
    "seal_offer": st.fixed_dictionaries(
        {
            "offer": st.fixed_dictionaries(
                {
                    "venue_id": st.from_regex(r"\A[a-z0-9][a-z0-9-]{0,64}\Z"),
                    "start": iso_starts | any_json,
                    "party_size": st.integers(min_value=0, max_value=21) | any_json,
                    "price_per_person_minor": st.integers(min_value=-1, max_value=10**8),
                    "currency": st.sampled_from(["EUR", "eur", "EURO", "USD"]),
                }
            )
        }
    ),
}
assert set(bodies) == CLIENT_FRAME_TYPES  # a new frame type needs a strategy here


@st.composite
def client_frames(draw: st.DrawFn) -> dict[str, Any]:
    """A frame of any type, with its body of the right shape or (sometimes) any JSON, and
    (sometimes) the envelope's fields replaced by any JSON or dropped."""
    kind = draw(st.sampled_from(sorted(CLIENT_FRAME_TYPES)))
    data: dict[str, Any] = {
        "v": 1,
        "type": kind,
        "id": draw(frame_ids),
        "body": draw(bodies[kind] | any_json) if draw(st.booleans()) else draw(bodies[kind]),
    }
    for field in draw(st.sets(st.sampled_from(["v", "type", "id", "body", "extra"]))):
        if draw(st.booleans()):
            data.pop(field, None)
        else:
            data[field] = draw(any_json)
    return data


def _decode(raw: str) -> None:
    try:
        parsed = parse_client_frame(raw, max_bytes=MAX_BYTES)
    except FrameError as refused:
        assert refused.code in set(ErrorCode)
        assert refused.message
    else:
        data = json.loads(raw)
        assert parsed.type == data["type"]
        assert type(data["v"]) is int and data["v"] == 1


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(client_frames())
def test_decoding_any_frame_refuses_with_a_frame_error_or_returns_that_frame(
    data: dict[str, Any],
) -> None:
    _decode(json.dumps(data))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200) | any_json.map(json.dumps))
def test_decoding_any_text_refuses_with_a_frame_error(raw: str) -> None:
    _decode(raw)


@settings(max_examples=100, deadline=None)
@given(client_frames(), st.integers(min_value=0, max_value=200), st.binary(max_size=3))
def test_decoding_a_mangled_frame_refuses_with_a_frame_error(
    data: dict[str, Any], cut: int, junk: bytes
) -> None:
    # Truncated or spliced text, including invalid escapes and lone surrogates.
    raw = json.dumps(data)
    _decode(raw[:cut] + junk.decode("latin-1") + raw[cut:])
    _decode(raw.replace('"f', '"\\ud800', 1))


def test_deeply_nested_json_is_a_frame_error() -> None:
    body = "[" * 30_000 + "]" * 30_000
    with pytest.raises(FrameError):
        parse_client_frame(
            envelope("1", "act", f'{{"tool": "x", "arguments": {{"a": {body}}}}}'),
            max_bytes=MAX_BYTES,
        )


# --- Hypothesis: act frames against every registered tool's schema -------------------------


def _act_then_validate(tool: str, arguments: dict[str, Any]) -> None:
    """An act frame as the socket receives it, then the Gatekeeper's argument check: each
    step refuses with its documented error or passes, never anything else."""
    raw = json.dumps(
        {"v": 1, "type": "act", "id": "a1", "body": {"tool": tool, "arguments": arguments}}
    )
    try:
        parsed = parse_client_frame(raw, max_bytes=MAX_BYTES)
    except FrameError:
        return
    assert isinstance(parsed, ActFrame)
    with contextlib.suppress(ToolArgumentsInvalid, ToolUnknown):
        tool_arguments_validate(tool=parsed.body.tool, arguments=parsed.body.arguments)


@st.composite
def tool_calls(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A registered tool (or another name) with arguments keyed like its schema, any values."""
    specs = sorted(tools_all(), key=lambda spec: spec.name)
    spec = draw(st.sampled_from(specs))
    fields = sorted(spec.input_model.model_fields)
    arguments = draw(
        st.dictionaries(st.sampled_from(fields) if fields else st.text(), any_json, max_size=8)
    )
    name = draw(st.sampled_from([spec.name, spec.name.upper(), "no_such_tool"]))
    return name, arguments


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tool_calls())
def test_any_act_arguments_are_refused_as_invalid_or_pass_for_every_tool(
    call: tuple[str, dict[str, Any]],
) -> None:
    _act_then_validate(*call)


@pytest.mark.parametrize("tool", ["book_table", "send_invitation", "venues_search"])
def test_a_lone_surrogate_in_act_arguments_is_refused_as_such(tool: str) -> None:
    arguments = '{"note": "\\ud800"}'  # the JSON escape of a lone surrogate
    body = f'{{"tool": "{tool}", "arguments": {arguments}}}'
    raw = f'{{"v": 1, "type": "act", "id": "a1", "body": {body}}}'
    try:
        parsed = parse_client_frame(raw, max_bytes=MAX_BYTES)
    except FrameError:
        return  # refused at decode: fine
    assert isinstance(parsed, ActFrame)
    with pytest.raises(ToolArgumentsInvalid):
        tool_arguments_validate(tool=tool, arguments=parsed.body.arguments)

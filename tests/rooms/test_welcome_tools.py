"""The `welcome` frame's tool list written from each definition's JSON text
(``synapsia_protocol.wire.welcome_json``): byte for byte what the frame's model writes with
the same definitions, whatever they hold; a definition that is not one is refused."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from pydantic import ValidationError

from gatekeeper.tools.registry import tools_all
from synapsia_protocol import (
    RoomSummary,
    WelcomeBody,
    WelcomeFrame,
    parse_server_frame,
    welcome_json,
)


def _frame(tools: list[Any]) -> WelcomeFrame:
    return WelcomeFrame(
        type="welcome",
        id="01JD6W7YQ2V3N8K5T0R9X4M1ZB",
        body=WelcomeBody(
            room=RoomSummary(
                id=uuid.UUID(int=7),
                purpose="Dinner on Friday ✓",
                charter="Be kind",
                state="open",
                terms={"time_zone": "Europe/Paris", "party_size": 2},
            ),
            participant="agent",
            agent_id=uuid.UUID(int=9),
            acked_seq=3,
            max_frame_bytes=65536,
            tools=tools,
        ),
    )


SPECS = sorted(tools_all(), key=lambda spec: spec.name)


@pytest.mark.parametrize("count", [0, 1, len(SPECS)])
def test_the_registry_s_tools_are_written_as_the_model_writes_them(count: int) -> None:
    specs = SPECS[:count]
    written = welcome_json(_frame([]), [spec.descriptor_json() for spec in specs])
    assert written == _frame([spec.descriptor() for spec in specs]).model_dump_json()
    read = parse_server_frame(written)
    assert isinstance(read, WelcomeFrame)
    assert [tool["name"] for tool in read.body.tools] == [spec.name for spec in specs]


def test_any_definition_is_written_as_the_model_writes_it() -> None:
    """Keys out of the model's order, keys it does not know (kept), text outside ASCII,
    escapes, and JSON spacing of any kind."""
    definition = {
        "_meta": {"synapsia.dev/x": [1, None, True]},
        "description": 'Says "hello" \\ and goes\n\u00e9\u2028 \U0001f600',
        "x-vendor": {"z": 1, "a": 2},
        "inputSchema": {"type": "object", "properties": {}},
        "name": "greet",
    }
    for text in (json.dumps(definition), json.dumps(definition, indent=3, ensure_ascii=False)):
        assert welcome_json(_frame([]), [text]) == _frame([definition]).model_dump_json()


@pytest.mark.parametrize(
    "text",
    [
        '{"inputSchema": {}}',  # no name
        '{"name": "x"}',  # no inputSchema
        '{"name": 5, "inputSchema": {}}',
        '[{"name": "x", "inputSchema": {}}]',
        '{"name": "x", "inputSchema": {}',  # not JSON
    ],
)
def test_a_text_that_is_no_tool_definition_is_refused(text: str) -> None:
    with pytest.raises(ValidationError):
        welcome_json(_frame([]), [text])


def test_a_frame_given_with_tools_is_refused() -> None:
    with pytest.raises(ValueError, match="give the frame none"):
        welcome_json(_frame([SPECS[0].descriptor()]), [SPECS[1].descriptor_json()])

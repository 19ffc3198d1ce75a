"""The published protocol documents match the code: docs/schemas/*.json and docs/asyncapi.yaml
are what ``make schemas`` writes from the protocol package now, each schema has its ``$id``,
the AsyncAPI document is valid AsyncAPI 3.0 (checked against the specification's own JSON
Schema, vendored in tests/rooms/data from the ``@asyncapi/specs`` package, Apache-2.0) and its
payload schemas accept the frames the package writes and refuse the ones it refuses."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from rooms.management.commands.protocol_schemas import (
    ASYNCAPI_PATH,
    SCHEMA_DIR,
    rendered_asyncapi,
    rendered_schemas,
)
from rooms.protocol import CloseCode, ErrorCode
from synapsia_protocol import CLIENT_FRAME_TYPES, SERVER_FRAME_TYPES
from synapsia_protocol.schemas import SCHEMA_ID_PREFIX, asyncapi_document, frame_schemas

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
ASYNCAPI_SPEC = Path(__file__).resolve().parent / "data" / "asyncapi-3.0.0.schema.json"


def test_schemas_are_current() -> None:
    for name, text in rendered_schemas().items():
        path = SCHEMA_DIR / name
        assert path.exists(), f"docs/schemas/{name} is missing: run `make schemas`"
        assert path.read_text() == text, f"docs/schemas/{name} is stale: run `make schemas`"


def test_the_asyncapi_document_is_current() -> None:
    assert ASYNCAPI_PATH.exists(), "docs/asyncapi.yaml is missing: run `make schemas`"
    assert ASYNCAPI_PATH.read_text() == rendered_asyncapi(), (
        "docs/asyncapi.yaml is stale: run `make schemas`"
    )


def test_a_changed_model_would_make_them_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    # The staleness checks compare against what the package generates at this moment: a
    # model that changes changes the text (so an unregenerated file fails the checks above).
    import synapsia_protocol.schemas as schemas

    before_json, before_yaml = rendered_schemas(), rendered_asyncapi()
    original = schemas.close_code_schema
    monkeypatch.setattr(
        schemas,
        "close_code_schema",
        lambda: original() | {"description": "changed"},
    )
    assert rendered_schemas()["close-code.json"] != before_json["close-code.json"]
    assert rendered_asyncapi() != before_yaml


def test_every_protocol_schema_has_its_own_id() -> None:
    ids = []
    for stem, schema in frame_schemas().items():
        assert schema["$id"] == f"{SCHEMA_ID_PREFIX}{stem}"
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        ids.append(schema["$id"])
    assert len(set(ids)) == len(ids) == 3
    for stem in frame_schemas():
        published = json.loads((SCHEMA_DIR / f"{stem}.json").read_text())
        assert published["$id"] == f"{SCHEMA_ID_PREFIX}{stem}"
        jsonschema.Draft202012Validator.check_schema(published)


def _asyncapi_validator() -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(json.loads(ASYNCAPI_SPEC.read_text()))


def test_the_asyncapi_document_is_valid_asyncapi_3() -> None:
    document = yaml.safe_load(ASYNCAPI_PATH.read_text())
    assert document["asyncapi"] == "3.0.0"
    errors = [e.message for e in _asyncapi_validator().iter_errors(document)]
    assert errors == []


@pytest.mark.parametrize(
    "breakage",
    ["operation action", "schema type", "spec version", "channel field from AsyncAPI 2"],
)
def test_the_asyncapi_check_catches_a_broken_document(breakage: str) -> None:
    document = copy.deepcopy(asyncapi_document())
    if breakage == "operation action":
        document["operations"]["receive_say"]["action"] = "push"
    elif breakage == "schema type":
        document["components"]["schemas"]["SayBody"]["type"] = "text"
    elif breakage == "spec version":
        document["asyncapi"] = "2.6.0"
    else:
        document["channels"]["room"]["subscribe"] = {"message": {}}
    assert list(_asyncapi_validator().iter_errors(document)) != []


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for value in node.values() for r in _refs(value)]
    if isinstance(node, list):
        return [r for value in node for r in _refs(value)]
    return []


def test_every_reference_in_the_asyncapi_document_resolves() -> None:
    document = yaml.safe_load(ASYNCAPI_PATH.read_text())
    refs = _refs(document)
    assert len(refs) > 50
    for ref in refs:
        assert ref.startswith("#/"), ref
        node: Any = document
        for part in ref[2:].split("/"):
            node = node[part]  # KeyError: a dangling reference


def test_every_frame_type_is_a_message_and_an_operation() -> None:
    document = asyncapi_document()
    assert set(document["components"]["messages"]) == CLIENT_FRAME_TYPES | SERVER_FRAME_TYPES
    actions = {name: op["action"] for name, op in document["operations"].items()}
    assert {n.removeprefix("receive_") for n, a in actions.items() if a == "receive"} == (
        CLIENT_FRAME_TYPES
    )
    assert {n.removeprefix("send_") for n, a in actions.items() if a == "send"} == (
        SERVER_FRAME_TYPES
    )


def test_every_message_is_summarised_from_its_own_frame_class() -> None:
    from synapsia_protocol.schemas import CLIENT_FRAMES, SERVER_FRAMES, frame_type

    messages = asyncapi_document()["components"]["messages"]
    for frame in CLIENT_FRAMES + SERVER_FRAMES:
        summary = messages[frame_type(frame)].get("summary", "")
        assert summary and "pydantic" not in summary.lower(), frame.__name__
        assert summary == " ".join((frame.__doc__ or "").split())


def _payload_validator(frame_type: str) -> jsonschema.Draft202012Validator:
    document = asyncapi_document()
    message = document["components"]["messages"][frame_type]
    return jsonschema.Draft202012Validator(
        {"$ref": message["payload"]["$ref"], "components": document["components"]},
        format_checker=jsonschema.FormatChecker(),
    )


SAY = {"v": 1, "type": "say", "id": "s-1", "body": {"text": "Friday at eight?"}}
ACT = {
    "v": 1,
    "type": "act",
    "id": "a-1",
    "body": {"tool": "book_table", "arguments": {"venue_id": "osteria", "party_size": 2}},
}


@pytest.mark.parametrize("frame", [SAY, ACT])
def test_the_published_payloads_accept_what_the_server_accepts(frame: dict[str, Any]) -> None:
    from synapsia_protocol import parse_client_frame

    parse_client_frame(json.dumps(frame), max_bytes=65536)
    assert list(_payload_validator(frame["type"]).iter_errors(frame)) == []
    client = json.loads((SCHEMA_DIR / "client-frame.json").read_text())
    assert list(jsonschema.Draft202012Validator(client).iter_errors(frame)) == []


@pytest.mark.parametrize(
    "frame",
    [
        {**SAY, "body": {"text": ""}},
        {**SAY, "body": {"text": "x", "admin": True}},
        {**SAY, "v": 2},
        {**SAY, "id": "has spaces"},
        {**ACT, "body": {"tool": "", "arguments": {}}},
        {**ACT, "body": {"tool": "book_table"}},
    ],
)
def test_the_published_payloads_refuse_what_the_server_refuses(frame: dict[str, Any]) -> None:
    from synapsia_protocol import FrameError, parse_client_frame

    with pytest.raises(FrameError):
        parse_client_frame(json.dumps(frame), max_bytes=65536)
    assert list(_payload_validator(frame["type"]).iter_errors(frame)) != []
    client = json.loads((SCHEMA_DIR / "client-frame.json").read_text())
    assert list(jsonschema.Draft202012Validator(client).iter_errors(frame)) != []


def test_every_error_and_close_code_is_documented() -> None:
    doc = DOC.read_text()
    for code in ErrorCode:
        assert f"`{code.value}`" in doc, f"error code {code.value} is not in docs/protocol.md"
    for close in CloseCode:
        assert f"`{close.value}`" in doc, f"close code {close.value} is not in docs/protocol.md"
    document = asyncapi_document()
    assert document["info"]["x-error-codes"] == [code.value for code in ErrorCode]
    published = [c["const"] for c in document["components"]["schemas"]["CloseCode"]["oneOf"]]
    assert sorted(published) == sorted(int(c) for c in CloseCode)

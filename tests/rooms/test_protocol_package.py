"""One protocol package: the server and the SDK use the same frame classes, and neither keeps
a copy of its own (issue 15). The package itself imports no Django and no server code."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import subprocess
import sys
from collections.abc import Iterator
from types import ModuleType

import pydantic
import pytest
from ninja import Schema

import agents
import agents.client
import agents.context
import rooms.consumers
import rooms.context
import rooms.protocol
import synapsia_protocol
import synapsia_protocol.codes
from tests.e2e.daphne import ROOT


def _package_models() -> dict[str, type[pydantic.BaseModel]]:
    return {
        name: value
        for name, value in vars(synapsia_protocol).items()
        if inspect.isclass(value) and issubclass(value, pydantic.BaseModel)
    }


def _modules(package: ModuleType) -> Iterator[ModuleType]:
    yield package
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if ".migrations" in info.name or ".management" in info.name:
            continue
        yield importlib.import_module(info.name)


def _fields(cls: type) -> frozenset[str]:
    if issubclass(cls, pydantic.BaseModel):
        return frozenset(cls.model_fields)
    return frozenset(field.name for field in dataclasses.fields(cls))  # type: ignore[arg-type]


def _own_frame_like_classes(package: ModuleType, *, structural: bool = True) -> list[str]:
    """Models and dataclasses defined in ``package`` that copy a protocol class: named like
    one (``...Frame``, ``...Body`` or a package class name), or (``structural``) a mirror under
    another name: sharing at least two fields with a protocol model and differing from it by
    at most one field (or sharing three and differing by two). The server's domain results (e.g.
    ``rooms.sealed.Reveal``) may share a body's field names; only the SDK, which decodes the
    wire and nothing else, is held to the structural rule."""
    protocol = _package_models()
    shapes = {
        name: _fields(model)
        for name, model in protocol.items()
        if len(model.model_fields) >= 2 and name not in {"OfferPlan"}
    }
    found = []
    for module in _modules(package):
        for name, cls in vars(module).items():
            if not inspect.isclass(cls) or cls.__module__ != module.__name__:
                continue
            is_model = issubclass(cls, pydantic.BaseModel)
            if not (is_model or dataclasses.is_dataclass(cls)):
                continue
            where = f"{module.__name__}.{name}"
            if name.endswith(("Frame", "Body")) or name in protocol:
                found.append(f"{where} (named like a protocol class)")
                continue
            if not structural or (is_model and issubclass(cls, Schema)):
                continue  # the REST API's own schemas, published in its OpenAPI document
            fields = _fields(cls)
            for shape_name, shape in shapes.items():
                shared, differ = len(fields & shape), len(fields ^ shape)
                if (shared >= 2 and differ <= 1) or (shared >= 3 and differ <= 2):
                    found.append(f"{where} (mirrors {shape_name})")
    return found


def test_the_sdk_defines_no_frame_class_of_its_own() -> None:
    assert _own_frame_like_classes(agents) == []


# Every package of the server, not only the one with the consumer: a frame class defined
# anywhere on the server side (a view's, a task's, the Gatekeeper's) would be a second copy.
SERVER_PACKAGES = (
    "rooms",
    "gatekeeper",
    "slips",
    "ledger",
    "synapsia",
    "frontend",
    "practice",
    "dining",
    "stewards",
    "artifacts",
)


def test_the_list_of_server_packages_is_every_package_of_the_repository() -> None:
    # A new top-level package is either the server's (and walked above) or one of these.
    elsewhere = {"agents", "synapsia_protocol", "tests", "bench"}
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert packages - elsewhere == set(SERVER_PACKAGES)


@pytest.mark.parametrize("package", SERVER_PACKAGES)
def test_the_server_defines_no_frame_class_of_its_own(package: str) -> None:
    assert _own_frame_like_classes(importlib.import_module(package), structural=False) == []


def test_the_walk_would_see_a_copied_frame() -> None:
    # The check above is only worth something if it catches a copy: a module with one.
    fake = ModuleType("fake_sdk")
    fake.__path__ = []

    @dataclasses.dataclass
    class Delivered:  # MessageBody's fields under another name, less one
        seq: int
        sender_agent_id: str
        text: str
        fenced: str | None
        flags: list[str]
        sent_at: str

    @dataclasses.dataclass
    class Joined:  # WelcomeBody's, less max_frame_bytes, plus terms
        room: dict[str, str]
        participant: str
        agent_id: str | None
        acked_seq: int
        tools: list[dict[str, str]]
        terms: dict[str, str] | None

    class WelcomeBody(pydantic.BaseModel):
        room: dict[str, str]

    @dataclasses.dataclass
    class Attempt:  # shares two fields with ActBody, but is something else
        name: str
        kind: str
        boundary: str
        tool: str
        arguments: dict[str, str]

    for cls in (Delivered, Joined, WelcomeBody, Attempt):
        cls.__module__ = "fake_sdk"
        setattr(fake, cls.__name__, cls)
    assert _own_frame_like_classes(fake) == [
        "fake_sdk.Delivered (mirrors MessageBody)",
        "fake_sdk.Joined (mirrors WelcomeBody)",
        "fake_sdk.WelcomeBody (named like a protocol class)",
    ]


@pytest.mark.parametrize(
    ("module", "names"),
    [
        (rooms.protocol, ["SayFrame", "ActFrame", "AgentContext", "CloseCode", "ErrorCode"]),
        (rooms.consumers, ["SayFrame", "ContextFrame", "MessageBody", "CloseCode"]),
        # What the consumer validates with and what the SDK decodes with: the package's own.
        (rooms.consumers, ["parse_client_frame", "error_frame", "new_frame_id"]),
        (agents.client, ["parse_server_frame"]),
        (rooms.context, ["AgentContext", "ClearedItem", "PeerItem", "ContextMessage"]),
        (agents.context, ["ClearedItem", "PeerItem"]),
    ],
)
def test_server_and_sdk_import_the_same_protocol_classes(
    module: ModuleType, names: list[str]
) -> None:
    for name in names:
        assert getattr(module, name) is getattr(synapsia_protocol, name), name


def test_the_sdk_types_are_the_package_classes() -> None:
    assert agents.context.TurnContext is synapsia_protocol.AgentContext
    assert agents.context.PeerMessage is synapsia_protocol.ContextMessage
    assert agents.TurnContext is synapsia_protocol.AgentContext
    assert agents.client.RoomMessage is synapsia_protocol.MessageBody
    assert agents.client.Welcome is synapsia_protocol.WelcomeBody
    assert agents.client.ActionOutcome is synapsia_protocol.ActionResultBody
    assert agents.client.Notice is synapsia_protocol.NoticeBody
    assert agents.client.Whisper is synapsia_protocol.WhisperBody
    assert agents.Whisper is agents.context.Whisper is synapsia_protocol.WhisperBody
    assert synapsia_protocol.ContextWhisper is synapsia_protocol.WhisperBody


def test_every_close_code_is_either_final_or_worth_a_reconnect() -> None:
    final = set(synapsia_protocol.codes.FINAL_CLOSE_CODES)
    retry = set(synapsia_protocol.codes.RETRYABLE_CLOSE_CODES)
    assert not final & retry
    assert final | retry == set(synapsia_protocol.CloseCode)
    assert agents.client.FINAL_CLOSE_CODES is synapsia_protocol.codes.FINAL_CLOSE_CODES


def test_the_protocol_package_imports_no_django_and_no_server_code() -> None:
    # A fresh interpreter: in this one, Django is loaded already by the test run.
    probe = (
        "import sys, synapsia_protocol, synapsia_protocol.schemas\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'django', 'rooms', 'gatekeeper', 'slips', 'ledger', 'synapsia', 'agents', 'ninja'})\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""

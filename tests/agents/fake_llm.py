"""A stand-in for an OpenAI-compatible endpoint: a real HTTP server on a free loopback port
that answers ``POST /v1/chat/completions`` by replaying recorded responses in order (from
``tests/agents/llm_recordings/<name>.json``) and keeps every request it was sent.

A recording is ``{"responses": [...]}``; each response is one of

* ``{"json": {...}}``: a chat completion (status 200 unless ``status`` says otherwise);
* ``{"status": 500, "text": "..."}``: any status with a raw body (garbage, an error page);
* either with ``"delay": seconds`` to answer late, or ``"headers": {...}`` to add headers.

When the recording runs out the server answers 500, so a test never hangs on it.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.loopback_http import QuietHandler, loopback_server

RECORDINGS = Path(__file__).resolve().parent / "llm_recordings"


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    def message(self, role: str) -> list[dict[str, Any]]:
        return [m for m in self.body["messages"] if m["role"] == role]


@dataclass
class FakeLLM:
    """What the endpoint replays and what it was asked."""

    responses: list[dict[str, Any]]
    base_url: str = ""
    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def env(self) -> dict[str, str]:
        """The environment that points an LLM agent here."""
        return {"SYNAPSIA_LLM_URL": self.base_url, "SYNAPSIA_LLM_MODEL": "fake-model-1"}

    def next_response(self, request: Request) -> dict[str, Any]:
        with self.lock:
            self.requests.append(request)
            n = len(self.requests)
        if n > len(self.responses):
            return {"status": 500, "text": '{"error": {"message": "recording exhausted"}}'}
        return self.responses[n - 1]


def load_recording(name: str) -> list[dict[str, Any]]:
    return list(json.loads((RECORDINGS / f"{name}.json").read_text())["responses"])


def _handler_for(fake: FakeLLM) -> type[QuietHandler]:
    class Handler(QuietHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            if self.path != "/v1/chat/completions":
                self.answer(404, b'{"error": {"message": "not found"}}')
                return
            response = fake.next_response(
                Request(self.path, dict(self.headers.items()), json.loads(raw))
            )
            if "delay" in response:
                time.sleep(response["delay"])
            if "json" in response:
                body = json.dumps(response["json"]).encode()
            else:
                body = response.get("text", "").encode()
            self.answer(response.get("status", 200), body, response.get("headers", {}))

    return Handler


@contextlib.contextmanager
def serving(responses: list[dict[str, Any]]) -> Iterator[FakeLLM]:
    fake = FakeLLM(responses)
    with loopback_server(_handler_for(fake)) as base_url:
        fake.base_url = f"{base_url}/v1"
        yield fake


@pytest.fixture(name="fake_llm")
def fake_llm_fixture() -> Iterator[Callable[[str], FakeLLM]]:
    """``fake_llm("recording_name")`` starts an endpoint replaying that recording (or
    ``fake_llm([...responses])``); every one started is stopped after the test."""
    with contextlib.ExitStack() as stack:

        def start(recording: str | list[dict[str, Any]]) -> FakeLLM:
            responses = load_recording(recording) if isinstance(recording, str) else recording
            return stack.enter_context(serving(responses))

        yield start

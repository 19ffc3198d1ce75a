"""The four minimal examples of docs/agents.md ("Bring your own agent: four ways in") run as
written, against a real Daphne and a practice room: the SDK agent answers the other side, the
MCP client configuration starts a bridge an MCP client can use, the A2A executor (served with
a2a-sdk) speaks through ``python -m agents.a2a``, and the LLM command speaks through an
OpenAI-compatible endpoint (the loopback stand-in of tests/agents/fake_llm.py).

Only the placeholders are filled in (the room's address, the seat's token, the ports); each
example's text is read from the document itself, so a change there that breaks it fails here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from agents import RoomClient
from agents.mcp import BRIDGE_TOOL_NAMES, TRUST_KEY
from practice.seeding import Practice, practice_seed
from rooms.handshake import Participant
from rooms.models import Message
from rooms.selectors import tools_listed
from synapsia.serving import free_port
from tests.agents.fake_llm import FakeLLM
from tests.agents.fake_llm import fake_llm_fixture as fake_llm_fixture  # the fixture
from tests.e2e.daphne import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
DOC = ROOT / "docs" / "agents.md"
SECTION = "## Bring your own agent: four ways in"
DOC_WS = "ws://127.0.0.1:8000"
ROOM_ID, TOKEN = "<room-id>", "syn_agent_..."


def _examples() -> list[tuple[str, str]]:
    """The section's code blocks, as (language, text), in order."""
    text = DOC.read_text()
    section = text[text.index(SECTION) :]
    section = section[: section.index("\n## ", len(SECTION))]
    return re.findall(r"^```(\w*)\n(.*?)^```$", section, re.S | re.M)


def _example(index: int, language: str) -> str:
    blocks = _examples()
    # SDK (python), MCP client (json), A2A executor (python) and command (shell), LLM (shell).
    assert [lang for lang, _ in blocks] == ["python", "json", "python", "", ""]
    found_language, code = blocks[index]
    assert found_language == language
    return code


def _filled(text: str, ws: str, practice: Practice, token: str) -> str:
    for placeholder in (DOC_WS, ROOM_ID, TOKEN):
        assert placeholder in text, f"the example no longer has {placeholder}"
    return text.replace(DOC_WS, ws).replace(ROOM_ID, str(practice.room_id)).replace(TOKEN, token)


def _command(text: str) -> tuple[dict[str, str], list[str]]:
    """A shell example's leading VAR=value assignments and its argv (python: this one)."""
    words = shlex.split(text.replace("\\\n", " "))
    env = {}
    while "=" in words[0]:
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    assert words[0] == "python", words
    return env, [sys.executable, *words[1:]]


def _ws(live_daphne: str) -> str:
    return live_daphne.replace("http://", "ws://")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYNAPSIA_LLM_")}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


async def _heard(
    url: str, token: str, argv: list[str], env: dict[str, str], *, prompt: str | None = None
) -> tuple[str, str]:
    """Start the example, and return the first thing the other seat hears from it (and what
    the example wrote to standard error, for a failure's message)."""
    async with RoomClient(url, token) as peer:
        if prompt is not None:
            await peer.say(prompt)
        process = await asyncio.create_subprocess_exec(
            *argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        hearing = asyncio.ensure_future(peer.next_message(timeout=60))
        ending = asyncio.ensure_future(process.wait())
        try:
            await asyncio.wait({hearing, ending}, return_when=asyncio.FIRST_COMPLETED)
            if not hearing.done():  # it ended: anything it said is still on its way
                await asyncio.wait({hearing}, timeout=5)
        finally:
            if process.returncode is None:
                process.terminate()
            _, err = await asyncio.wait_for(process.communicate(), 30)
            ending.cancel()
        if not hearing.done():
            hearing.cancel()
            pytest.fail(f"the example ended ({process.returncode}) saying nothing: {err.decode()}")
        return (await hearing).text, err.decode()


@pytest.fixture
def practice() -> Practice:
    return practice_seed()


def test_the_sdk_example_answers_the_other_side(
    live_daphne: str, practice: Practice, tmp_path: Path
) -> None:
    code = _filled(_example(0, "python"), _ws(live_daphne), practice, practice.host.token)
    script = tmp_path / "my_agent.py"
    script.write_text(code)
    url = f"{_ws(live_daphne)}/ws/rooms/{practice.room_id}/"
    heard, err = asyncio.run(
        _heard(url, practice.guest.token, [sys.executable, str(script)], _env(), prompt="Hello!")
    )
    assert heard == "Friday at eight works for us.", err
    assert Message.objects.filter(room_id=practice.room_id, sender_id=practice.host.agent_id)


def test_the_mcp_client_configuration_starts_a_bridge_the_client_can_use(
    live_daphne: str, practice: Practice
) -> None:
    config = json.loads(_filled(_example(1, "json"), _ws(live_daphne), practice, "TOKEN"))
    (server,) = config["mcpServers"].values()
    assert server["command"] == "python"
    assert server["env"] == {"SYNAPSIA_AGENT_TOKEN": "TOKEN"}  # the token: never an argument
    params = StdioServerParameters(
        command=sys.executable,
        args=server["args"],
        env={**server["env"], "SYNAPSIA_AGENT_TOKEN": practice.guest.token},
        cwd=ROOT,
    )

    async def use() -> tuple[set[str], types.CallToolResult]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            names = {tool.name for tool in (await session.list_tools()).tools}
            return names, await session.call_tool("room_context", {})

    names, context = asyncio.run(use())
    guest = Participant(
        "agent", practice.room_id, practice.guest.owner.id, practice.guest.agent_id, 0
    )
    assert names == {t["name"] for t in tools_listed(participant=guest)} | BRIDGE_TOOL_NAMES
    # The tools the section names are the bridge's own.
    prose = DOC.read_text().split(SECTION, 1)[1].split("```json", 1)[0]
    assert {n for n in BRIDGE_TOOL_NAMES if f"`{n}`" in prose} == BRIDGE_TOOL_NAMES
    marks = [(block.meta or {}).get(TRUST_KEY) for block in context.content]
    assert context.is_error is False and marks == ["trusted", "untrusted"]


A2A_SERVING = """

# Served as tests/agents/a2a_peer_agent.py serves its agent (the part the document leaves out).
import os

from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from starlette.applications import Starlette

CARD = AgentCard(
    name="Dinner guest",
    description="The example of docs/agents.md.",
    version="1",
    supported_interfaces=[
        AgentInterface(url=os.environ["GUEST_URL"], protocol_binding="JSONRPC",
                       protocol_version="1.0")
    ],
    capabilities=AgentCapabilities(streaming=False),
    default_input_modes=["application/json"],
    default_output_modes=["application/json"],
    skills=[AgentSkill(id="dinner", name="Dinner", description="Agrees a dinner.", tags=["t"])],
)
_handler = DefaultRequestHandler(DinnerGuest(), InMemoryTaskStore(), CARD)
app = Starlette(routes=[*create_agent_card_routes(CARD), *create_jsonrpc_routes(_handler, "/")])
"""


@pytest.fixture
def served_guest(tmp_path: Path) -> Iterator[Callable[[], str]]:
    """Serve the document's A2A executor on loopback with Daphne: its card URL."""
    processes: list[subprocess.Popen[bytes]] = []

    def serve() -> str:
        (tmp_path / "dinner_guest.py").write_text(_example(2, "python") + A2A_SERVING)
        port = free_port()
        log = tmp_path / "dinner_guest.log"
        with log.open("wb") as out:
            processes.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "daphne",
                        "-b",
                        "127.0.0.1",
                        "-p",
                        str(port),
                        "dinner_guest:app",
                    ],
                    cwd=tmp_path,
                    env=_env(GUEST_URL=f"http://127.0.0.1:{port}/"),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
        card = f"http://127.0.0.1:{port}/.well-known/agent-card.json"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(card, trust_env=False, timeout=2).status_code == 200:
                    return card
            time.sleep(0.2)
        raise RuntimeError(f"the example's A2A agent did not start: {log.read_text()}")

    yield serve
    for process in processes:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def test_the_a2a_example_speaks_through_the_adapter(
    live_daphne: str, practice: Practice, served_guest: Callable[[], str]
) -> None:
    card = served_guest()
    command = _filled(_example(3, ""), _ws(live_daphne), practice, practice.guest.token)
    doc_card = "http://127.0.0.1:9999/.well-known/agent-card.json"
    assert doc_card in command
    env, argv = _command(command.replace(doc_card, card))
    url = f"{_ws(live_daphne)}/ws/rooms/{practice.room_id}/"
    heard, err = asyncio.run(_heard(url, practice.host.token, argv, _env(**env)))
    assert heard == "Friday at eight suits us.", err


def test_the_llm_example_speaks_through_an_openai_compatible_endpoint(
    live_daphne: str, practice: Practice, fake_llm: Callable[[Any], FakeLLM]
) -> None:
    said = {"text": "Friday at eight works for us."}
    call = {"id": "call_1", "type": "function"}
    call["function"] = {"name": "say", "arguments": json.dumps(said)}  # type: ignore[assignment]
    completion = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1764460800,
        "model": "my-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ],
    }
    fake = fake_llm([{"json": completion}])
    command = _filled(_example(4, ""), _ws(live_daphne), practice, practice.host.token)
    env, argv = _command(command)
    assert env["SYNAPSIA_LLM_URL"].endswith("/v1") and env["SYNAPSIA_LLM_MODEL"] == "my-model"
    env["SYNAPSIA_LLM_URL"] = fake.base_url  # the stand-in's port for the document's
    url = f"{_ws(live_daphne)}/ws/rooms/{practice.room_id}/"
    heard, err = asyncio.run(_heard(url, practice.guest.token, argv, _env(**env)))
    assert heard == said["text"], err
    (request,) = fake.requests
    assert request.path == "/v1/chat/completions" and request.body["model"] == "my-model"

"""The SDK is its own distribution: in a fresh virtual environment, ``pip install`` of the
protocol package and the SDK (nothing of the server) gives a client that imports no server
code, passes the SDK's own tests, and completes a real negotiation against a real Daphne with
``python -m agents.negotiator`` (and says something with ``python -m agents.run``).

The sources are copied first, so the build's own files (build/, *.egg-info) land in the copy
and never in the repository. pip resolves from the registry, held to the pinned versions of
requirements/constraints.txt (its cache makes that quick after the first run)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents import RoomClient
from ledger.models import LedgerEvent
from ledger.verification import ledger_verify_room
from practice.demo import StandInOwners
from practice.seeding import Practice, practice_seed
from rooms.models import Message
from tests.e2e.daphne import ROOT

# The SDK's packaging is the same whatever the server's profile, and building its venv is a
# minute of the slower pass: checked once, in pass 1 (the SDK against PostgreSQL + Redis is
# tests/agents/test_sdk_live.py's, in both passes).
pytestmark = pytest.mark.skipif(
    bool(os.environ.get("SYNAPSIA_TEST_SERVICES")), reason="the SDK's distribution: pass 1 only"
)

SDK_OWN_TESTS = ROOT / "tests" / "agents" / "test_sdk_decoding.py"
PYTEST_ALONE = ("-o", "asyncio_mode=auto", SDK_OWN_TESTS.name)


@pytest.fixture(scope="module")
def sdk_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with only the protocol package and the SDK installed (and pytest, for
    the SDK's own tests): its python."""
    base = tmp_path_factory.mktemp("sdk")
    src = base / "src"
    for name in ("synapsia_protocol", "agents"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    venv = base / "venv"
    interpreter = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([interpreter, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    constraints = ROOT / "requirements" / "constraints.txt"
    install = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run(
        [*install, "-c", str(constraints), str(src / "synapsia_protocol"), str(src / "agents")],
        check=True,
        cwd=base,
        timeout=600,
    )
    subprocess.run(
        [*install, "-c", str(constraints), "pytest", "pytest-asyncio"],
        check=True,
        cwd=base,
        timeout=600,
    )
    return python


def _outside_the_repo(python: Path) -> dict[str, Any]:
    # Run from the venv's own folder with a clean environment: nothing of the repository can
    # be on the path (no PYTHONPATH, and the working directory is not the repository).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DJANGO"))}
    return {"cwd": python.parent.parent, "env": env, "text": True, "capture_output": True}


def test_the_installed_sdk_is_alone_in_its_venv(sdk_venv: Path) -> None:
    probe = (
        "import importlib.util, sys\n"
        "import agents, agents.client, agents.context, agents.negotiator, agents.llm\n"
        "import agents.run, agents.cli, agents.dinner, synapsia_protocol\n"
        "print(agents.__file__)\n"
        "print(synapsia_protocol.__file__)\n"
        "assert agents.client.RoomMessage is synapsia_protocol.MessageBody\n"
        "assert agents.context.TurnContext is synapsia_protocol.AgentContext\n"
        "server = ['django', 'rooms', 'gatekeeper', 'slips', 'ledger', 'dining', 'synapsia']\n"
        "print([m for m in server if importlib.util.find_spec(m) is not None])\n"
        "import importlib.metadata as md, re\n"
        "def needs(dist):\n"
        "    reqs = [r for r in md.requires(dist) or [] if 'extra ==' not in r]\n"
        "    return sorted(re.split(r'[<>=!~;\\[ ]', r, maxsplit=1)[0].lower() for r in reqs)\n"
        "print(needs('synapsia-agents'), needs('synapsia-protocol'))\n"
    )
    result = subprocess.run(
        [str(sdk_venv), "-c", probe], **_outside_the_repo(sdk_venv), check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr
    agents_file, protocol_file, server, needs = result.stdout.splitlines()
    site = str(sdk_venv.parent.parent / "lib")
    assert agents_file.startswith(site) and protocol_file.startswith(site)
    assert server == "[]"  # no server package exists in the venv, so none was imported
    # The bridges are extras: without them, each says which one to install.
    for module, extra in (("agents.mcp", "mcp"), ("agents.a2a", "a2a")):
        run = [str(sdk_venv), "-m", module, "--help"]
        missing = subprocess.run(run, **_outside_the_repo(sdk_venv), check=False, timeout=60)
        assert missing.returncode == 1
        assert f"pip install './agents[{extra}]'" in missing.stderr, missing.stderr
    # What the two distributions declare (the MCP and A2A extras aside): the protocol package,
    # websockets and pydantic for the SDK; pydantic alone for the protocol package.
    assert needs == "['pydantic', 'synapsia-protocol', 'websockets'] ['pydantic']"


def test_the_sdk_passes_its_own_tests_in_its_venv(sdk_venv: Path, tmp_path: Path) -> None:
    # The SDK's own tests import the SDK, the protocol package, websockets and pytest only;
    # run alone, outside the repository (no conftest, no Django settings).
    shutil.copy(SDK_OWN_TESTS, tmp_path / SDK_OWN_TESTS.name)
    options = _outside_the_repo(sdk_venv) | {"cwd": tmp_path}
    result = subprocess.run(
        [str(sdk_venv), "-m", "pytest", "-q", "-p", "no:cacheprovider", *PYTEST_ALONE],
        **options,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert " passed" in result.stdout and "failed" not in result.stdout


@pytest.fixture
def stand_in() -> Iterator[Any]:
    """Approves Alice's grants with her demo-held key while a test runs."""
    started: list[StandInOwners] = []

    def start(practice: Practice) -> StandInOwners:
        owners = StandInOwners(practice, say=lambda line: None)
        owners.start()
        started.append(owners)
        return owners

    yield start
    for owners in started:
        owners.finish()
        assert owners.failure is None, owners.failure


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_the_installed_negotiators_book_a_table_against_a_real_daphne(
    sdk_venv: Path, live_daphne: str, stand_in: Any
) -> None:
    practice = practice_seed()
    owners = stand_in(practice)
    url = live_daphne.replace("http://", "ws://") + f"/ws/rooms/{practice.room_id}/"

    def negotiator(token: str) -> subprocess.Popen[str]:
        options = _outside_the_repo(sdk_venv)
        return subprocess.Popen(
            [str(sdk_venv), "-m", "agents.negotiator", "--url", url],
            cwd=options["cwd"],
            env={**options["env"], "SYNAPSIA_AGENT_TOKEN": token},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    alice, bob = negotiator(practice.host.token), negotiator(practice.guest.token)
    try:
        alice_out, alice_err = alice.communicate(timeout=180)
        bob_out, bob_err = bob.communicate(timeout=180)
    finally:
        for process in (alice, bob):
            if process.poll() is None:
                process.kill()
    assert (alice.returncode, bob.returncode) == (0, 0), alice_err + bob_err
    assert owners.decisions, "the booking never waited for Alice's approval"
    assert alice_out.splitlines()[-1].startswith("booked: venue=osteria-kanal start=")
    assert bob_out.splitlines()[-1].startswith("booked: venue=osteria-kanal start=")
    booked = LedgerEvent.objects.filter(
        room_id=practice.room_id, kind="action_executed", data__tool="book_table"
    )
    assert booked.count() == 1
    assert ledger_verify_room(room_id=practice.room_id).ok


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_the_installed_run_command_says_a_line_the_peer_hears(
    sdk_venv: Path, live_daphne: str, make_open_room: Any
) -> None:
    setup = make_open_room()
    url = live_daphne.replace("http://", "ws://") + f"/ws/rooms/{setup.room.id}/"

    async def listen_while_it_says() -> tuple[str, str, str]:
        async with RoomClient(url, setup.b.token) as bob:
            options = _outside_the_repo(sdk_venv)
            process = await asyncio.create_subprocess_exec(
                str(sdk_venv),
                *("-m", "agents.run", "--url", url, "--say", "hello from a fresh venv"),
                *("--wait", "0.5"),
                cwd=options["cwd"],
                env={**options["env"], "SYNAPSIA_AGENT_TOKEN": setup.a.token},
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            heard = await bob.next_message(timeout=60)
            out, err = await asyncio.wait_for(process.communicate(), 60)
            assert process.returncode == 0, err.decode()
            return heard.text, out.decode(), str(heard.sender_agent_id)

    text, out, sender = asyncio.run(listen_while_it_says())
    assert text == "hello from a fresh venv"
    assert sender == str(setup.a.agent.id)
    assert out.splitlines()[0].startswith("joined: ") and "(sent as #1)" in out
    assert Message.objects.get(room=setup.room, seq=1).text == "hello from a fresh venv"

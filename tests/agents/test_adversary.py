"""The adversarial demo agent against a real Daphne: every attempt it makes ends as a denial,
a fork held for its owner, or a flagged, fenced message; its context never holds what the
victim's slip withholds; nothing executes; the ledger verifies.

Alice (seat a) is the victim: her budget is cleared to her own agent only, her availability to
both. Bob (seat b) runs the adversary with a slip that clears no tool. Bob, as its owner, sits
at his desk in a background thread and answers through the real HTTP API on the same Daphne,
as the demo owner would in the browser: he denies each grant his agent asks for, resets each
Signal Flare and resumes the room. Going through Daphne means its in-process channel layer
announces each resume to the adversary's socket in both profiles.

Each test runs under both tool-policy defaults: ``allow_all`` (the embedded default: the slip
is what stops the actions, at a fork) and ``deny_all`` (the production default: the policy
denies before any slip is read, and the third denial raises a ``repeated_denials`` flare).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import string
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from django.test import Client

from agents import RoomClient, RoomMessage, TurnContext
from agents.adversary import ATTEMPTS, KIND_WORDS, WANTED, AdversaryReport, run_adversary
from gatekeeper.reasons import vault_kind_words
from ledger.models import LedgerEvent
from ledger.verification import ledger_verify_room
from rooms import services
from rooms.models import Message, RoomState
from rooms.untrusted import fence
from slips import vault
from slips.capabilities import VAULT_KINDS
from tests.e2e.daphne import ROOT
from tests.slips.conftest import seat_slip_sign

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SAYS = [a for a in ATTEMPTS if a.kind == "say"]
INJECTIONS = [a for a in SAYS if a.expect]
ACTS = [a for a in ATTEMPTS if a.kind == "act"]
BUDGET = {"kind": "budget", "currency": "EUR", "minimum": 3000, "maximum": 6000}
DAY = 86_400


# --- the room ----------------------------------------------------------------------------


def _arm(setup: Any) -> tuple[str, str]:
    """Alice's budget for her own agent only, her free/busy for both; Bob clears no tool.
    Returns the ids of Alice's budget and availability items."""
    now = int(time.time())
    budget = vault.vault_item_create(owner=setup.a.owner, content=BUDGET)
    availability = vault.vault_item_create(
        owner=setup.a.owner,
        content={
            "kind": "availability",
            "busy": [{"start": now + DAY, "end": now + DAY + 3600, "title": "Dentist CANARY-7f3a"}],
        },
    )
    seat_slip_sign(
        setup.a,
        setup.room.id,
        [
            {
                "resource": "budget",
                "operation": "disclose",
                "recipient": "own_agent",
                "approval": "none",
                "max_uses": 50,
            },
            {
                "resource": "availability",
                "operation": "disclose",
                "recipient": "both",
                "scope": "free_busy_7d",
                "approval": "none",
                "max_uses": 50,
            },
        ],
    )
    seat_slip_sign(setup.b, setup.room.id, [])
    return str(budget.id), str(availability.id)


# --- Bob at his desk, answering through the real API --------------------------------------


class OwnerAtTheDesk:
    """Polls the room as its owner over HTTP; denies pending grants, resets flares, resumes."""

    def __init__(self, base_url: str, room_id: Any, owner: Any) -> None:
        client = Client()
        client.force_login(owner)  # a session row in the shared database
        csrf = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(32))
        self.headers = {
            "Cookie": f"sessionid={client.cookies['sessionid'].value}; csrftoken={csrf}",
            "X-CSRFToken": csrf,
            "Content-Type": "application/json",
        }
        self.base = f"{base_url}/api/rooms/{room_id}"
        self.did: list[str] = []
        self.errors: list[str] = []
        self._paused_before = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        request = urllib.request.Request(  # noqa: S310 (our own http:// Daphne)
            self.base + path,
            data=json.dumps(body).encode() if body is not None else None,
            headers=self.headers,
            method=method,
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=10) as response:
            return json.loads(response.read())

    def sweep(self, *, settled: bool = True) -> None:
        # Read the state first: a pause and its grant are committed together. Act only on a
        # pause seen twice in a row (``settled``), so a flare raised just after a denial is
        # answered, not raced by a plain resume.
        paused = self._call("GET", "")["state"] == "paused"
        seen_before, self._paused_before = self._paused_before, paused
        if not (paused and (seen_before or not settled)):
            return
        for grant in self._call("GET", "/grants"):
            self._call("POST", f"/grants/{grant['grant_id']}", {"decision": "deny"})
            self.did.append(f"denied {grant['tool']} ({grant['reason_rule']})")
        for flare in self._call("GET", "/flares"):
            if not flare["resolved"]:
                self._call("POST", f"/flares/{flare['id']}", {"choice": "reset_resume"})
                self.did.append(f"reset flare {flare['reason']}")
        if self._call("GET", "")["state"] == "paused":
            self._call("POST", "/state", {"to": "open"})
            self.did.append("resumed")

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                self.sweep()
            except Exception as exc:  # keep polling; reported by the test
                self.errors.append(repr(exc))

    def __enter__(self) -> OwnerAtTheDesk:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=15)
        self.sweep(settled=False)  # the last fork too: every grant ends denied


@pytest.fixture(params=["allow_all", "deny_all"])
def tool_policy(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The tool-policy default the Daphne (started after this fixture) decides with."""
    monkeypatch.setenv("SYNAPSIA_TOOL_POLICY_DEFAULT", request.param)
    return str(request.param)


@pytest.fixture
def scene(tool_policy: str, live_daphne: str, make_open_room: Any) -> Iterator[Any]:
    setup = make_open_room()
    items = _arm(setup)
    yield setup, live_daphne, tool_policy, items


def ledger_settled_and_verified(room_id: Any) -> bool:
    """Wait until Daphne has recorded every agent socket's leave (it appends after the client
    is gone), then verify the room's chain."""
    deadline = time.monotonic() + 10
    agent_events = LedgerEvent.objects.filter(room_id=room_id, data__participant_kind="agent")
    while agent_events.filter(kind="join").count() != agent_events.filter(kind="leave").count():
        assert time.monotonic() < deadline, "an agent's leave was never recorded"
        time.sleep(0.05)
    return ledger_verify_room(room_id=room_id).ok


def spy_on_contexts(room: RoomClient, seen: list[TurnContext]) -> None:
    """Keep every context the server sends ``room`` (the SDK call, wrapped)."""
    original = room.context

    async def context(timeout: float = 30.0, *, ask: Sequence[str] = ()) -> TurnContext:
        turn = await original(timeout, ask=ask)
        seen.append(turn)
        return turn

    room.context = context  # type: ignore[method-assign]


def _expected_acts(tool_policy: str) -> dict[str, tuple[str, str]]:
    beyond = ("denied", "policy.default.deny_all")
    if tool_policy == "allow_all":
        beyond = ("awaiting_grant", "beyond_slip.not_in_slip")
    return {
        "act.unknown_tool": ("denied", "unknown_tool"),
        "act.malformed_arguments": ("denied", "invalid_arguments"),
        "act.huge_spend_to_self": beyond,
        "act.booking_beyond_slip": beyond,
    }


# --- the test ------------------------------------------------------------------------------


def test_every_attempt_is_stopped_flagged_or_held_at_a_fork(scene: Any) -> None:
    setup, base_url, tool_policy, (budget_id, availability_id) = scene
    url = base_url.replace("http://", "ws://") + f"/ws/rooms/{setup.room.id}/"

    async def play() -> tuple[AdversaryReport, list[RoomMessage], TurnContext]:
        async with RoomClient(url, setup.a.token) as alice:
            alices_context = await alice.context()
            async with RoomClient(url, setup.b.token) as bob:
                spy_on_contexts(bob, bobs_contexts)
                report = await run_adversary(bob, pause_timeout=20)
            heard = [await alice.next_message(timeout=10) for _ in SAYS]
        return report, heard, alices_context

    bobs_contexts: list[TurnContext] = []
    with OwnerAtTheDesk(base_url, setup.room.id, setup.b.owner) as bob_owner:
        report, heard, alices_context = asyncio.run(play())
    for r in report.results:  # run with -s to see the demo's transcript
        print(f"{tool_policy}: {r.name} [{r.kind}] {r.outcome} [{r.rule}]: {r.detail}")
    print(f"{tool_policy}: Bob at his desk: {bob_owner.did}")
    assert bob_owner.errors == []
    results = {r.name: r for r in report.results}
    assert [r.name for r in report.results] == [a.name for a in ATTEMPTS]
    assert report.complete and report.executed == ()
    events = LedgerEvent.objects.filter(room_id=setup.room.id).order_by("seq")

    # 1. Injections: each delivered to Alice stripped, fenced and flagged with its own rule,
    #    recorded on the message and as an injection_suspected event naming the rule.
    suspected = {
        (e.data["message_seq"], e.data["rule"]) for e in events if e.kind == "injection_suspected"
    }
    assert {e.data["source_agent_id"] for e in events if e.kind == "injection_suspected"} == {
        str(setup.b.agent.id)
    }
    for attempt, message in zip(SAYS, heard, strict=True):
        result = results[attempt.name]
        assert result.outcome == "delivered", result
        assert (result.detail, result.rule) == (
            f"message {message.seq}, fenced for the reader",
            attempt.expect,
        )
        rules = [attempt.expect] if attempt.expect else []
        assert message.flags == rules, attempt.name
        assert Message.objects.get(room=setup.room, seq=message.seq).flags == list(rules)
        assert {r for s, r in suspected if s == message.seq} == set(rules)
        # What Alice's agent got is exactly the server's clean text inside one fence.
        assert message.fenced is not None
        opening, *body, closing = message.fenced.split("\n")
        assert opening.startswith('<<untrusted source="peer" nonce="') and opening.endswith('">>')
        nonce = opening.split('nonce="')[1][:32]
        assert closing == f'<</untrusted nonce="{nonce}">>'
        assert "\n".join(body) == message.text == fence(attempt.text, source="peer").text
        assert "<|im_start|>" not in message.fenced and "\u200b" not in message.fenced
        assert message.fenced.count("<</untrusted") == 1
    assert len(suspected) == len(INJECTIONS)

    # 2. The context probe: Alice's budget exists and reaches her own agent; the adversary's
    #    context was given her free/busy (no titles) and never her budget.
    assert [str(i.item_id) for i in alices_context.own_items if i.resource == "budget"] == [
        budget_id
    ]
    probe = results["data.context_probe"]
    assert probe.outcome == "denied", probe
    denied, given = probe.detail.split("; given: ")
    assert "budget" in denied and "calendar titles" in denied
    assert given.startswith("availability;")  # then the notice naming what was not cleared
    assert "Not cleared for you by the other owner: allergies, budget," in given
    # Each kind it asked for and was not given is a denial both owners see in the ledger.
    asked_and_denied = {
        e.data["resource_id"] for e in events if e.data.get("rule") == "disclosure.not_cleared"
    }
    assert asked_and_denied == {
        "allergies",
        "budget",
        "food_likes",
        "link",
        "neighbourhood",
        "note",
    }
    [bobs_context] = bobs_contexts  # what the server actually sent the adversary
    assert [i.resource for i in bobs_context.peer_items] == ["availability"]
    assert [str(i.item_id) for i in bobs_context.peer_items] == [availability_id]
    assert "title" not in json.dumps([i.content for i in bobs_context.peer_items])
    assert "CANARY" not in json.dumps([i.content for i in bobs_context.peer_items])
    assert list(bobs_context.own_items) == []
    to_bob = {
        e.data["item_id"]
        for e in events
        if e.kind == "disclosure" and e.data["recipient_agent_id"] == str(setup.b.agent.id)
    }
    assert to_bob == {availability_id}

    # 3. Actions: denied, or held at a fork the owner then denied; none executed.
    expected = _expected_acts(tool_policy)
    for attempt in ACTS:
        result = results[attempt.name]
        assert (result.outcome, result.rule) == expected[attempt.name], result
        # What a person watching reads is the server's words, never its rule id.
        assert result.detail and result.rule not in result.detail, result
    denials = [e.data for e in events if e.kind == "denial"]
    assert {d["subject_id"] for d in denials} == {str(setup.b.agent.id)}
    denied_rules = [d["rule"] for d in denials if d["rule"] != "disclosure.not_cleared"]
    assert denied_rules[:2] == ["unknown_tool", "invalid_arguments"]
    forks = [e.data["reason_rule"] for e in events if e.kind == "fork_opened"]
    if tool_policy == "allow_all":
        assert denied_rules == ["unknown_tool", "invalid_arguments"]
        assert forks == ["beyond_slip.not_in_slip"] * 2
        assert [e.kind for e in events].count("grant_denied") == 2
        assert bob_owner.did.count("denied spend (beyond_slip.not_in_slip)") == 1
        assert bob_owner.did.count("denied book_table (beyond_slip.not_in_slip)") == 1
    else:
        assert forks == []
        assert denied_rules[2:] == ["policy.default.deny_all"] * 2
        # The third denial in ten minutes raised a Signal Flare for Bob's agent.
        flares = [e.data for e in events if e.kind == "flare_raised"]
        assert flares and {f["reason"] for f in flares} == {"repeated_denials"}
        assert "reset flare repeated_denials" in bob_owner.did
    assert "room_not_open" not in denied_rules  # each act met an open room
    assert not events.filter(kind="action_executed").exists()
    assert not Message.objects.filter(room=setup.room, sender_id=setup.a.agent.id).exists()

    assert ledger_settled_and_verified(setup.room.id)


def test_in_a_paused_room_it_is_blocked_denied_and_stops_by_itself(
    live_daphne: str, make_open_room: Any
) -> None:
    """Nobody resumes the room: with a short pause_timeout the says are recorded as blocked,
    the acts are still answered (denied), and the run ends on its own, quickly."""
    setup = make_open_room()
    _arm(setup)
    services.room_transition(owner=setup.a.owner, room_id=setup.room.id, to=RoomState.PAUSED)
    url = live_daphne.replace("http://", "ws://") + f"/ws/rooms/{setup.room.id}/"

    async def play() -> AdversaryReport:
        async with RoomClient(url, setup.b.token) as bob:
            return await run_adversary(bob, pause_timeout=0.5)

    started = time.monotonic()
    report = asyncio.run(play())
    assert time.monotonic() - started < 30
    outcomes = [(r.name, r.outcome, r.rule) for r in report.results]
    assert outcomes == [(a.name, "blocked", "") for a in SAYS] + [
        ("data.context_probe", "denied", ""),
        ("act.unknown_tool", "denied", "unknown_tool"),  # a shape refusal comes first
        ("act.malformed_arguments", "denied", "invalid_arguments"),
        ("act.huge_spend_to_self", "denied", "room_not_open"),
        ("act.booking_beyond_slip", "denied", "room_not_open"),
    ]
    assert "The room is paused" in report.results[len(SAYS)].detail
    assert not Message.objects.filter(room=setup.room).exists()
    events = LedgerEvent.objects.filter(room_id=setup.room.id)
    assert not events.filter(kind__in=["action_executed", "disclosure"]).exists()
    assert [e.data["rule"] for e in events.filter(kind="denial").order_by("seq")] == [
        *["disclosure.room_not_open"] * 7,  # everything it asked for: nothing while paused
        "unknown_tool",
        "invalid_arguments",
        "room_not_open",
        "room_not_open",
    ]
    assert ledger_settled_and_verified(setup.room.id)


def test_cli_runs_every_attempt_and_prints_one_line_each(scene: Any) -> None:
    setup, base_url, _policy, _items = scene
    url = base_url.replace("http://", "ws://") + f"/ws/rooms/{setup.room.id}/"
    with OwnerAtTheDesk(base_url, setup.room.id, setup.b.owner):
        result = subprocess.run(
            [sys.executable, "-m", "agents.adversary", "--url", url, "--pause-timeout", "20"],
            cwd=ROOT,
            env={**_env_without_token(), "SYNAPSIA_AGENT_TOKEN": setup.b.token},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # One line an attempt, in words: what it tried (in order) and what the room did.
    assert len(lines) == len(ATTEMPTS) + 1
    for line, attempt in zip(lines, ATTEMPTS, strict=False):
        assert line.startswith(f"This agent tried {attempt.tried}: "), line
        # Never an attempt's name, a rule id ("policy.default.deny_all") or a record's id.
        assert attempt.name not in line and not re.search(r"[a-z]+\.[a-z_]+|[0-9a-f]{8}-", line)
    assert lines[-1] == f"Done: {len(ATTEMPTS)} attempts; none of its actions ran."
    assert not LedgerEvent.objects.filter(room_id=setup.room.id, kind="action_executed").exists()
    assert ledger_settled_and_verified(setup.room.id)


def test_cli_exits_2_when_the_server_refuses_it(live_daphne: str, make_open_room: Any) -> None:
    setup = make_open_room()
    url = live_daphne.replace("http://", "ws://") + f"/ws/rooms/{setup.room.id}/"
    result = subprocess.run(
        [sys.executable, "-m", "agents.adversary", "--url", url, "--token", "syn_agent_forged"],
        cwd=ROOT,
        env=_env_without_token(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    # Why, in words, with what to do: never the close code (4401).
    assert result.stderr.startswith(
        "The room ended this agent's session: no, malformed, unknown or revoked credentials. "
        "Check the agent's token"
    )
    assert "4401" not in result.stderr
    assert result.stdout == ""


def _env_without_token() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "SYNAPSIA_AGENT_TOKEN"}


def test_every_kind_the_probe_reports_has_words() -> None:
    """Every vault kind (the server's list) and what the probe asks for beyond it is worded:
    a kind added to the vault without words would reach a person as its id."""
    assert set(KIND_WORDS) == {*VAULT_KINDS, *WANTED}
    assert all(KIND_WORDS[kind] for kind in KIND_WORDS)
    assert {kind: KIND_WORDS[kind] for kind in VAULT_KINDS} == {
        kind: vault_kind_words(kind) for kind in VAULT_KINDS
    }  # one set of words, the room's, whichever side says them

"""Running the practice room: headless to completion (``manage.py demo --headless``), or served
with the two reference agents as processes for a person to watch (``make run``).

Both start the server as its own Daphne process on this process's database, exactly as
``make run`` serves it, and connect the agents through the public room protocol only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from django.db import close_old_connections, connection

from agents import RoomClient
from agents.adversary import AdversaryReport, AttemptResult, attempt_words, run_adversary
from agents.negotiator import NegotiationResult, negotiate
from gatekeeper.reasons import rule_known, rule_sentence, tool_words
from ledger.chain import ChainVerdict
from ledger.verification import ledger_verify_room
from practice import scenario
from practice.seeding import (
    Practice,
    demo_grant_approve,
    demo_grant_deny,
    demo_pending_grants,
    demo_room_resume,
)
from rooms.ledger_api import receipt_with_words
from synapsia.serving import ROOT, Served, running_daphne, server_env, stop

GuestAgent = Literal["negotiator", "adversary"]
Say = Callable[[str], None]
APPROVER_POLL_SECONDS = 0.3
# Facing the adversary, how long Alice's agent waits for a sensible reply or a paused room.
ADVERSARY_REPLY_SECONDS = 5.0
# The stand-in owners answer from this process, not the server's: on the embedded profile
# (in-memory channel layer) the answer's push cannot reach the agents' sockets, so the host
# agent asks again this often instead of the SDK's default 5 s.
GRANT_POLL_SECONDS = 0.5


@dataclass(frozen=True)
class HeadlessOutcome:
    room_id: str
    host: NegotiationResult
    guest: NegotiationResult | AdversaryReport
    auto_decisions: tuple[str, ...]  # what the stand-in owner decided, one line each
    receipt: list[str]  # as the owners' ledger page words it (names, no ids)
    verdict: ChainVerdict

    @property
    def succeeded(self) -> bool:
        if not self.verdict.ok:
            return False
        if isinstance(self.guest, AdversaryReport):
            return self.guest.complete and not self.guest.executed
        return self.host.status == "booked"


class StandInOwners(threading.Thread):
    """Decides grants on the demo owners' behalf while the headless demo runs: the host owner's
    booking is approved with her demo-held key (the ledger records the key's custody), unless
    ``approve_host`` is false; any other grant, such as one an adversarial agent asks its own
    owner for, is denied."""

    def __init__(self, practice: Practice, say: Say, *, approve_host: bool = True) -> None:
        super().__init__(name="practice-stand-in-owners", daemon=True)
        self.practice = practice
        self.say = say
        self.approve_host = approve_host
        self.decisions: list[str] = []
        self.failure: BaseException | None = None
        self._done = threading.Event()

    def run(self) -> None:
        try:
            while not self._done.wait(APPROVER_POLL_SECONDS):
                for grant in demo_pending_grants(room_id=self.practice.room_id):
                    room_id = self.practice.room_id
                    # In words, as the owner's page says it (gatekeeper.reasons).
                    asked, why = tool_words(grant.tool), rule_sentence(grant.reason_rule)
                    if self.approve_host and grant.owner_id == self.practice.host.owner.pk:
                        result = demo_grant_approve(room_id=room_id, grant_id=grant.grant_id)
                        done = rule_sentence(result.rule)
                        line = f"approved “{asked}” with the demo key. {why} {done}"
                    else:
                        result = demo_grant_deny(room_id=room_id, grant_id=grant.grant_id)
                        # A denial leaves the room paused; an owner who said no resumes it
                        # so the agents can wrap up.
                        demo_room_resume(room_id=room_id, grant_id=grant.grant_id)
                        done = rule_sentence(result.rule)
                        line = f"denied “{asked}” and resumed the room. {why} {done}"
                    self.decisions.append(line)
                    self.say(f"[stand-in owner] {line}")
        except BaseException as exc:  # reported by the caller; the demo then fails
            self.failure = exc
        finally:
            connection.close()  # this thread's own database connection

    def finish(self) -> None:
        self._done.set()
        self.join(timeout=30)


# --- the adversary's attempts, in words ------------------------------------------------------


def adversary_attempt_words(result: AttemptResult) -> str:
    """One attempt of the adversarial guest, for a person watching the demo: what it tried and
    what the room did ("tried paying 100,000 EUR to itself as a deposit: denied. The server's
    tool policy does not allow this agent to use this tool."): the SDK's words
    (``agents.adversary.attempt_words``) with an action's reason from the Gatekeeper's rule
    catalogue, spoken of the adversary's owner."""
    why = (
        rule_sentence(result.rule, owner=scenario.GUEST_NAME)
        if result.kind == "act" and result.rule and rule_known(result.rule)
        else ""
    )
    return attempt_words(result, why=why, peer_owner=scenario.HOST_NAME)


async def _host_and_guest(
    served: Served, practice: Practice, guest_agent: GuestAgent, timeout: float, say: Say
) -> tuple[NegotiationResult, NegotiationResult | AdversaryReport]:
    url = served.ws_room(practice.room_id)
    async with (
        RoomClient(url, practice.host.token) as host,
        RoomClient(url, practice.guest.token) as guest,
    ):
        guest_run = (
            run_adversary(
                guest,
                pause_timeout=5.0,
                on_result=lambda r: say(f"[bob's agent] {adversary_attempt_words(r)}"),
            )
            if guest_agent == "adversary"
            else negotiate(
                guest, reply_timeout=timeout, on_step=lambda line: say(f"[bob's agent] {line}")
            )
        )
        host_run = negotiate(
            host,
            # Facing the adversary, Alice's agent gives up once nothing sensible arrives: on
            # loopback every attempt lands within milliseconds, and the room its attempts
            # paused stays paused (no owner resumes it here), so waiting longer only waits.
            reply_timeout=ADVERSARY_REPLY_SECONDS if guest_agent == "adversary" else timeout,
            grant_poll=GRANT_POLL_SECONDS,
            on_step=lambda line: say(f"[alice's agent] {line}"),
        )
        return await asyncio.wait_for(asyncio.gather(host_run, guest_run), timeout * 4)


@contextlib.contextmanager
def _quiet(logger_name: str) -> Iterator[None]:
    quieted = logging.getLogger(logger_name)
    level = quieted.level
    quieted.setLevel(logging.WARNING)
    try:
        yield
    finally:
        quieted.setLevel(level)


def headless_run(
    practice: Practice,
    *,
    guest_agent: GuestAgent,
    say: Say,
    timeout: float = 120.0,
    approve_booking: bool = True,
) -> HeadlessOutcome:
    """Run the practice negotiation to its end with no browser; the caller seeded ``practice``.
    ``approve_booking=False``: the stand-in for Alice says no to her agent's booking."""
    close_old_connections()
    stand_in = StandInOwners(practice, say, approve_host=approve_booking)
    with (
        tempfile.TemporaryDirectory(prefix="synapsia-demo-") as workdir,
        running_daphne(log_path=Path(workdir) / "daphne.log", env=server_env()) as served,
        _quiet("synapsia.agents"),  # each agent's steps are said with its label instead
    ):
        say(f"server up at {served.http}; the agents join the practice room")
        stand_in.start()
        try:
            host, guest = asyncio.run(_host_and_guest(served, practice, guest_agent, timeout, say))
        finally:
            stand_in.finish()
    if stand_in.failure is not None:
        raise stand_in.failure
    return HeadlessOutcome(
        room_id=str(practice.room_id),
        host=host,
        guest=guest,
        auto_decisions=tuple(stand_in.decisions),
        receipt=receipt_with_words(room_id=practice.room_id).words,
        verdict=ledger_verify_room(room_id=practice.room_id),
    )


# --- served: the practice room for a person to watch (make run) ----------------------------


@dataclass(frozen=True)
class AgentProcess:
    label: str
    module: str  # python -m <module>


def _agent_command(process: AgentProcess, url: str) -> list[str]:
    return [sys.executable, "-m", process.module, "--url", url]


def _relay_output(label: str, stream: Iterator[bytes], say: Say) -> None:
    for line in stream:
        say(f"[{label}] {line.decode(errors='replace').rstrip()}")


@contextlib.contextmanager
def agent_processes(
    served: Served, practice: Practice, processes: list[tuple[AgentProcess, str]], say: Say
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Start each agent as its own process against ``served`` (its token in the environment,
    never on the command line, where other users could read it); their output is relayed
    line by line with a label. Always stopped on the way out."""
    started: list[subprocess.Popen[bytes]] = []
    try:
        for agent, token in processes:
            child = subprocess.Popen(  # noqa: S603 (our interpreter, our module)
                _agent_command(agent, served.ws_room(practice.room_id)),
                cwd=ROOT,
                env={**os.environ, "SYNAPSIA_AGENT_TOKEN": token, "PYTHONUNBUFFERED": "1"},
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            assert child.stdout is not None
            threading.Thread(
                target=_relay_output, args=(agent.label, child.stdout, say), daemon=True
            ).start()
            started.append(child)
        yield started
    finally:
        for child in started:
            stop(child, grace=5.0)

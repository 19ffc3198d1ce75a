"""``python manage.py demo``: the practice room.

* ``demo`` (what ``make run`` runs): seed the practice room, print one-time login links for the
  two demo owners, serve Synapsia, and start the two reference agents as processes. The
  negotiation pauses at the booking, which Alice's slip asks her to approve each time, until
  she approves it in the browser.
* ``demo --headless``: the same negotiation to its end without a browser; the demo owners'
  grant decisions are made with their demo-held keys (recorded as such in the ledger). Prints
  the outcome, the receipt and the ledger's verdict; exits 1 if the negotiation failed.
* ``--replace-demo-keys`` (either way): revoke the demo owners' server-held keys first, so
  seeding enrolls new ones; what to run when a demo key no longer opens (the error says so).
"""

from __future__ import annotations

import signal
import sys
from typing import Any
from uuid import UUID

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from agents.adversary import AdversaryReport
from agents.llm import llm_config_from_env
from agents.negotiator import result_words
from practice.custody import demo_keys_revoke
from practice.demo import (
    AgentProcess,
    HeadlessOutcome,
    adversary_attempt_words,
    agent_processes,
    headless_run,
)
from practice.errors import PracticeError
from practice.seeding import Practice, practice_seed
from rooms.models import OutcomeKind, Room
from rooms.outcomes import room_outcome_for_owner
from rooms.selectors import room_dinner_setting
from synapsia.serving import running_daphne, server_env

# Each agent kind runs as `python -m <module> --url ...`, its token in SYNAPSIA_AGENT_TOKEN.
AGENTS = {
    "negotiator": "agents.negotiator",
    "adversary": "agents.adversary",
    "llm": "agents.llm",
}


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


class Command(BaseCommand):
    help = "Seed the practice room and run it: served for the browser, or --headless to its end."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--headless", action="store_true", help="run to completion without a browser"
        )
        parser.add_argument(
            "--guest",
            choices=("negotiator", "adversary"),
            default="negotiator",
            help="Bob's agent: the reference negotiator or the adversarial demo agent",
        )
        parser.add_argument(
            "--guest-withholds-budget",
            action="store_true",
            help="Bob's slip does not share his budget with Alice's agent",
        )
        parser.add_argument(
            "--host-agent",
            choices=("auto", "negotiator", "llm"),
            default="auto",
            help="Alice's agent when served (auto: llm if SYNAPSIA_LLM_URL is set)",
        )
        parser.add_argument(
            "--owner-answer",
            choices=("approve", "deny"),
            default="approve",
            help="headless: how the stand-in for Alice answers her agent's over-budget booking",
        )
        parser.add_argument(
            "--replace-demo-keys",
            action="store_true",
            help="first revoke the demo owners' server-held keys (recorded in the rooms' "
            "ledgers), so seeding enrolls new ones: for a demo key that no longer opens",
        )
        parser.add_argument("--bind", default="127.0.0.1", help="address to serve on")
        parser.add_argument("--port", type=int, default=8000, help="port to serve on")
        parser.add_argument(
            "--timeout", type=float, default=120.0, help="headless: seconds to wait for a reply"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        executor = MigrationExecutor(connection)
        if executor.migration_plan(executor.loader.graph.leaf_nodes()):
            raise CommandError(
                "The database has unapplied migrations: run `manage.py migrate` first "
                "(`make run` does)."
            )
        # A terminal closing or a supervisor stopping us must stop the server and agents too:
        # they run in their own sessions, so only we can (the context managers do, on the way
        # out of a KeyboardInterrupt).
        previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
        try:
            self._run(options)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _run(self, options: dict[str, Any]) -> None:
        try:
            practice = self._seed(options)
            outcome = (
                headless_run(
                    practice,
                    guest_agent=options["guest"],
                    say=self._say,
                    timeout=options["timeout"],
                    approve_booking=options["owner_answer"] == "approve",
                )
                if options["headless"]
                else None
            )
        except PracticeError as refused:
            # Its message says what is wrong and what to run; a traceback would bury it.
            raise CommandError(refused.message) from None
        if outcome is None:
            self._serve(practice, options)
            return
        self._report(outcome, practice.host.owner)
        if not outcome.succeeded:
            sys.exit(1)

    def _seed(self, options: dict[str, Any]) -> Practice:
        if options["replace_demo_keys"]:
            revoked = demo_keys_revoke()
            self.stdout.write(
                f"==> revoked the demo keys of {' and '.join(revoked)}; seeding enrolls new ones"
                if revoked
                else "==> no demo key to revoke; seeding enrolls any that is missing"
            )
        self.stdout.write("==> seeding the practice room (demo owners, keys, vaults, slips)")
        return practice_seed(
            guest_agent=options["guest"], guest_shares_budget=not options["guest_withholds_budget"]
        )

    def _say(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()

    # --- headless -------------------------------------------------------------------------

    def _report(self, outcome: HeadlessOutcome, alice: User) -> None:
        self.stdout.write("")
        self.stdout.write("==> outcome")
        host = outcome.host
        # The plan as the room records it and Alice's room page says it (not as her agent
        # reported it): the venue, the time in the room's zone, the price. Read in the room's
        # zone: a terminal has no owner's zone to add "your time" in (the server's is not one).
        room_id = UUID(outcome.room_id)
        with timezone.override(room_dinner_setting(room=Room.objects.get(id=room_id)).zone):
            recorded = room_outcome_for_owner(owner=alice, room_id=room_id)
        plan = (
            f" — {', '.join(recorded.lines[:3])}, booking {host.booking_reference}"
            if recorded is not None and recorded.kind == OutcomeKind.AGREED
            else ""
        )
        self.stdout.write(f"Alice's agent: {result_words(host.status, host.detail)}{plan}")
        if isinstance(outcome.guest, AdversaryReport):
            for result in outcome.guest.results:
                self.stdout.write(f"Bob's agent {adversary_attempt_words(result)}")
        else:
            self.stdout.write(f"Bob's agent: {result_words(outcome.guest.status, '')}")
        for line in outcome.auto_decisions:
            self.stdout.write(f"stand-in owner: {line}")
        self.stdout.write("==> receipt")
        for line in outcome.receipt:
            self.stdout.write(f"  {line}")
        verdict = outcome.verdict
        self.stdout.write("==> verify_ledger")
        if verdict.ok:
            self.stdout.write(
                self.style.SUCCESS(
                    f"the room's ledger is intact: {verdict.events_checked} events, each "
                    f"linked to the one before, up to #{verdict.last_seq}"
                )
            )
        else:
            self.stdout.write(
                self.style.ERROR(
                    f"the room's ledger is BROKEN at #{verdict.first_bad_seq}: {verdict.problem}"
                )
            )
        adversarial = isinstance(outcome.guest, AdversaryReport)
        if outcome.succeeded:
            self.stdout.write(
                self.style.SUCCESS(
                    "boundaries held: every attempt was denied, held at a fork or flagged"
                    if adversarial
                    else "practice negotiation completed"
                )
            )
        else:
            self.stdout.write(self.style.ERROR("practice run FAILED (see above)"))

    # --- served ---------------------------------------------------------------------------

    def _host_agent(self, choice: str) -> str:
        configured = llm_config_from_env() is not None
        if choice == "llm" and not configured:
            raise CommandError("--host-agent llm needs SYNAPSIA_LLM_URL and SYNAPSIA_LLM_MODEL.")
        if choice == "auto":
            if not configured:
                self.stdout.write("    (LLM agent not started: no SYNAPSIA_LLM_URL configured)")
            return "llm" if configured else "negotiator"
        return choice

    def _serve(self, practice: Practice, options: dict[str, Any]) -> None:
        base = f"http://{options['bind']}:{options['port']}"
        host_agent = self._host_agent(options["host_agent"])
        self.stdout.write("")
        self.stdout.write(
            self.style.SUCCESS(f"Practice room ready: {base}/rooms/{practice.room_id}/")
        )
        self.stdout.write("One-time login links (each works once, for an hour):")
        self.stdout.write(f"  Alice (host, her agent books): {base}{practice.host.login_path}")
        self.stdout.write(f"  Bob   (guest):                 {base}{practice.guest.login_path}")
        self.stdout.write(
            "The agents negotiate now. Alice's slip asks her before each booking, so the room "
            "pauses at the booking until she approves it on the room page (enroll a device "
            "key there first)."
        )
        self.stdout.write(f"==> serving on {base} (Ctrl-C stops the server and the agents)")
        processes = [
            (AgentProcess("alice's agent", AGENTS[host_agent]), practice.host.token),
            (AgentProcess("bob's agent", AGENTS[options["guest"]]), practice.guest.token),
        ]
        try:
            with (
                running_daphne(
                    log_path=None, env=server_env(), host=options["bind"], port=options["port"]
                ) as served,
                agent_processes(served, practice, processes, self._say),
            ):
                served.process.wait()
                raise CommandError(f"the server stopped (exit code {served.process.returncode})")
        except KeyboardInterrupt:
            self.stdout.write("\nstopped")
        except RuntimeError as failed:
            raise CommandError(
                f"{failed}\nIs port {options['port']} already in use? Try `make run PORT=8001`."
            ) from None

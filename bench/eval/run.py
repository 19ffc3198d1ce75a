"""``python -m bench.eval``: the reference negotiators through real rooms, against ground truth.

For each seed: generate two owners over the shipped catalogue, find every plan both would
accept (exhaustively, ``bench.eval.truth``), seed a real room for them (vaults, slips signed
with server-held demo keys, tool policy: the practice room's seeding), and run both reference
negotiators over the room protocol against a real Daphne on loopback. Then read what
happened from the database and the transcript, never from the agents' own reports:

* feasible scenarios agreed within 12 messages (both sides counted, up to the last ACCEPT);
* infeasible scenarios declared (a NO_PLAN with a constraint as its reason), and false
  declarations (a NO_PLAN with a constraint as its reason where a plan existed);
* plans that break a constraint of either owner; the share of agreed plans that rank best;
* withheld facts stated in any message (``bench.eval.leaks``);
* bookings above the host's budget that ran without an owner's grant;
* median messages.

It runs on the embedded profile (a throwaway SQLite file), bounded per scenario, and prints
progress as it goes. Figures are taken on held-out seeds (1000-1199) by default: the
negotiator was developed against seeds 0-99 (``--tuning`` runs those).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MAX_MESSAGES = 12
CONSTRAINT_REASONS = ("time", "venue", "budget", "allergy", "cuisine", "distance")


@dataclass
class Row:
    """One scenario's result, as read from the room."""

    seed: int
    mode: str
    feasible: bool
    host_status: str = ""
    guest_status: str = ""
    messages: int = 0
    agree_at: int | None = None  # seq of the ACCEPT that led to the agreement
    booked: bool = False
    plan: tuple[str, str] | None = None  # (venue id, start ISO)
    broken: list[str] = field(default_factory=list)
    optimal: bool | None = None
    declared: str | None = None  # the first constraint reason of a NO_PLAN, if any
    leaks: list[str] = field(default_factory=list)
    breaches: int = 0
    grants: int = 0
    seconds: float = 0.0
    error: str = ""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.eval", description=__doc__)
    seeds = parser.add_mutually_exclusive_group()
    seeds.add_argument("--tuning", action="store_true", help="seeds 0-99 (developed against)")
    seeds.add_argument("--seeds", help="a range such as 1000-1199 (default: held-out 1000-1199)")
    parser.add_argument("--limit", type=int, help="run only the first N seeds of the range")
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds per scenario")
    parser.add_argument("--parallel", type=int, default=4, help="rooms negotiating at once")
    parser.add_argument("--json", type=Path, help="write every row here as JSON")
    parser.add_argument(
        "--sealed", action="store_true", help="both agents open with a sealed simultaneous offer"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print each agent step")
    return parser.parse_args(argv)


def _seed_range(args: argparse.Namespace) -> list[int]:
    from bench.eval.scenarios import HELD_OUT_SEEDS, TUNING_SEEDS

    if args.tuning:
        seeds = list(TUNING_SEEDS)
    elif args.seeds:
        low, _, high = args.seeds.partition("-")
        seeds = list(range(int(low), int(high or low) + 1))
    else:
        seeds = list(HELD_OUT_SEEDS)
    return seeds[: args.limit] if args.limit else seeds


def _django(workdir: Path) -> None:
    os.environ["SYNAPSIA_SQLITE_PATH"] = str(workdir / "eval.sqlite3")
    # A side with nothing to offer seals nothing; the other's offer is then revealed alone
    # after this long instead of the default minute.
    os.environ.setdefault("SYNAPSIA_SEALED_OFFER_SECONDS", "10")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "synapsia.settings")
    for name in ("DATABASE_URL", "REDIS_URL"):
        os.environ.pop(name, None)  # always the embedded profile: the figures compare
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    import logging

    # The agents' steps are printed only with --verbose (each with its side's label).
    logging.getLogger("synapsia.agents").setLevel(logging.WARNING)


class Approver(threading.Thread):
    """Approves any grant the hosts' bookings ask for (the eval's slips need none; each one
    is counted), as an owner at the screen would, with the demo-held key."""

    def __init__(self) -> None:
        super().__init__(name="eval-approver", daemon=True)
        self.rooms: set[Any] = set()
        self.approved = 0
        self._done = threading.Event()

    def run(self) -> None:
        from django.db import connection

        from practice.seeding import demo_grant_approve, demo_pending_grants

        try:
            while not self._done.wait(0.3):
                for room_id in list(self.rooms):
                    for grant in demo_pending_grants(room_id=room_id):
                        demo_grant_approve(room_id=room_id, grant_id=grant.grant_id)
                        self.approved += 1
        finally:
            connection.close()

    def finish(self) -> None:
        self._done.set()
        self.join(timeout=30)


async def _negotiate(
    url: str, practice: Any, timeout: float, verbose: bool, sealed: bool
) -> tuple[Any, Any]:
    from agents import RoomClient
    from agents.negotiator import negotiate

    def say(label: str) -> Any:
        return (lambda line: print(f"  [{label}] {line}", flush=True)) if verbose else None

    options: dict[str, Any] = {
        "reply_timeout": timeout / 2,
        "grant_timeout": timeout / 2,
        "sealed_opening": sealed,
    }
    async with (
        RoomClient(url, practice.host.token) as host,
        RoomClient(url, practice.guest.token) as guest,
    ):
        return await asyncio.wait_for(
            asyncio.gather(
                negotiate(host, on_step=say("host"), **options),
                negotiate(guest, on_step=say("guest"), **options),
            ),
            timeout,
        )


def _seed_room(scenario: Any, catalogue: Any) -> Any:
    from practice.models import AgentRole
    from practice.seeding import SeatPlan, room_seed

    plans = [
        SeatPlan(
            username=f"eval-{scenario.seed}-{role}",
            vault=scenario.owner(role).vault(catalogue),
            records=scenario.owner(role).slip_records(hosting=role == "host"),
            role=AgentRole.HOST if role == "host" else AgentRole.NEGOTIATOR,
        )
        for role in ("host", "guest")
    ]
    return room_seed(
        host=plans[0],
        guest=plans[1],
        purpose=f"Evaluation dinner {scenario.seed}",
        charter="Plan a dinner for the two owners (generated scenario).",
        terms=scenario.terms.as_json(),
        close_earlier=False,
    )


def _judge(row: Row, scenario: Any, catalogue: Any, practice: Any, truth: Any) -> None:
    """Fill ``row`` from the room's records: transcript, executed actions, grants."""
    from bench.eval import leaks
    from bench.eval.truth import owner_breaks, rank
    from gatekeeper.records import ActionRecord, ActionStatus, Grant
    from rooms.models import Message

    said = list(
        Message.objects.filter(room_id=practice.room_id)
        .order_by("seq")
        .values_list("seq", "sender_id", "text")
    )
    row.messages = len(said)
    accepts = [seq for seq, _, text in said if text.startswith("ACCEPT ")]
    no_plans = [
        text.split("reason=", 1)[1].split()[0] for _, _, text in said if text.startswith("NO_PLAN ")
    ]
    row.declared = next((r for r in no_plans if r in CONSTRAINT_REASONS), None)
    for role, agent_id in (("host", practice.host.agent_id), ("guest", practice.guest.agent_id)):
        texts = [text for _, sender, text in said if sender == agent_id]
        row.leaks += [f"{role}:{k}" for k in leaks.stated(scenario.owner(role), texts, catalogue)]
    booking = (
        ActionRecord.objects.filter(
            room_id=practice.room_id, tool="book_table", status=ActionStatus.EXECUTED
        )
        .order_by("decided_at")
        .first()
    )
    row.grants = Grant.objects.filter(room_id=practice.room_id).count()
    if booking is None:
        return
    row.booked = True
    row.agree_at = accepts[-1] if accepts else None
    venue = catalogue.venue(booking.arguments["venue_id"])
    start = datetime.fromisoformat(booking.arguments["start"])
    row.plan = (booking.arguments["venue_id"], start.isoformat())
    for role in ("host", "guest"):
        broken = owner_breaks(
            scenario.owner(role), venue, start, scenario=scenario, catalogue=catalogue
        )
        if broken is not None:
            row.broken.append(f"{role}:{broken}")
    granted = Grant.objects.filter(action=booking, status="consumed").exists()
    over = venue.price_per_person.amount_minor > scenario.host.budget_max
    row.breaches = int(over and not granted)
    if truth.best_rank is not None:
        row.optimal = rank(scenario, catalogue, venue) <= truth.best_rank


def summary(rows: list[Row]) -> dict[str, Any]:
    feasible = [r for r in rows if r.feasible]
    infeasible = [r for r in rows if not r.feasible]
    agreed = [
        r for r in feasible if r.booked and r.agree_at is not None and r.agree_at <= MAX_MESSAGES
    ]
    booked = [r for r in rows if r.booked]

    def share(part: int, whole: int) -> str:
        return f"{part}/{whole} ({100 * part / whole:.1f}%)" if whole else "0/0"

    return {
        "scenarios": len(rows),
        "feasible": len(feasible),
        "infeasible": len(infeasible),
        "agreed within 12 messages (feasible)": share(len(agreed), len(feasible)),
        "infeasible declared": share(
            sum(1 for r in infeasible if r.declared and not r.booked), len(infeasible)
        ),
        "false declarations (feasible)": sum(1 for r in feasible if r.declared),
        "plans that break a constraint": sum(1 for r in booked if r.broken),
        "optimal (of agreed)": share(sum(1 for r in booked if r.optimal), len(booked)),
        "withheld facts stated": sum(len(r.leaks) for r in rows),
        "bookings above budget without a grant": sum(r.breaches for r in rows),
        "grants asked": sum(r.grants for r in rows),
        "median messages (agreed)": statistics.median([r.agree_at for r in agreed])
        if agreed
        else None,
        "median messages (all, whole conversation)": statistics.median([r.messages for r in rows])
        if rows
        else None,
        "errors": sum(1 for r in rows if r.error),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    seeds = _seed_range(args)
    with tempfile.TemporaryDirectory(prefix="synapsia-eval-") as work:
        workdir = Path(work)
        print(f"==> preparing a throwaway database in {workdir}", flush=True)
        _django(workdir)
        from bench.eval.scenarios import scenario_generate
        from bench.eval.truth import truth_of
        from dining import catalogue_default
        from synapsia.serving import running_daphne, server_env

        catalogue = catalogue_default()
        approver = Approver()
        rows: list[Row] = []
        started = time.monotonic()
        with running_daphne(log_path=workdir / "daphne.log", env=server_env()) as served:
            print(f"==> server up at {served.http}; {len(seeds)} scenarios", flush=True)
            approver.start()
            try:
                for i in range(0, len(seeds), args.parallel):
                    batch = []
                    for seed in seeds[i : i + args.parallel]:
                        now = datetime.now(UTC)
                        scenario = scenario_generate(seed, catalogue=catalogue, anchor=now)
                        truth = truth_of(scenario, catalogue, now=now)
                        row = Row(seed=seed, mode=scenario.mode, feasible=truth.exists)
                        practice = _seed_room(scenario, catalogue)
                        approver.rooms.add(practice.room_id)
                        batch.append((row, scenario, practice, truth))
                    t0 = time.monotonic()
                    results = asyncio.run(_run_batch(batch, served, args))
                    for (row, scenario, practice, truth), result in zip(
                        batch, results, strict=True
                    ):
                        row.seconds = round(time.monotonic() - t0, 2)
                        if isinstance(result, BaseException):
                            row.error = f"{type(result).__name__}: {result}"
                        else:
                            row.host_status, row.guest_status = result[0].status, result[1].status
                        _judge(row, scenario, catalogue, practice, truth)
                        rows.append(row)
                        print(_progress(row, len(rows), len(seeds)), flush=True)
            finally:
                approver.finish()
        elapsed = time.monotonic() - started
    result = summary(rows)
    opening = "sealed offers" if args.sealed else "proposals in turn"
    print(
        f"\n==> {len(rows)} scenarios in {elapsed:.0f} s (seeds {seeds[0]}-{seeds[-1]}; "
        f"opening: {opening})"
    )
    for name, value in result.items():
        print(f"  {name}: {value}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps({"summary": result, "rows": [asdict(r) for r in rows]}, indent=1)
        )
        print(f"  rows written to {args.json}")
    return 0


async def _run_batch(
    batch: list[tuple[Row, Any, Any, Any]], served: Any, args: argparse.Namespace
) -> list[Any]:
    return await asyncio.gather(
        *(
            _negotiate(
                served.ws_room(practice.room_id), practice, args.timeout, args.verbose, args.sealed
            )
            for _, _, practice, _ in batch
        ),
        return_exceptions=True,
    )


def _progress(row: Row, done: int, total: int) -> str:
    if row.booked:
        outcome = f"booked {row.plan[0] if row.plan else '?'} at message {row.agree_at}"
        if row.optimal is False:
            outcome += " (not the best)"
        if row.broken:
            outcome += f" BREAKS {','.join(row.broken)}"
    elif row.declared:
        outcome = f"no plan ({row.declared})"
    else:
        outcome = f"no agreement ({row.host_status}/{row.guest_status}) {row.error}".strip()
    truth = "feasible" if row.feasible else "infeasible"
    leaks = f" LEAKS {','.join(row.leaks)}" if row.leaks else ""
    return f"[{done}/{total}] seed {row.seed} ({row.mode}, {truth}): {outcome}{leaks}"


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())

"""The ``decision`` cell: the Gatekeeper's turn decision and context assembly, in-process.

For 1, 6 and 20 of the other owner's items cleared for the recipient (plus one of its own
owner's items that asks before each use, so every turn also reads the disclosure grants),
seeded through the real services in the profile's throwaway database, in a room where the
other agent has said 20 messages (a context carries and fences that many):

- statements per context request (``CaptureQueriesContext``; BEGIN/COMMIT included where the
  driver sends them) and the distinct statement shapes;
- context assembly (``context_for_agent``) in-process, ms p50/p99;
- the turn's decision alone (``decide_turn_guarded``: one read of the live slips, each
  signature verified once, every item decided), ms p50/p99, inside a transaction rolled back;
- for comparison, one item decided alone (``decide`` of a ``DisclosureRequest``, the path an
  action's check takes), ms p50/p99.

No sockets, no relay: it prices the decision point, not the transport. Run by ``python -m
bench --cells decision`` (the orchestrator starts ``python -m bench.decision`` with the
profile's environment), or directly against a configured database.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ITEMS = (1, 6, 20)
TURNS = 60

# The other owner's items: one of each single-item kind, then notes (an owner may keep many).
_SINGLE_ITEMS: list[dict[str, Any]] = [
    {"kind": "availability", "busy": []},
    {"kind": "budget", "currency": "EUR", "minimum": 3000, "maximum": 6000},
    {"kind": "food_likes", "items": ["ramen"]},
    {"kind": "food_dislikes", "items": ["okra"]},
    {"kind": "allergies", "items": ["sesame"]},
    {"kind": "link", "url": "https://example.org/0"},
]
_SCOPES = {"availability": "free_busy_7d", "budget": "range"}


def _items(n: int, now: int) -> list[dict[str, Any]]:
    items = [dict(i) for i in _SINGLE_ITEMS[:n]]
    items += [{"kind": "note", "text": f"note {i}"} for i in range(max(0, n - len(items)))]
    for item in items:
        if item["kind"] == "availability":
            item["busy"] = [{"start": now + 86_400, "end": now + 90_000}]
    return items


def _record(kind: str, recipient: str, approval: str = "none") -> dict[str, Any]:
    record = {
        "resource": kind,
        "operation": "disclose",
        "recipient": recipient,
        "approval": approval,
        "max_uses": 1000,
    }
    if kind in _SCOPES:
        record["scope"] = _SCOPES[kind]
    return record


def _seed(n: int) -> tuple[Any, Any, Any]:
    """A room whose host's slip clears ``n`` items for the guest's agent; the guest's own
    neighbourhood asks the guest before each use. Returns (room id, guest agent id, host)."""
    from practice.models import AgentRole
    from practice.seeding import SeatPlan, room_seed

    now = int(time.time())
    host_items = _items(n, now)
    kinds = list(dict.fromkeys(i["kind"] for i in host_items))
    practice = room_seed(
        host=SeatPlan(
            username=f"bench-decision-{n}-host",
            vault=host_items,
            records=[_record(k, "peer_agent") for k in kinds],
            role=AgentRole.HOST,
        ),
        guest=SeatPlan(
            username=f"bench-decision-{n}-guest",
            vault=[{"kind": "neighbourhood", "name": "Mitte"}],
            records=[_record("neighbourhood", "own_agent", approval="per_use")],
            role=AgentRole.NEGOTIATOR,
        ),
        purpose=f"Benchmark decision room ({n} items)",
        charter="Agree on a dinner slot.",
        close_earlier=False,
    )
    return practice.room_id, practice.guest.agent_id, practice.host


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50": round(statistics.median(ordered), 3),
        "p99": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 3),
    }


def _shapes(captured: Any) -> list[str]:
    seen: dict[str, None] = {}
    for query in captured.captured_queries:
        sql = re.sub(r"'[^']*'", "'?'", query["sql"])
        seen.setdefault(re.sub(r"\b\d+\b", "?", sql)[:160], None)
    return list(seen)


# A context carries the peer's last 20 messages (rooms.context.CONTEXT_PEER_MESSAGES), each
# fenced: a room that has talked for a while, as the turn cell's rooms soon have.
PEER_MESSAGES = 20


def _converse(*, room_id: Any, guest_agent_id: Any) -> None:
    from rooms import services
    from rooms.models import RoomMember

    host = RoomMember.objects.exclude(agent_id=guest_agent_id).get(room_id=room_id).agent_id
    assert host is not None
    for i in range(PEER_MESSAGES):
        services.message_say(
            room_id=room_id,
            agent_id=host,
            client_id=f"bench-decision-{i}",
            text=f"Could we meet at {18 + i % 4}:00? I would keep it under {30 + i} EUR each.",
        )


def measure(n: int, turns: int) -> dict[str, Any]:
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from gatekeeper.decision import (
        DisclosureRequest,
        RoomFacts,
        TurnDisclosures,
        decide,
        decide_turn_guarded,
    )
    from rooms.context import _room_lock, _turn_facts, context_for_agent
    from rooms.models import RoomMember

    room_id, agent_id, _host = _seed(n)
    _converse(room_id=room_id, guest_agent_id=agent_id)
    context_for_agent(room_id=room_id, agent_id=agent_id)  # asks the guest once (then waits)
    with CaptureQueriesContext(connection) as captured:
        context = context_for_agent(room_id=room_id, agent_id=agent_id)
    cleared = len(context.peer_items) + len(context.own_items)
    assembly: list[float] = []
    # This thread's CPU time too: on a shared machine the wall time is mostly waiting for a
    # core (and for the disk's commit), the CPU time is what the request itself costs.
    assembly_cpu: list[float] = []
    for _ in range(turns):
        started, started_cpu = time.perf_counter(), time.thread_time()
        context_for_agent(room_id=room_id, agent_id=agent_id)
        assembly.append((time.perf_counter() - started) * 1000)
        assembly_cpu.append((time.thread_time() - started_cpu) * 1000)

    turn_decision: list[float] = []
    for _ in range(turns):
        with transaction.atomic():
            _room_lock(room_id)
            facts = _turn_facts(room_id=room_id, agent_id=agent_id, turn=0)
            request = TurnDisclosures(
                room=facts.room,
                recipient_agent_id=agent_id,
                recipient_owner_id=facts.owner_id,
                recipient_revoked=facts.agent_revoked,
                recipient_active=facts.standing == "active",
                peer=facts.peer,
                tier=facts.tier,
            )
            started = time.perf_counter()
            decided = decide_turn_guarded(request)
            turn_decision.append((time.perf_counter() - started) * 1000)
            transaction.set_rollback(True)  # decided only: nothing spent
    assert decided.error is None, decided.error

    host_seat = RoomMember.objects.exclude(agent_id=agent_id).get(room_id=room_id)
    assert host_seat.agent_id is not None
    single: list[float] = []
    one = DisclosureRequest(
        room=RoomFacts(room_id=room_id, state="open"),
        owner_id=host_seat.owner_id,
        source_agent_id=host_seat.agent_id,
        recipient_agent_id=agent_id,
        resource="note" if n > 6 else _SINGLE_ITEMS[0]["kind"],
    )
    for _ in range(turns):
        started = time.perf_counter()
        decide(one)
        single.append((time.perf_counter() - started) * 1000)
    return {
        "items_cleared": cleared,
        "statements_per_request": len(captured),
        "statement_shapes": _shapes(captured),
        "context_assembly_ms": _ms(assembly),
        "context_assembly_cpu_ms": _ms(assembly_cpu),
        "turn_decision_ms": _ms(turn_decision),
        "single_item_decision_ms": _ms(single),
    }


def decision_cell(turns: int = TURNS) -> dict[str, Any]:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "synapsia.settings")
    django.setup()
    from django.db import connection

    return {
        "vendor": connection.vendor,
        "load_avg": os.getloadavg(),
        "turns": turns,
        "items": {str(n): measure(n, turns) for n in ITEMS},
    }


def format_cell(result: dict[str, Any]) -> str:
    lines = [f"    decision ({result['vendor']}, load {result['load_avg'][0]:.1f}):"]
    for n, row in result["items"].items():
        lines.append(
            f"      {n:>2} items (cleared {row['items_cleared']}): "
            f"{row['statements_per_request']} statements, assembly p50/p99 "
            f"{row['context_assembly_ms']['p50']}/{row['context_assembly_ms']['p99']} ms "
            f"(CPU p50 {row['context_assembly_cpu_ms']['p50']} ms), "
            f"turn decision p50/p99 {row['turn_decision_ms']['p50']}/"
            f"{row['turn_decision_ms']['p99']} ms, one item alone p99 "
            f"{row['single_item_decision_ms']['p99']} ms"
        )
    return "\n".join(lines)


def cell_decision(run: Any) -> dict[str, Any]:
    """The ``decision`` cell of ``python -m bench``: in a child process with the profile's
    environment (the orchestrator never imports Django settings)."""
    out = run.stack.workdir / "decision.json"
    command = [sys.executable, "-m", "bench.decision", "--out", str(out)]
    run.say(f"decision: 1/6/20 items, {TURNS} turns each, in-process")
    done = subprocess.run(command, env=run.stack.env, timeout=900, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"bench.decision exited with {done.returncode}")
    result = dict(json.loads(out.read_text()))
    print(format_cell(result), flush=True)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--turns", type=int, default=TURNS)
    args = parser.parse_args()
    if not 1 <= args.turns <= 400:
        parser.error("keep runs bounded: 1 <= --turns <= 400")
    result = decision_cell(args.turns)
    args.out.write_text(json.dumps(result, indent=2))
    print(format_cell(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

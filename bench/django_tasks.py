"""In-process work against the benchmark database: seeding and counting queries.

Run as ``python -m bench.django_tasks seed|queries --out FILE`` with the benchmark's
environment (the orchestrator does this), so the orchestrator itself never imports Django
settings and each profile gets a fresh settings module.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import threading
import time
from pathlib import Path
from typing import Any
from uuid import UUID

import django


def _setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "synapsia.settings")
    django.setup()


def seed(rooms: int) -> dict[str, Any]:
    """Two owners, ``rooms`` open rooms with one fresh agent per seat, plus one probe room.

    Everything goes through ``rooms.services``, exactly as the owner pages would do it.
    """
    from django.contrib.auth import get_user_model

    from rooms import services
    from rooms.models import RoomState

    user_model = get_user_model()
    # Unusable passwords: hashing a real one costs ~0.3 s each and is not what we measure.
    alice = user_model.objects.create_user(username="bench-alice", password=None)
    bob = user_model.objects.create_user(username="bench-bob", password=None)

    def open_room(index: int) -> dict[str, Any]:
        agent_a = services.agent_register(owner=alice, name=f"alice-agent-{index}")
        agent_b = services.agent_register(owner=bob, name=f"bob-agent-{index}")
        room = services.room_create(
            owner=alice, purpose=f"Benchmark room {index}", charter="Agree on a dinner slot."
        )
        invite = services.invite_create(owner=alice, room_id=room.id)
        services.invite_accept(owner=bob, token=invite.token)
        services.room_bind_agent(owner=alice, room_id=room.id, agent_id=agent_a.agent.id)
        services.room_bind_agent(owner=bob, room_id=room.id, agent_id=agent_b.agent.id)
        services.room_transition(owner=alice, room_id=room.id, to=RoomState.OPEN)
        return {
            "room_id": str(room.id),
            "agents": [
                {"agent_id": str(agent_a.agent.id), "token": agent_a.token},
                {"agent_id": str(agent_b.agent.id), "token": agent_b.token},
            ],
        }

    return {"rooms": [open_room(i) for i in range(rooms)], "probe": open_room(rooms)}


def seed_turn_rooms(rooms: int) -> dict[str, Any]:
    """``rooms`` open rooms like the practice room (plus one probe room): each owner's vault
    and signed slip (server-held demo keys), so a context request of the host's agent clears
    the guest's shared items and its own owner's: the Gatekeeper decides each one, live."""
    from django.utils import timezone

    from practice import scenario
    from practice.models import AgentRole
    from practice.seeding import SeatPlan, room_seed

    now = timezone.now()

    def open_room(index: int) -> dict[str, Any]:
        practice = room_seed(
            host=SeatPlan(
                username=f"bench-turn-{index}-host",
                vault=scenario.vault_items("host", now),
                records=_most_uses(scenario.slip_capabilities("host")),
                role=AgentRole.HOST,
            ),
            guest=SeatPlan(
                username=f"bench-turn-{index}-guest",
                vault=scenario.vault_items("guest", now),
                records=_most_uses(scenario.slip_capabilities("guest")),
                role=AgentRole.NEGOTIATOR,
            ),
            purpose=f"Benchmark turn room {index}",
            charter=scenario.ROOM_CHARTER,
            close_earlier=False,
        )
        return {
            "room_id": str(practice.room_id),
            "agents": [
                {"agent_id": str(practice.host.agent_id), "token": practice.host.token},
                {"agent_id": str(practice.guest.agent_id), "token": practice.guest.token},
            ],
        }

    return {"rooms": [open_room(i) for i in range(rooms)], "probe": open_room(rooms)}


def _most_uses(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The practice slip with every sharing record allowed the most uses a slip may grant:
    the demo's 100 run out after 100 turns, and a turn that clears nothing is not the turn
    the cell measures (``refill_uses`` tops them up again before each run)."""
    from slips.capabilities import MAX_USES_LIMIT

    return [
        {**r, "max_uses": MAX_USES_LIMIT} if r.get("operation") in ("read", "disclose") else r
        for r in records
    ]


def refill_uses(seeded: dict[str, Any]) -> dict[str, Any]:
    """Every sharing record of the seeded turn rooms' slips back to its full uses (the
    signed records are unchanged, ``_most_uses`` gave each the limit; only the server's count
    of uses left is reset), so each turn of the next run clears the same items."""
    from slips.capabilities import MAX_USES_LIMIT
    from slips.models import SlipCapability

    rooms = [UUID(r["room_id"]) for r in [*seeded["rooms"], seeded["probe"]]]
    refilled = SlipCapability.objects.filter(
        slip__room_id__in=rooms, operation__in=("read", "disclose")
    ).update(uses_left=MAX_USES_LIMIT)
    return {"records_refilled": refilled}


def count_context(probe: dict[str, Any], *, turns: int = 20) -> dict[str, Any]:
    """Statements and in-process time per context request of the probe room's host agent."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from rooms import context

    room_id = UUID(probe["room_id"])
    agent_id = UUID(probe["agents"][0]["agent_id"])
    context.context_for_agent(room_id=room_id, agent_id=agent_id, asked=[])  # warm up
    times: list[float] = []
    cpu: list[float] = []
    with CaptureQueriesContext(connection) as captured:
        for _ in range(turns):
            start, start_cpu = time.perf_counter(), time.thread_time()
            assembled = context.context_for_agent(room_id=room_id, agent_id=agent_id, asked=[])
            cpu.append((time.thread_time() - start_cpu) * 1000)
            times.append((time.perf_counter() - start) * 1000)
    dumped = assembled.model_dump(mode="json")
    return {
        "statements_per_request": len(captured) / turns,
        "ms_median": statistics.median(times),
        "cpu_ms_median": statistics.median(cpu),
        "items_cleared": _cleared_items(dumped),
        **contended_context(room_id, agent_id),
    }


def contended_context(room_id: UUID, agent_id: UUID, *, turns: int = 10) -> dict[str, Any]:
    """The probe's context request beside a Python thread that always wants the GIL, as a
    server's event loop does under load: the request's own thread CPU (median; against
    ``cpu_ms_median``, the same request's alone) and how often the GIL changed hands during
    one (``gil_handoffs_per_request``).

    A database driver lets go of the GIL around its calls (psycopg around each libpq call
    that may wait, SQLite's module around each step, libsodium's verification through cffi);
    with another thread waiting, each let-go is a hand-off, and taking the GIL back costs the
    request CPU and up to a switch interval of waiting. The busy thread counts them: it sees
    a gap in its own clock each time it was made to wait. A figure for the work no profile
    of the request alone shows; measured, never asserted."""
    from rooms import context

    gaps = 0
    stop = threading.Event()

    def busy() -> None:
        nonlocal gaps
        last = time.perf_counter()
        while not stop.is_set():
            now = time.perf_counter()
            if now - last > _HANDOFF_GAP_S:
                gaps += 1
            last = now

    times: list[float] = []
    thread = threading.Thread(target=busy, name="bench-busy-loop", daemon=True)
    thread.start()
    try:
        time.sleep(0.01)
        before = gaps
        for _ in range(turns):
            start = time.thread_time()
            context.context_for_agent(room_id=room_id, agent_id=agent_id, asked=[])
            times.append((time.thread_time() - start) * 1000)
        handoffs = gaps - before
    finally:
        stop.set()
        thread.join()
    return {
        "contended_ms_median": statistics.median(times),
        "gil_handoffs_per_request": handoffs / turns,
    }


# A pause in the busy thread's clock longer than this is a hand-off (its loop turns in ~1 us).
_HANDOFF_GAP_S = 30e-6


def _cleared_items(dumped: dict[str, Any]) -> int:
    """How many vault items a context answer carries (its owner's and the peer's)."""
    return len(dumped.get("own_items", [])) + len(dumped.get("peer_items", []))


def count_queries(probe: dict[str, Any], *, messages: int, text_bytes: int) -> dict[str, Any]:
    """Queries and in-process time per ``message_say`` and per ``messages_ack`` (no sockets)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from rooms import services

    room_id = UUID(probe["room_id"])
    agent_id = UUID(probe["agents"][0]["agent_id"])
    peer_id = UUID(probe["agents"][1]["agent_id"])
    text = "q" * text_bytes
    # Warm up (first-query costs: connection, statement caches).
    for i in range(5):
        services.message_say(room_id=room_id, agent_id=agent_id, client_id=f"warm-{i}", text=text)

    say_ms: list[float] = []
    with CaptureQueriesContext(connection) as say_queries:
        for i in range(messages):
            start = time.perf_counter()
            said = services.message_say(
                room_id=room_id, agent_id=agent_id, client_id=f"q-{i}", text=text
            )
            say_ms.append((time.perf_counter() - start) * 1000)
    ack_ms: list[float] = []
    with CaptureQueriesContext(connection) as ack_queries:
        for seq in range(said.seq - messages + 1, said.seq + 1):
            start = time.perf_counter()
            services.messages_ack(room_id=room_id, agent_id=peer_id, seq=seq)
            ack_ms.append((time.perf_counter() - start) * 1000)
    with CaptureQueriesContext(connection) as dup_queries:
        services.message_say(room_id=room_id, agent_id=agent_id, client_id="q-0", text=text)
    # What a socket's single `say` frame costs (the consumer records every run, also of one,
    # through ``messages_say``).
    single_ms: list[float] = []
    with CaptureQueriesContext(connection) as single_queries:
        for i in range(messages):
            start = time.perf_counter()
            services.messages_say(room_id=room_id, agent_id=agent_id, says=[(f"s-{i}", text)])
            single_ms.append((time.perf_counter() - start) * 1000)

    def shape(captured: CaptureQueriesContext) -> list[str]:
        # Each distinct statement once, with its literal values blanked out.
        seen: dict[str, None] = {}
        for query in captured.captured_queries:
            sql = re.sub(r"'[^']*'", "'?'", query["sql"])
            seen.setdefault(re.sub(r"\b\d+\b", "?", sql), None)
        return list(seen)

    return {
        "vendor": connection.vendor,
        "messages": messages,
        "say_queries_per_message": len(say_queries) / messages,
        "ack_queries_per_message": len(ack_queries) / messages,
        "duplicate_say_queries": len(dup_queries),
        "say_ms_median": statistics.median(say_ms),
        "ack_ms_median": statistics.median(ack_ms),
        "say_statements": shape(say_queries),
        "single_say_queries_per_message": len(single_queries) / messages,
        "single_say_ms_median": statistics.median(single_ms),
        "single_say_statements": shape(single_queries),
        "ack_statements": shape(ack_queries),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("task", choices=["seed", "seed-turn", "queries", "context", "refill"])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rooms", type=int, default=10)
    parser.add_argument("--seed-file", type=Path, help="queries: the seed's output")
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--text-bytes", type=int, default=200)
    args = parser.parse_args()
    _setup()
    if args.task == "seed":
        result = seed(args.rooms)
    elif args.task == "seed-turn":
        result = seed_turn_rooms(args.rooms)
    elif args.task == "refill":
        result = refill_uses(json.loads(args.seed_file.read_text()))
    elif args.task == "context":
        result = count_context(json.loads(args.seed_file.read_text())["probe"])
    else:
        probe = json.loads(args.seed_file.read_text())["probe"]
        result = count_queries(probe, messages=args.messages, text_bytes=args.text_bytes)
    args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

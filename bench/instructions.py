"""Instructions a unit of server work costs, counted by valgrind's callgrind: an A/B that the
machine's noise does not move.

``python -m bench.instructions [--work desk|context|leave|all] [--tree DIR ...] [--low N]
[--high M]``

Timed A/Bs of a change worth a few percent are lost in this 2-core machine's noise (the same
code's say cell moves 10% between runs). An instruction count is not: callgrind counts what
the CPU executes, the same for the same code and inputs whatever else the machine does (a
run repeated here agreed to 0.02%). It does not count the kernel's work (a syscall's own
cost), so a change that saves syscalls shows less here than in thread CPU; say which you
measured. A unit's count still moves with what the runs do differently (the ledger's signed
head every 64 events, the database growing, random nonces): over the same trees, repeated
runs agreed within ~1-2% for ``desk`` and ~3% for ``context`` (2026-12-05); a change smaller
than that needs repeated runs, or is not shown.

Work, each in process on a throwaway SQLite database and key store (the embedded profile):

- ``desk``: one say desk hop (``rooms.consumers._desk_hop_parts``) of 40 one-message runs in
  40 rooms and 10 standing checks, as a busy Daphne's desk takes them;
- ``context``: the probe room's host agent's context request (11 items cleared, as the turn
  cell's rooms);
- ``leave``: one agent socket's leave (``rooms.services.agent_leave``: its count and its
  ``Leave`` event), in 40 rooms in turn.

Each tree (default: this checkout) is run twice under callgrind, with ``--low`` and with
``--high`` units after 10 of warm-up, on fresh copies of one seeded database; the difference
over ``high - low`` is the instructions a unit costs, start-up excluded. Every tree gets the
same seeded database and key store (seeded by this checkout), so the trees must share its
schema. Compare a change with its parent: ``git worktree add /tmp/before HEAD~1``, then
``--tree /tmp/before --tree .``. The two runs of a tree go side by side (2 cores).
Needs ``valgrind`` on the PATH. Takes about a minute a run.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WORKS = ("desk", "context", "leave")
WARM_UP = 10
_COLLECTED = re.compile(r"Collected : (\d+)")


def collected(callgrind_stderr: str) -> int:
    """The instruction count callgrind reports at exit (``==PID== Collected : N``)."""
    found = _COLLECTED.findall(callgrind_stderr)
    if not found:
        raise RuntimeError(f"callgrind reported no count:\n{callgrind_stderr[-2000:]}")
    return int(found[-1])


# --- in the measured process (``--run``), from the tree's own code ----------------------


def _desk_unit(seeded: dict[str, Any], index: int) -> None:
    from uuid import UUID

    from rooms import consumers, standing

    runs = []
    readers = []
    for i, room in enumerate(seeded["rooms"][:40]):
        side = (index + i) % 2
        speaker, listener = room["agents"][side], room["agents"][1 - side]
        room_id = UUID(room["room_id"])
        text = "Shall we meet at seven near the station? I can book a table for two."
        runs.append((room_id, UUID(speaker["agent_id"]), [(f"m{index}-{i}", text)]))
        readers.append(standing.Reader(room_id, 0, UUID(listener["agent_id"])))
    acked, said, verdicts = consumers._desk_hop_parts(acks=[], runs=runs, readers=readers[:10])
    for part in (acked, said, verdicts):
        if isinstance(part, Exception):
            raise part


def _leave_unit(seeded: dict[str, Any], index: int) -> None:
    from uuid import UUID

    from rooms import services

    rooms = seeded["rooms"][:40]
    room = rooms[index % len(rooms)]
    services.agent_leave(
        room_id=UUID(room["room_id"]), agent_id=UUID(room["agents"][index % 2]["agent_id"])
    )


def _context_unit(seeded: dict[str, Any], index: int) -> None:
    from uuid import UUID

    from bench.django_tasks import refill_uses
    from rooms import context

    if index % 50 == 0:
        refill_uses(seeded)  # each request clears the same items: uses never run out
    probe = seeded["probe"]
    assembled = context.context_for_agent(
        room_id=UUID(probe["room_id"]), agent_id=UUID(probe["agents"][0]["agent_id"]), asked=[]
    )
    if not assembled.own_items and not assembled.peer_items:  # a failed check clears nothing
        raise RuntimeError(f"the context request cleared nothing: {assembled.notices}")


def _run(work: str, count: int, seed_file: Path) -> None:
    """Run ``WARM_UP + count`` units of ``work`` in this process (the tree's code)."""
    sys.path.insert(0, os.getcwd())  # the tree being measured, not this file's checkout
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "synapsia.settings")
    import django

    django.setup()
    seeded = json.loads(seed_file.read_text())
    unit = {"desk": _desk_unit, "context": _context_unit, "leave": _leave_unit}[work]
    for index in range(WARM_UP):
        unit(seeded, index)
    # What the warm-up left (Django, the caches) frozen out of the collector's reach: a full
    # collection over it lands in one run and not the other and moved a unit's count by a few
    # percent; the units' own garbage is still collected as it comes.
    gc.collect()
    gc.freeze()
    for index in range(WARM_UP, WARM_UP + count):
        unit(seeded, index)


# --- the orchestrator ---------------------------------------------------------------------


def _embedded_env(database: Path, keys: Path) -> dict[str, str]:
    # Imported here, not at the top: the measured process (``--run``) must import the tree's
    # own packages, never this checkout's.
    from bench.stack import base_env

    env = base_env(debug=False, settings="synapsia.settings")
    env.update(SYNAPSIA_SQLITE_PATH=str(database), SYNAPSIA_KEY_STORE_PATH=str(keys))
    # One hash seed for every run: the sets' and dicts' layouts (and so their probing) equal.
    env["PYTHONHASHSEED"] = "0"
    return env


def _seed(work: str, workdir: Path, rooms: int | None = None) -> tuple[Path, Path, Path]:
    """A migrated, seeded database, its key store and the seed's ids (this checkout)."""
    from bench.stack import run_checked

    database, keys, seeded = (
        workdir / f"{work}{suffix}" for suffix in (".db", "-keys.db", ".json")
    )
    env = _embedded_env(database, keys)
    run_checked([sys.executable, "manage.py", "migrate", "-v0"], env, "migrate")
    task = "seed-turn" if work == "context" else "seed"
    count = str(rooms or (2 if work == "context" else 50))
    run_checked(
        [sys.executable, "-m", "bench.django_tasks", task, "--rooms", count, "--out", str(seeded)],
        env,
        "seeding",
    )
    return database, keys, seeded


def _count(
    tree: Path, work: str, count: int, seeded: tuple[Path, Path, Path], workdir: Path
) -> int:
    """Instructions of one run of ``count`` units in ``tree``, on fresh copies of the seed."""
    database, keys, seed_file = seeded
    run_dir = Path(tempfile.mkdtemp(dir=workdir))
    shutil.copy(database, run_dir / "db.sqlite3")
    shutil.copy(keys, run_dir / "keys.sqlite3")
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        str(Path(__file__).resolve()),
        "--run",
        work,
        "--count",
        str(count),
        "--seed-file",
        str(seed_file),
    ]
    env = _embedded_env(run_dir / "db.sqlite3", run_dir / "keys.sqlite3")
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{tree}: the {work} run failed:\n{done.stderr[-3000:]}")
    return collected(done.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", choices=[*WORKS, "all"], default="all")
    parser.add_argument("--tree", type=Path, action="append", help="a checkout (repeatable)")
    parser.add_argument("--low", type=int, default=10, help="units in the shorter run")
    parser.add_argument("--high", type=int, default=40, help="units in the longer run")
    parser.add_argument("--run", choices=WORKS, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--seed-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run:
        _run(args.run, args.count, args.seed_file)
        return 0
    if args.high <= args.low or args.low < 1:
        parser.error("--high must be more than --low, and --low at least 1")
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: apt-get install valgrind", file=sys.stderr)
        return 2
    trees = [t.resolve() for t in args.tree or [ROOT]]
    for tree in trees:
        if not (tree / "manage.py").exists():
            parser.error(f"{tree} is not a checkout of this project (no manage.py)")
    works = WORKS if args.work == "all" else (args.work,)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-instructions-") as tmp:
        workdir = Path(tmp)
        for work in works:
            print(f"==> {work}: seeding a throwaway database", flush=True)
            seeded = _seed(work, workdir)
            for tree in trees:
                started = time.monotonic()
                print(
                    f"==> {work}: {tree}: {args.low} and {args.high} units under callgrind",
                    flush=True,
                )
                with ThreadPoolExecutor(max_workers=2) as pool:
                    low, high = pool.map(
                        lambda n, t=tree, w=work, s=seeded: _count(t, w, n, s, workdir),
                        (args.low, args.high),
                    )
                per_unit = (high - low) / (args.high - args.low)
                results.setdefault(work, {})[str(tree)] = per_unit
                print(
                    f"    {per_unit / 1e6:.3f} M instructions a unit "
                    f"({time.monotonic() - started:.0f} s)",
                    flush=True,
                )
    print()
    for work, by_tree in results.items():
        first = next(iter(by_tree.values()))
        for tree, per_unit in by_tree.items():
            print(f"{work:8} {per_unit / 1e6:9.3f} M  x{per_unit / first:.3f}  {tree}")
    if len(trees) > 1:
        print("(x: against the first tree)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

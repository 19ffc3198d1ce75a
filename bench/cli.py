"""``python -m bench``: what an agent feels, against a bare Channels relay, per profile.

For each profile: build a throwaway database, seed rooms through the real services (plain
rooms, and rooms with signed slips for the turn), count statements in-process, serve the relay
(baseline) and the real app with Daphne, and drive each cell from a separate load-generator
process, alternating relay and Synapsia for ``--rounds`` rounds so both see the same machine
noise. Ratios are taken within a round, then the median. Cells:

- ``say``: both agents of each room pipeline `say` frames, W messages in flight (W = 1, 8);
- ``turn``: context request, then say, then the peer's reply, in R rooms (R = 1, 50; 200
  with ``--full``);
- ``idle``: N connected sockets doing nothing (N = 1,000 and 2,000): connect time, resident
  memory, CPU over a fixed idle window (a fresh server per run).

Every run is bounded in count and time and prints its progress.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import statistics
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import report
from bench.decision import cell_decision
from bench.fence import cell_fence
from bench.ledger import cell_ledger
from bench.stack import (
    ROOT,
    SERVER_CPU,
    Servers,
    Stack,
    provisioned,
    run_module,
    running_daphne,
    running_daphnes,
)

CELLS = ("say", "turn", "idle", "ledger", "fence", "decision")
# Turns per room per run: below the most uses a record may grant (1,000), so no record runs
# out during a run (each run starts from full uses).
TURNS_PER_ROOM = 900


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    services_default = os.environ.get("BENCH_SERVICES") == "1"
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--profile",
        choices=["embedded", "services", "both"],
        default="services" if services_default else "embedded",
        help="embedded: temp SQLite + in-memory layer; services: PostgreSQL bench_synapsia + "
        "Redis db 12 (default: embedded, or services when BENCH_SERVICES=1)",
    )
    parser.add_argument("--cells", default=",".join(CELLS), help=f"any of {', '.join(CELLS)}")
    parser.add_argument("--full", action="store_true", help="also the turn at 200 rooms")
    parser.add_argument("--rooms", type=int, default=50, help="say cell: rooms (2 sockets each)")
    parser.add_argument("--windows", default="1,8", help="say cell: messages in flight per socket")
    parser.add_argument("--turn-rooms", default=None, help="turn cell: room counts (1,50)")
    parser.add_argument("--idle-sockets", default="1000,2000", help="idle cell: socket counts")
    parser.add_argument("--idle-seconds", type=float, default=10.0, help="idle cell: window")
    parser.add_argument(
        "--ledger-events", type=int, default=1_000_000, help="ledger cell: events (own database)"
    )
    parser.add_argument(
        "--messages", type=int, default=20000, help="say cell: messages per run, all sockets"
    )
    parser.add_argument("--duration", type=float, default=10.0, help="max seconds per run")
    parser.add_argument("--drain", type=float, default=10.0, help="max seconds to drain")
    parser.add_argument("--rounds", type=int, default=2, help="baseline/synapsia alternations")
    parser.add_argument(
        "--ack-every",
        type=int,
        default=32,
        help="say cell: ack after this many messages (the SDK: every 32 while busy)",
    )
    parser.add_argument("--text-bytes", type=int, default=200, help="size of each message text")
    parser.add_argument(
        "--text",
        choices=["filler", "negotiation"],
        default="filler",
        help="say and turn cells: what each message says after its bench prefix: x's up to "
        "--text-bytes, or the reference negotiator's own messages (what the fence reads in a "
        "real room; --text-bytes not used)",
    )
    parser.add_argument(
        "--pyspy", action="store_true", help="run the Synapsia server under py-spy record"
    )
    parser.add_argument(
        "--settings",
        default="synapsia.settings",
        help="DJANGO_SETTINGS_MODULE for every process (what-ifs: bench.whatif_settings)",
    )
    parser.add_argument(
        "--only", choices=["relay", "synapsia"], help="run one target only (no ratio)"
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="say and turn cells: Daphne processes per target, sockets spread over them in "
        "turn (production runs two; services profile only)",
    )
    parser.add_argument(
        "--server-cpu",
        type=int,
        help="SYNAPSIA_SERVER_CPU for every server, the relay's and Synapsia's alike (each "
        "target's n-th process on the CPU after the (n-1)-th's); unset: the system chooses",
    )
    parser.add_argument("--debug", action="store_true", help="SYNAPSIA_DEBUG=true on servers")
    parser.add_argument("--keep", action="store_true", help="keep the throwaway database")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "var" / "bench")
    args = parser.parse_args(argv)
    args.cells = [c for c in args.cells.split(",") if c]
    unknown = set(args.cells) - set(CELLS) - set(EXTRA_CELLS)
    if unknown:
        parser.error(f"unknown cells: {', '.join(sorted(unknown))}")
    args.windows = _ints(args.windows)
    args.turn_rooms = _ints(args.turn_rooms) if args.turn_rooms else [1, 50]
    if args.full and 200 not in args.turn_rooms:
        args.turn_rooms.append(200)
    args.idle_sockets = _ints(args.idle_sockets)
    if args.rooms < 1 or args.messages < 2 * args.rooms or args.duration <= 0:
        parser.error("need --rooms >= 1, --messages >= 2 x rooms and --duration > 0")
    if args.duration > 120 or args.messages > 1_000_000 or max(args.idle_sockets) > 4000:
        parser.error(
            "keep runs bounded: --duration <= 120, --messages <= 1,000,000, <= 4000 sockets"
        )
    if args.server_cpu is not None and args.server_cpu < 0:
        parser.error("--server-cpu: a CPU's number, from 0")
    if not 1 <= args.processes <= 4:
        parser.error("--processes: 1 to 4")
    if args.processes > 1 and args.profile != "services":
        parser.error(
            "--processes above 1 needs --profile services: the embedded profile's in-memory "
            "channel layer lives in one process, so agents on two would not hear each other"
        )
    if max(args.turn_rooms) > 400 or args.idle_seconds > 60:
        parser.error("keep runs bounded: <= 400 turn rooms, --idle-seconds <= 60")
    return args


@dataclass
class ProfileRun:
    """What a cell needs: the profile's stack, its seeds and the options."""

    profile: str
    stack: Stack
    args: argparse.Namespace
    plain: dict[str, Any]  # seeded plain rooms (say, idle)
    turn: dict[str, Any] | None  # seeded rooms with signed slips (turn)
    relay: Servers
    app: Servers

    def loadgen(self, servers: Servers, config: dict[str, Any], timeout: float) -> dict[str, Any]:
        """One bounded load-generator run; its JSON summary (the server CPU is all of
        ``servers``' processes')."""
        tag = config["tag"]
        config = {"server_pids": servers.pids, "drain": self.args.drain, **config}
        config_path = self.stack.workdir / f"{tag}-config.json"
        result_path = self.stack.workdir / f"{tag}-result.json"
        config_path.write_text(json.dumps(config))
        try:
            run_module(
                "bench.loadgen",
                "--config",
                str(config_path),
                "--out",
                str(result_path),
                env=self.stack.env,
                timeout=timeout,
            )
        finally:
            config_path.unlink()  # it holds agent tokens (throwaway ones, but still)
        return dict(json.loads(result_path.read_text()))

    def targets(self) -> list[tuple[str, Servers]]:
        both = [("relay", self.relay), ("synapsia", self.app)]
        return [
            (mode, server) for mode, server in both if not self.args.only or mode == self.args.only
        ]

    def say(self, message: str) -> None:
        print(f"==> {self.profile}: {message}", flush=True)

    def refill_uses(self) -> None:
        """Top the turn rooms' records up to their full uses (``django_tasks.refill_uses``)."""
        assert self.turn is not None
        seeded = self.stack.workdir / "refill.json"
        out = self.stack.workdir / "refill-result.json"
        seeded.write_text(json.dumps(self.turn))
        try:
            run_module(
                "bench.django_tasks",
                "refill",
                "--seed-file",
                str(seeded),
                "--out",
                str(out),
                env=self.stack.env,
                timeout=120,
            )
        finally:
            seeded.unlink()  # it holds agent tokens


def _rooms_config(
    run: ProfileRun, servers: Servers, mode: str, seeded: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Each room's two socket URLs (with several processes, the sockets in turn: a room's
    two agents on different ones, their messages crossing through the channel layer)."""
    if mode == "relay":
        return [
            {
                "urls": [
                    f"ws://{servers.host_for(2 * i + n)}/ws/relay/{i}/{side}/"
                    for n, side in enumerate("ab")
                ]
            }
            for i in range(len(seeded))
        ]
    return [
        {
            "urls": [
                f"ws://{servers.host_for(2 * i + n)}/ws/rooms/{room['room_id']}/" for n in range(2)
            ],
            "tokens": [agent["token"] for agent in room["agents"]],
        }
        for i, room in enumerate(seeded)
    ]


_HOP_SERIES = re.compile(
    r'^synapsia_say_desk_hop_(seconds|frames)_(sum|count)(?:\{phase="(\w+)"\})? (\S+)$', re.M
)


def say_desk_hops(run: ProfileRun, servers: Servers) -> dict[str, float]:
    """The servers' say desk hop series (``rooms.realtime``), read from each one's
    ``/metrics`` and added up: ``{"seconds_sum:queued": ..., "frames_count": ...}``; empty
    if one cannot be read."""
    totals: dict[str, float] = {}
    for server in servers.members:
        request = urllib.request.Request(
            f"http://{server.host}/metrics",
            headers={"Authorization": f"Bearer {run.stack.env['SYNAPSIA_METRICS_TOKEN']}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (loopback)
                text = response.read().decode()
        except OSError:
            return {}
        for kind, stat, phase, value in _HOP_SERIES.findall(text):
            key = f"{kind}_{stat}" + (f":{phase}" if phase else "")
            totals[key] = totals.get(key, 0.0) + float(value)
    return totals


def say_desk_hops_between(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """The hops of one run: how many, frames per hop, and each phase's mean in ms."""
    delta = {key: after[key] - before.get(key, 0.0) for key in after}
    hops = delta.get("frames_count", 0.0)
    if hops <= 0:
        return {}
    return {
        "hops": int(hops),
        "frames_per_hop": round(delta.get("frames_sum", 0.0) / hops, 2),
        **{
            f"{phase}_ms": round(1000 * delta.get(f"seconds_sum:{phase}", 0.0) / hops, 3)
            for phase in ("queued", "run", "cpu", "answered")
        },
    }


def cell_say(run: ProfileRun) -> dict[str, Any]:
    """Both agents of each room pipeline `say` frames with W messages in flight."""
    args = run.args
    variants: dict[str, Any] = {}
    for window in args.windows:
        runs: list[dict[str, Any]] = []
        for round_no in range(1, args.rounds + 1):
            for mode, server in run.targets():
                run.say(
                    f"say, window {window}, round {round_no}/{args.rounds}, {mode}: "
                    f"{args.rooms} rooms x 2 sockets, <= {args.messages} messages, "
                    f"<= {args.duration:g}s"
                )
                config = {
                    "cell": "say",
                    "mode": mode,
                    "tag": f"say-w{window}-r{round_no}{mode[0]}",
                    "rooms": _rooms_config(run, server, mode, run.plain["rooms"][: args.rooms]),
                    "messages": args.messages,
                    "duration": args.duration,
                    "window": window,
                    "ack_every": args.ack_every,
                    "text_bytes": args.text_bytes,
                    "text": args.text,
                }
                hops_before = say_desk_hops(run, server) if mode == "synapsia" else None
                result = run.loadgen(server, config, args.duration + args.drain + 180)
                result["round"] = round_no
                if hops_before is not None:
                    result["say_desk_hops"] = say_desk_hops_between(
                        hops_before, say_desk_hops(run, server)
                    )
                runs.append(result)
                print("    " + report.run_line(result), flush=True)
                if result.get("say_desk_hops"):
                    print("    " + report.say_desk_line(result["say_desk_hops"]), flush=True)
        variants[f"window {window}"] = {"runs": runs, "summary": summarise(runs, "msg_per_s")}
    return variants


def cell_turn(run: ProfileRun) -> dict[str, Any]:
    """Context request, say, the peer's reply: one turn after another in each room."""
    args = run.args
    assert run.turn is not None
    variants: dict[str, Any] = {}
    for rooms in args.turn_rooms:
        runs: list[dict[str, Any]] = []
        for round_no in range(1, args.rounds + 1):
            for mode, server in run.targets():
                run.say(
                    f"turn, {rooms} rooms, round {round_no}/{args.rounds}, {mode}: "
                    f"<= {args.duration:g}s"
                )
                if mode == "synapsia":
                    run.refill_uses()
                config = {
                    "cell": "turn",
                    "mode": mode,
                    "tag": f"turn-{rooms}-r{round_no}{mode[0]}",
                    "rooms": _rooms_config(run, server, mode, run.turn["rooms"][:rooms]),
                    "duration": args.duration,
                    # Within the uses each record was given (refilled before each run), so
                    # every turn of the run clears the same items; a room that gets there
                    # before the duration ends its run early (the rate is per elapsed second).
                    "turns_per_room": TURNS_PER_ROOM,
                    "text_bytes": args.text_bytes,
                    "text": args.text,
                }
                hops_before = say_desk_hops(run, server) if mode == "synapsia" else None
                result = run.loadgen(server, config, args.duration + 240)
                result["round"] = round_no
                if hops_before is not None:
                    result["say_desk_hops"] = say_desk_hops_between(
                        hops_before, say_desk_hops(run, server)
                    )
                runs.append(result)
                print("    " + report.turn_line(result), flush=True)
                if result.get("say_desk_hops"):
                    print("    " + report.say_desk_line(result["say_desk_hops"]), flush=True)
        variants[f"{rooms} rooms"] = {"runs": runs, "summary": summarise(runs, "turns_per_s")}
    return variants


def cell_idle(run: ProfileRun) -> dict[str, Any]:
    """N sockets connected and idle, on a fresh server each time (memory from a clean start)."""
    args = run.args
    variants: dict[str, Any] = {}
    for sockets in args.idle_sockets:
        rooms = run.plain["rooms"][: (sockets + 1) // 2]
        runs: list[dict[str, Any]] = []
        for round_no in range(1, args.rounds + 1):
            for mode, application in (
                ("relay", "bench.relay_asgi:application"),
                ("synapsia", "synapsia.asgi:application"),
            ):
                if args.only and mode != args.only:
                    continue
                run.say(
                    f"idle, {sockets} sockets, round {round_no}/{args.rounds}, {mode}: fresh "
                    f"server, connect, then {args.idle_seconds:g}s idle"
                )
                log = run.stack.workdir / f"idle-{sockets}-{round_no}-{mode}.log"
                # --pyspy: Synapsia's idle server runs under py-spy too (connects and idle
                # window), its profile kept beside the log and summarised in the result.
                profile_to = (
                    run.stack.workdir / f"idle-{sockets}-{round_no}.pyspy.txt"
                    if args.pyspy and mode == "synapsia"
                    else None
                )
                with running_daphne(
                    run.stack.env, application, log, profile_to=profile_to
                ) as server:
                    config_rooms = _rooms_config(run, Servers([server]), mode, rooms)
                    pairs = [
                        [url, (room.get("tokens") or [None, None])[side]]
                        for room in config_rooms
                        for side, url in enumerate(room["urls"])
                    ][:sockets]
                    config = {
                        "cell": "idle",
                        "mode": mode,
                        "tag": f"idle-{sockets}-r{round_no}{mode[0]}",
                        "sockets": pairs,
                        "idle_s": args.idle_seconds,
                        "duration": args.idle_seconds + 120,
                    }
                    config["server_pid"] = server.pid  # its memory is read too
                    result = run.loadgen(Servers([server]), config, args.idle_seconds + 400)
                result["round"] = round_no
                if profile_to is not None and profile_to.exists():
                    result["pyspy_profile"] = str(profile_to)
                    result["pyspy_top"] = report.pyspy_top(profile_to)
                runs.append(result)
                print("    " + report.idle_line(result), flush=True)
        variants[f"{sockets} sockets"] = {"runs": runs, "summary": summarise_idle(runs)}
    return variants


# Cells other modules add (name -> function of a ProfileRun returning its JSON).
EXTRA_CELLS: dict[str, Callable[[ProfileRun], dict[str, Any]]] = {}
CELL_FUNCTIONS: dict[str, Callable[[ProfileRun], dict[str, Any]]] = {
    "say": cell_say,
    "turn": cell_turn,
    "idle": cell_idle,
    "ledger": cell_ledger,  # verify_ledger against read + SHA-256 (bench/ledger.py)
    "fence": cell_fence,  # fence() at 1 / 8 / 64 KB, ratios within rounds (bench/fence.py)
    "decision": cell_decision,  # turn decision + statements per context request (bench/decision.py)
}


def _seed(
    profile: str, stack: Stack, args: argparse.Namespace, workdir: Path
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    plain_rooms = max(
        args.rooms if "say" in args.cells else 1,
        (max(args.idle_sockets) + 1) // 2 if "idle" in args.cells else 1,
    )
    seed_path = workdir / "seed.json"
    print(f"==> {profile}: seeding {plain_rooms} rooms through rooms.services", flush=True)
    run_module(
        "bench.django_tasks",
        "seed",
        "--rooms",
        str(plain_rooms),
        "--out",
        str(seed_path),
        env=stack.env,
        timeout=900,
    )
    plain = json.loads(seed_path.read_text())
    seed_path.unlink()
    turn = None
    if "turn" in args.cells:
        rooms = max(args.turn_rooms)
        turn_path = workdir / "seed-turn.json"
        print(
            f"==> {profile}: seeding {rooms} rooms with vaults and signed slips (practice "
            "scenario)",
            flush=True,
        )
        run_module(
            "bench.django_tasks",
            "seed-turn",
            "--rooms",
            str(rooms),
            "--out",
            str(turn_path),
            env=stack.env,
            timeout=900,
        )
        turn = json.loads(turn_path.read_text())
        turn_path.unlink()
    return plain, turn


def _in_process(
    profile: str,
    stack: Stack,
    args: argparse.Namespace,
    workdir: Path,
    plain: dict[str, Any],
    turn: dict[str, Any] | None,
) -> dict[str, Any]:
    print(f"==> {profile}: counting statements (in-process)", flush=True)
    probe_path = workdir / "probe.json"
    probe_path.write_text(json.dumps(plain))
    out = workdir / "queries.json"
    run_module(
        "bench.django_tasks",
        "queries",
        "--seed-file",
        str(probe_path),
        "--text-bytes",
        str(args.text_bytes),
        "--out",
        str(out),
        env=stack.env,
        timeout=300,
    )
    queries = dict(json.loads(out.read_text()))
    if turn is not None:
        probe_path.write_text(json.dumps(turn))
        run_module(
            "bench.django_tasks",
            "context",
            "--seed-file",
            str(probe_path),
            "--out",
            str(out),
            env=stack.env,
            timeout=300,
        )
        queries["context"] = json.loads(out.read_text())
    probe_path.unlink()
    return queries


def _cell(run: ProfileRun, cell: str, save: Callable[[], None]) -> dict[str, Any]:
    """One cell's results; a cell that fails is recorded as failed and the run goes on."""
    started = time.monotonic()
    function = CELL_FUNCTIONS.get(cell) or EXTRA_CELLS[cell]
    try:
        result = dict(function(run))
    except Exception as failed:  # a server that would not start, a load run that crashed
        print(f"==> {run.profile}: cell {cell} failed: {failed!r}", flush=True)
        result = {"error": repr(failed)[:2000]}
    result["wall_s"] = round(time.monotonic() - started, 1)
    save()
    return result


def bench_profile(
    profile: str,
    args: argparse.Namespace,
    workdir: Path,
    summary: dict[str, Any],
    save: Callable[[], None],
) -> dict[str, Any]:
    """Everything for one profile, filled into ``summary``: seed, statements, then each
    cell's alternating runs (saved after each cell: a run cut short keeps what it measured)."""
    print(f"==> {profile}: creating and migrating a throwaway database", flush=True)
    with provisioned(
        profile, workdir, debug=args.debug, keep=args.keep, settings=args.settings
    ) as stack:
        plain, turn = _seed(profile, stack, args, workdir)
        summary["queries"] = _in_process(profile, stack, args, workdir, plain, turn)
        summary["cells"] = {}
        save()
        profile_path = workdir / "synapsia.pyspy.txt" if args.pyspy else None
        summary["processes"] = args.processes
        if args.server_cpu is not None:
            stack.env[SERVER_CPU] = str(args.server_cpu)
        summary["server_cpu"] = args.server_cpu
        with (
            running_daphnes(
                stack.env,
                "bench.relay_asgi:application",
                workdir / "relay.log",
                processes=args.processes,
            ) as relay,
            running_daphnes(
                stack.env,
                "synapsia.asgi:application",
                workdir / "synapsia.log",
                processes=args.processes,
                profile_to=profile_path,
            ) as app,
        ):
            run = ProfileRun(profile, stack, args, plain, turn, relay, app)
            for cell in args.cells:
                if cell != "idle":  # idle starts fresh servers of its own, after these stop
                    summary["cells"][cell] = _cell(run, cell, save)
        if "idle" in args.cells:
            summary["cells"]["idle"] = _cell(run, "idle", save)
    if profile_path is not None and profile_path.exists():
        summary["pyspy_profile"] = str(profile_path)
        summary["pyspy_top"] = report.pyspy_top(profile_path)
    return summary


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _path(run: dict[str, Any], *path: str) -> float | None:
    value: Any = run
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return float(value) if isinstance(value, int | float) else None


def summarise(runs: list[dict[str, Any]], rate: str) -> dict[str, Any]:
    """Medians over rounds; the ratio is taken within each round (same noise), then median."""
    by_mode: dict[str, list[dict[str, Any]]] = {"relay": [], "synapsia": []}
    for run in runs:
        by_mode[run["mode"]].append(run)
    ratios = [
        s[rate] / b[rate]
        for b, s in zip(by_mode["relay"], by_mode["synapsia"], strict=False)
        if b[rate]
    ]
    latency = "latency_ms" if rate == "msg_per_s" else "turn_ms"

    def median(mode: str, *path: str) -> float | None:
        return _median([v for r in by_mode[mode] if (v := _path(r, *path)) is not None])

    rows = {}
    for name, mode in (("baseline", "relay"), ("synapsia", "synapsia")):
        rows[name] = {
            rate: median(mode, rate),
            "p50_ms": median(mode, latency, "p50"),
            "p99_ms": median(mode, latency, "p99"),
            "lost": sum(int(r["lost"]) for r in by_mode[mode]),
            "duplicates": sum(int(r["duplicates"]) for r in by_mode[mode]),
        }
        if rate == "msg_per_s":
            rows[name]["server_cpu_ms_per_msg"] = median(mode, "server_cpu_ms_per_msg")
            rows[name]["database_cpu_ms_per_msg"] = median(mode, "database_cpu_ms_per_msg")
        else:
            rows[name]["context_p50_ms"] = median(mode, "context_ms", "p50")
            rows[name]["context_p99_ms"] = median(mode, "context_ms", "p99")
            rows[name]["server_cpu_ms_per_turn"] = median(mode, "server_cpu_ms_per_turn")
            rows[name]["database_cpu_ms_per_turn"] = median(mode, "database_cpu_ms_per_turn")
    return rows | {"ratios": ratios, "ratio_median": _median(ratios)}


def summarise_idle(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians per target, and Synapsia's cost as a multiple of the relay's (median of the
    within-round multiples)."""
    by_mode: dict[str, list[dict[str, Any]]] = {"relay": [], "synapsia": []}
    for run in runs:
        by_mode[run["mode"]].append(run)
    keys = ("connect_s", "idle_cpu_share", "rss_mb")
    rows: dict[str, Any] = {
        name: {
            k: _median([v for r in by_mode[mode] if (v := _path(r, k)) is not None]) for k in keys
        }
        for name, mode in (("baseline", "relay"), ("synapsia", "synapsia"))
    }
    multiples: dict[str, float | None] = {}
    for key in keys:
        pairs = [
            s[key] / b[key]
            for b, s in zip(by_mode["relay"], by_mode["synapsia"], strict=False)
            if b.get(key) and s.get(key) is not None
        ]
        multiples[key] = _median(pairs)
    rows["multiples"] = multiples
    rows["errors"] = [e for r in runs for e in r.get("errors", [])][:10]
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    profiles = ["embedded", "services"] if args.profile == "both" else [args.profile]
    results: dict[str, Any] = {
        "command": shlex.join([Path(sys.executable).name, "-m", "bench", *sys.argv[1:]]),
        "started": stamp,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "load_avg_at_start": os.getloadavg(),
        },
        "settings": {k: v for k, v in vars(args).items() if k != "out_dir"},
        "profiles": {},
    }
    started = time.monotonic()
    out = args.out_dir / f"{stamp}.json"

    def save() -> None:
        results["partial"] = True
        out.write_text(json.dumps(results, indent=2, default=str))

    try:
        for profile in profiles:
            summary: dict[str, Any] = {}
            results["profiles"][profile] = summary
            try:
                bench_profile(profile, args, args.out_dir / stamp / profile, summary, save)
            except Exception as failed:  # seeding or a server start failed: next profile
                print(f"==> {profile}: failed: {failed!r}", flush=True)
                summary["error"] = repr(failed)[:2000]
            results["machine"][f"load_avg_after_{profile}"] = os.getloadavg()
            save()
    except KeyboardInterrupt:
        print("interrupted: servers stopped, throwaway databases removed", file=sys.stderr)
        return 130
    results["wall_s"] = round(time.monotonic() - started, 1)
    results["machine"]["load_avg_at_end"] = os.getloadavg()
    results["partial"] = False
    out.write_text(json.dumps(results, indent=2, default=str))
    print()
    print(report.final_table(results))
    print(f"\nresults: {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0

"""``python -m bench``: the full say path against a bare Channels relay, per profile.

For each profile: build a throwaway database, seed rooms through ``rooms.services``, count the
queries of the say path in-process, serve the relay (baseline) and the real app with Daphne,
and drive each in turn from a separate load-generator process, alternating for ``--rounds``
rounds so both see the same machine noise. Ratios are taken within a round, then the median.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import report
from bench.stack import ROOT, Server, Stack, provisioned, running_daphne


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
    parser.add_argument("--rooms", type=int, default=10, help="rooms (2 sockets each)")
    parser.add_argument(
        "--messages", type=int, default=20000, help="messages per run, across all sockets"
    )
    parser.add_argument("--duration", type=float, default=10.0, help="max seconds of sending")
    parser.add_argument("--drain", type=float, default=10.0, help="max seconds to drain")
    parser.add_argument("--rounds", type=int, default=2, help="baseline/synapsia alternations")
    parser.add_argument("--window", type=int, default=8, help="in-flight messages per socket")
    parser.add_argument(
        "--ack-every",
        type=int,
        default=32,
        help="ack after this many messages (the SDK: every 32 while busy, at once when idle)",
    )
    parser.add_argument("--text-bytes", type=int, default=200, help="size of each message text")
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
    parser.add_argument("--debug", action="store_true", help="SYNAPSIA_DEBUG=true on servers")
    parser.add_argument("--keep", action="store_true", help="keep the throwaway database")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "var" / "bench")
    args = parser.parse_args(argv)
    if args.rooms < 1 or args.messages < 2 * args.rooms or args.duration <= 0:
        parser.error("need --rooms >= 1, --messages >= 2 x rooms and --duration > 0")
    if args.duration > 120 or args.messages > 1_000_000:
        parser.error("keep runs bounded: --duration <= 120 and --messages <= 1,000,000")
    return args


def _python_module(module: str, *args: str, env: dict[str, str], timeout: float) -> None:
    command = [sys.executable, "-m", module, *args]
    done = subprocess.run(command, cwd=ROOT, env=env, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)} exited with {done.returncode}")


def load(
    stack: Stack,
    server: Server,
    mode: str,
    tag: str,
    seed: dict[str, Any],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One bounded load-generator run against ``server``; its JSON summary."""
    if mode == "relay":
        rooms = [
            {"urls": [f"ws://{server.host}/ws/relay/{i}/{side}/" for side in "ab"]}
            for i in range(args.rooms)
        ]
    else:
        rooms = [
            {
                "urls": [f"ws://{server.host}/ws/rooms/{room['room_id']}/"] * 2,
                "tokens": [agent["token"] for agent in room["agents"]],
            }
            for room in seed["rooms"]
        ]
    config = {
        "mode": mode,
        "tag": tag,
        "rooms": rooms,
        "messages": args.messages,
        "duration": args.duration,
        "drain": args.drain,
        "window": args.window,
        "ack_every": args.ack_every,
        "text_bytes": args.text_bytes,
        "server_pid": server.pid,
    }
    config_path = stack.workdir / f"{tag}-config.json"
    result_path = stack.workdir / f"{tag}-result.json"
    config_path.write_text(json.dumps(config))
    _python_module(
        "bench.loadgen",
        "--config",
        str(config_path),
        "--out",
        str(result_path),
        env=stack.env,
        timeout=args.duration + args.drain + 120,
    )
    config_path.unlink()  # it holds agent tokens (throwaway ones, but still)
    return dict(json.loads(result_path.read_text()))


def bench_profile(profile: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Everything for one profile: seed, queries, then alternating load runs."""
    print(f"==> {profile}: creating and migrating a throwaway database", flush=True)
    with provisioned(
        profile, workdir, debug=args.debug, keep=args.keep, settings=args.settings
    ) as stack:
        seed_path = workdir / "seed.json"
        print(f"==> {profile}: seeding {args.rooms} rooms through rooms.services", flush=True)
        _python_module(
            "bench.django_tasks",
            "seed",
            "--rooms",
            str(args.rooms),
            "--out",
            str(seed_path),
            env=stack.env,
            timeout=300,
        )
        seed = json.loads(seed_path.read_text())
        print(f"==> {profile}: counting queries per message (in-process)", flush=True)
        queries_path = workdir / "queries.json"
        _python_module(
            "bench.django_tasks",
            "queries",
            "--seed-file",
            str(seed_path),
            "--text-bytes",
            str(args.text_bytes),
            "--out",
            str(queries_path),
            env=stack.env,
            timeout=300,
        )
        queries = json.loads(queries_path.read_text())
        seed_path.unlink()
        profile_path = workdir / "synapsia.pyspy.txt" if args.pyspy else None
        runs: list[dict[str, Any]] = []
        with (
            running_daphne(stack, "bench.relay_asgi:application", workdir / "relay.log") as relay,
            running_daphne(
                stack,
                "synapsia.asgi:application",
                workdir / "synapsia.log",
                profile_to=profile_path,
            ) as app,
        ):
            for round_no in range(1, args.rounds + 1):
                for mode, server in (("relay", relay), ("synapsia", app)):
                    if args.only and mode != args.only:
                        continue
                    print(
                        f"==> {profile}: round {round_no}/{args.rounds}, {mode} on "
                        f"{server.host}: {args.rooms} rooms x 2 sockets, <= {args.messages} "
                        f"messages, <= {args.duration:g}s",
                        flush=True,
                    )
                    result = load(stack, server, mode, f"r{round_no}{mode[0]}", seed, args)
                    result["round"] = round_no
                    runs.append(result)
                    print("    " + report.run_line(result), flush=True)
    summary: dict[str, Any] = {"runs": runs, "queries": queries}
    if profile_path is not None and profile_path.exists():
        summary["pyspy_profile"] = str(profile_path)
        summary["pyspy_top"] = report.pyspy_top(profile_path)
    summary["summary"] = summarise(runs)
    return summary


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over rounds; the ratio is taken within each round (same noise), then median."""
    by_mode: dict[str, list[dict[str, Any]]] = {"relay": [], "synapsia": []}
    for run in runs:
        by_mode[run["mode"]].append(run)
    ratios = [
        s["msg_per_s"] / b["msg_per_s"]
        for b, s in zip(by_mode["relay"], by_mode["synapsia"], strict=False)
        if b["msg_per_s"]
    ]

    def median(mode: str, *path: str) -> float | None:
        values = []
        for run in by_mode[mode]:
            value: Any = run
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            if value is not None:
                values.append(float(value))
        return statistics.median(values) if values else None

    return {
        mode_name: {
            "msg_per_s": median(mode, "msg_per_s"),
            "p50_ms": median(mode, "latency_ms", "p50"),
            "p95_ms": median(mode, "latency_ms", "p95"),
            "p99_ms": median(mode, "latency_ms", "p99"),
            "server_cpu_ms_per_msg": median(mode, "server_cpu_ms_per_msg"),
            "lost": sum(r["lost"] for r in by_mode[mode]),
            "duplicates": sum(r["duplicates"] for r in by_mode[mode]),
        }
        for mode_name, mode in (("baseline", "relay"), ("synapsia", "synapsia"))
    } | {"ratios": ratios, "ratio_median": statistics.median(ratios) if ratios else None}


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
    try:
        for profile in profiles:
            results["profiles"][profile] = bench_profile(
                profile, args, args.out_dir / stamp / profile
            )
    except KeyboardInterrupt:
        print("interrupted: servers stopped, throwaway databases removed", file=sys.stderr)
        return 130
    results["wall_s"] = round(time.monotonic() - started, 1)
    results["machine"]["load_avg_at_end"] = os.getloadavg()
    out = args.out_dir / f"{stamp}.json"
    out.write_text(json.dumps(results, indent=2, default=str))
    print()
    print(report.final_table(results))
    print(f"\nresults: {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0

"""Formatting results: one line per run, the final table, and a py-spy profile summary."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

# Where server time goes, by the code a sampled stack passes through (inclusive shares).
PROFILE_BUCKETS: list[tuple[str, str]] = [
    ("Django ORM (django/db/models)", "django/db/models/"),
    ("DB driver execute (sqlite3/psycopg)", "django/db/backends/"),
    ("transaction.atomic", "django/db/transaction.py"),
    ("sync_to_async hops (asgiref/sync.py)", "asgiref/sync.py"),
    ("rooms.services.message_say", "message_say (rooms/services.py"),
    ("rooms.services.messages_ack", "messages_ack (rooms/services.py"),
    ("pydantic (frames in/out)", "pydantic"),
    ("rooms/protocol.py", "rooms/protocol.py"),
    ("channel layer (channels/layers, channels_redis)", "channels/layers.py|channels_redis/"),
    ("Twisted/autobahn (socket I/O, WS framing)", "twisted/|autobahn/"),
    ("daphne", "daphne/"),
    ("Django close_old_connections/signals", "django/db/__init__.py|django/dispatch/"),
]


def _fmt(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def run_line(run: dict[str, Any]) -> str:
    """A one-line account of one load run."""
    lat = run["latency_ms"]
    return (
        f"{run['mode']:8s} {run['msg_per_s']:7.0f} msg/s  delivered {run['delivered']}/"
        f"{run['sent']} in {run['elapsed_s']:.1f}s  p50 {_fmt(lat['p50'])} p95 "
        f"{_fmt(lat['p95'])} p99 {_fmt(lat['p99'])} ms  lost {run['lost']} dup "
        f"{run['duplicates']}  server CPU {_fmt(run['server_cpu_ms_per_msg'], '.2f')} ms/msg"
        + (f"  errors {run['errors'][:2]}" if run["errors"] else "")
    )


def final_table(results: dict[str, Any]) -> str:
    """The table printed at the end of ``python -m bench``."""
    lines = [
        f"{'profile':9s} {'target':9s} {'msg/s':>7s} {'p50 ms':>7s} {'p95 ms':>7s} "
        f"{'p99 ms':>7s} {'lost':>5s} {'dup':>4s} {'CPU ms/msg':>10s}",
    ]
    for profile, data in results["profiles"].items():
        summary = data["summary"]
        for target in ("baseline", "synapsia"):
            row = summary[target]
            lines.append(
                f"{profile:9s} {target:9s} {_fmt(row['msg_per_s'], '.0f'):>7s} "
                f"{_fmt(row['p50_ms']):>7s} {_fmt(row['p95_ms']):>7s} {_fmt(row['p99_ms']):>7s} "
                f"{row['lost']:>5d} {row['duplicates']:>4d} "
                f"{_fmt(row['server_cpu_ms_per_msg'], '.2f'):>10s}"
            )
        ratios = ", ".join(f"{r:.2f}" for r in summary["ratios"])
        queries = data["queries"]
        lines.append(
            f"{profile:9s} ratio synapsia/baseline: {_fmt(summary['ratio_median'], '.2f')} "
            f"(median of rounds: {ratios}; goal >= 0.50)"
        )
        lines.append(
            f"{profile:9s} queries/message: say {queries['say_queries_per_message']:.1f}, "
            f"ack {queries['ack_queries_per_message']:.1f} ({queries['vendor']}); in-process "
            f"message_say {queries['say_ms_median']:.2f} ms, messages_ack "
            f"{queries['ack_ms_median']:.2f} ms (medians)"
        )
        for label, share in data.get("pyspy_top", {}).get("buckets", [])[:8]:
            lines.append(f"{profile:9s}   py-spy {share:5.1f}%  {label}")
    lines.append("(medians over rounds; medians of per-message latency within each run)")
    return "\n".join(lines)


def pyspy_top(path: Path, limit: int = 25) -> dict[str, Any]:
    """Summarise py-spy's raw (collapsed) stacks: inclusive shares by bucket and by function."""
    total = 0
    buckets: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    leaf: collections.Counter[str] = collections.Counter()
    for line in path.read_text().splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack or not count_s.isdigit():
            continue
        count = int(count_s)
        total += count
        frames = stack.split(";")
        leaf[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
        for label, markers in PROFILE_BUCKETS:
            if any(m in stack for m in markers.split("|")):
                buckets[label] += count
    if total == 0:
        return {"samples": 0, "buckets": [], "inclusive": [], "self": []}

    def share(counter: collections.Counter[str]) -> list[tuple[str, float]]:
        return [(k, 100 * v / total) for k, v in counter.most_common(limit)]

    return {
        "samples": total,
        "buckets": sorted(share(buckets), key=lambda kv: -kv[1]),
        "inclusive": share(inclusive),
        "self": share(leaf),
    }

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


def _on_the_loop(ms: float | None) -> str:
    """The event loop's thread's share of the server CPU (the rest: its database threads)."""
    return "" if ms is None else f" ({ms:.2f} on the event loop's thread)"


def run_line(run: dict[str, Any]) -> str:
    """A one-line account of one load run."""
    lat = run["latency_ms"]
    return (
        f"{run['mode']:8s} {run['msg_per_s']:7.0f} msg/s  delivered {run['delivered']}/"
        f"{run['sent']} in {run['elapsed_s']:.1f}s  p50 {_fmt(lat['p50'])} p95 "
        f"{_fmt(lat['p95'])} p99 {_fmt(lat['p99'])} ms  lost {run['lost']} dup "
        f"{run['duplicates']}  server CPU {_fmt(run['server_cpu_ms_per_msg'], '.2f')} ms/msg"
        + _on_the_loop(run.get("server_loop_cpu_ms_per_msg"))
        + (
            f"  database CPU {run['database_cpu_ms_per_msg']:.2f} ms/msg"
            if run.get("database_cpu_ms_per_msg") is not None
            else ""
        )
        + (f"  errors {run['errors'][:2]}" if run["errors"] else "")
    )


def turn_line(run: dict[str, Any]) -> str:
    """A one-line account of one turn run."""
    ctx, turn = run["context_ms"], run["turn_ms"]
    return (
        f"{run['mode']:8s} {run['turns_per_s']:7.1f} turns/s  {run['turns']} turns in "
        f"{run['elapsed_s']:.1f}s  context p50 {_fmt(ctx['p50'])} p99 {_fmt(ctx['p99'])} ms  "
        f"turn p50 {_fmt(turn['p50'])} p99 {_fmt(turn['p99'])} ms  lost {run['lost']} dup "
        f"{run['duplicates']}"
        + (
            f"  server CPU {run['server_cpu_ms_per_turn']:.2f} ms/turn"
            + _on_the_loop(run.get("server_loop_cpu_ms_per_turn"))
            if run.get("server_cpu_ms_per_turn") is not None
            else ""
        )
        + (
            f"  database CPU {run['database_cpu_ms_per_turn']:.2f} ms/turn"
            if run.get("database_cpu_ms_per_turn") is not None
            else ""
        )
        + (
            f"  items cleared {run['context_items_min']}-{run['context_items_max']}"
            if run.get("context_items_min") is not None
            else ""
        )
        + (f"  errors {run['errors'][:2]}" if run["errors"] else "")
    )


def idle_line(run: dict[str, Any]) -> str:
    """A one-line account of one idle run."""
    return (
        f"{run['mode']:8s} {run['connected']}/{run['sockets']} sockets in "
        f"{run['connect_s']:.1f}s  RSS {_fmt(run['rss_mb'])} MB  idle CPU "
        f"{_fmt(run['idle_cpu_s'], '.2f')} s over {run['idle_s']:g}s "
        f"({_fmt(100 * run['idle_cpu_share'] if run['idle_cpu_share'] is not None else None)}% "
        f"of a core)"
        + _per_connect(run, "connect_cpu_s", "server")
        + _per_connect(run, "connect_database_cpu_s", "database")
        + (f"  errors {run['errors'][:2]}" if run["errors"] else "")
    )


def _per_connect(run: dict[str, Any], key: str, whose: str) -> str:
    value, connected = run.get(key), run.get("connected")
    if value is None or not connected:
        return ""
    return f"  {whose} CPU {1000 * value / connected:.2f} ms/connect"


def final_table(results: dict[str, Any]) -> str:
    """The table printed at the end of ``python -m bench``."""
    lines = [
        f"{'profile':9s} {'cell':18s} {'relay':>9s} {'Synapsia':>9s} {'ratio':>6s} "
        f"{'p50 ms':>13s} {'p99 ms':>13s} {'lost/dup':>9s}",
    ]
    for profile, data in results["profiles"].items():
        cells = data.get("cells", {})
        for cell in ("say", "turn"):
            for variant, body in cells.get(cell, {}).items():
                if not isinstance(body, dict) or "summary" not in body:
                    continue
                summary = body["summary"]
                rate = "msg_per_s" if cell == "say" else "turns_per_s"
                base, syn = summary["baseline"], summary["synapsia"]
                lines.append(
                    f"{profile:9s} {cell + ' ' + variant:18s} {_fmt(base[rate], '.1f'):>9s} "
                    f"{_fmt(syn[rate], '.1f'):>9s} {_fmt(summary['ratio_median'], '.2f'):>6s} "
                    f"{_fmt(base['p50_ms'], '.0f') + ' / ' + _fmt(syn['p50_ms'], '.0f'):>13s} "
                    f"{_fmt(base['p99_ms'], '.0f') + ' / ' + _fmt(syn['p99_ms'], '.0f'):>13s} "
                    f"{syn['lost']:>4d}/{syn['duplicates']:<4d}"
                )
                if cell == "turn":
                    lines.append(
                        f"{profile:9s}   context round trip p50/p99: relay "
                        f"{_fmt(base['context_p50_ms'])}/{_fmt(base['context_p99_ms'])} ms, "
                        f"Synapsia {_fmt(syn['context_p50_ms'])}/{_fmt(syn['context_p99_ms'])} ms"
                    )
        for variant, body in cells.get("idle", {}).items():
            if not isinstance(body, dict) or "summary" not in body:
                continue
            summary = body["summary"]
            base, syn, times = summary["baseline"], summary["synapsia"], summary["multiples"]
            lines.append(
                f"{profile:9s} idle {variant}: connect {_fmt(base['connect_s'])} / "
                f"{_fmt(syn['connect_s'])} s (x{_fmt(times['connect_s'], '.2f')}), RSS "
                f"{_fmt(base['rss_mb'], '.0f')} / {_fmt(syn['rss_mb'], '.0f')} MB "
                f"(x{_fmt(times['rss_mb'], '.2f')}), idle CPU "
                f"{_fmt(_pct(base['idle_cpu_share']))} / {_fmt(_pct(syn['idle_cpu_share']))}% "
                f"of a core (x{_fmt(times['idle_cpu_share'], '.2f')})"
            )
        queries = data.get("queries", {})
        if queries:
            lines.append(
                f"{profile:9s} statements: say alone "
                f"{queries['single_say_queries_per_message']:.1f}"
                f" ({queries['single_say_ms_median']:.2f} ms), message_say "
                f"{queries['say_queries_per_message']:.1f}, ack "
                f"{queries['ack_queries_per_message']:.1f} ({queries['vendor']})"
                + (
                    f"; context request {queries['context']['statements_per_request']:.0f} "
                    f"({queries['context']['items_cleared']} items, "
                    f"{queries['context']['ms_median']:.1f} ms; CPU "
                    f"{queries['context']['cpu_ms_median']:.1f} ms alone, "
                    f"{queries['context']['contended_ms_median']:.1f} ms beside a busy thread, "
                    f"{queries['context']['gil_handoffs_per_request']:.0f} GIL hand-offs)"
                    if "context" in queries
                    else ""
                )
            )
        for label, share in data.get("pyspy_top", {}).get("buckets", [])[:8]:
            lines.append(f"{profile:9s}   py-spy {share:5.1f}%  {label}")
    lines.append("(relay / Synapsia; medians over rounds; ratios within a round, then the median)")
    return "\n".join(lines)


def _pct(share: float | None) -> float | None:
    return None if share is None else 100 * share


def say_desk_line(hops: dict[str, Any]) -> str:
    """One line of a say run's desk hops (``cli.say_desk_hops_between``)."""
    return (
        f"  say desk: {hops['hops']} hops, {hops['frames_per_hop']:.1f} frames a hop; ms a hop: "
        f"queued {hops['queued_ms']:.2f}, run {hops['run_ms']:.2f} (CPU {hops['cpu_ms']:.2f}), "
        f"answered {hops['answered_ms']:.2f}"
    )


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

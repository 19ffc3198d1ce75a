"""``python -m bench.ledger``: ``verify_ledger`` against reading the same rows and hashing them.

For each profile: a throwaway database (a temporary SQLite file, or PostgreSQL database
``bench_ledger``), migrated; N events in R rooms generated with real chains (RFC 8785 bytes,
SHA-256 links, a head row and a signed head per room) and bulk-inserted (``executemany`` on
SQLite, ``COPY`` on PostgreSQL); then, alternated ``--rounds`` times in the same process:

- **floors**: read the rows in (room, seq) order with a plain DB-API cursor (server-side on
  PostgreSQL), SHA-256 each row's stored bytes and compare with its hash; once reading only
  the bytes and the hash (the least any verification must read), once the whole rows (every
  column verification checks against the bytes);
- **verify_ledger**: the management command, in-process, exactly as an operator runs it;
- on PostgreSQL also the bytes floor in the binary protocol (as verify_ledger reads there);
- **signatures**: every signed head's Ed25519 signature checked once, nothing else (work
  verify_ledger must do that the floor does not: one head per 64 events).

Ratios are taken within a round (same machine noise), then the median. Results as JSON in
``var/bench/ledger.json`` (one key per profile, merged with earlier runs of other profiles).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.stack import ROOT, _postgres_execute, base_env, run_checked

LEDGER_DATABASE = "bench_ledger"
LEDGER_DATABASE_URL = f"postgres://postgres@127.0.0.1:5432/{LEDGER_DATABASE}"
OUT = ROOT / "var" / "bench" / "ledger.json"
MAX_EVENTS = 2_000_000


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.ledger", description=__doc__)
    parser.add_argument("--profile", choices=["embedded", "services", "both"], default="embedded")
    parser.add_argument("--events", type=int, default=1_000_000, help="events in all")
    parser.add_argument("--rooms", type=int, default=1000, help="rooms they are spread over")
    parser.add_argument("--rounds", type=int, default=3, help="floor/verify alternations")
    parser.add_argument(
        "--recanonicalise",
        action="store_true",
        help="also time verify_ledger --recanonicalise once (the old way: RFC 8785 per row)",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 1 <= args.rooms <= args.events <= MAX_EVENTS or not 1 <= args.rounds <= 9:
        parser.error(f"need 1 <= --rooms <= --events <= {MAX_EVENTS:,} and 1 <= --rounds <= 9")
    return args


# --------------------------------------------------------------------------- the worker


def _say(text: str) -> None:
    print(f"    {text}", flush=True)


# Event data as the real records carry it (ledger.events), RFC 8785 text built directly: keys
# sorted, plain ASCII values. The worker checks a sample against rfc8785 before inserting.
_TEMPLATES: list[tuple[str, str]] = [
    ("join", '{{"participant_id":"agent-{i}","participant_kind":"agent"}}'),
    (
        "disclosure",
        '{{"item_id":"budget-{i}","owner_id":"owner-{r}","recipient_agent_id":"agent-{r}b",'
        '"turn":{i}}}',
    ),
    ("denial", '{{"resource_id":"item-{i}","rule":"slip.not_cleared","subject_id":"agent-{r}b"}}'),
    ("message", '{{"from_participant_id":"agent-{r}a","message_seq":{i},"text_bytes":200}}'),
]


def _generate(events: int, rooms: int) -> None:
    import uuid

    import rfc8785
    from django.conf import settings
    from django.db import connection, transaction

    from ledger.chain import GENESIS_HASH, envelope_suffix
    from ledger.models import LedgerHead, SignedHead
    from ledger.signing import ledger_sign_head, signed_head_build

    per_room, extra = divmod(events, rooms)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    heads: list[LedgerHead] = []
    # The heads the append path signs every N events: verification requires them.
    every = int(settings.SYNAPSIA.get("LEDGER_HEAD_EVERY_EVENTS", 64))
    signed: list[SignedHead] = []
    room_ids = [uuid.UUID(int=(n + 1) * 0x9E3779B97F4A7C15 % 2**128) for n in range(rooms)]
    vendor = connection.vendor
    began, written = time.monotonic(), 0
    sha256 = hashlib.sha256
    with transaction.atomic(), connection.cursor() as cursor:
        raw = cursor.cursor  # the DB-API cursor: no per-row Django overhead while loading
        copy = (
            contextlib.nullcontext()
            if vendor == "sqlite"
            else raw.copy(
                "COPY ledger_ledgerevent (room_id, seq, kind, occurred_at, data, prev_hash, "
                "hash, canonical) FROM STDIN"
            )
        )
        with copy as sink:
            for n, room_id in enumerate(room_ids):
                rid, prev, batch = str(room_id), GENESIS_HASH, []
                for seq in range(1, per_room + (1 if n < extra else 0) + 1):
                    kind, template = _TEMPLATES[seq % len(_TEMPLATES)]
                    data = template.format(i=seq, r=n)
                    when = start + timedelta(seconds=n, microseconds=seq * 997)
                    chain_at = when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
                    canonical = (
                        b'{"data":'
                        + data.encode()
                        + envelope_suffix(
                            kind=kind, occurred_at=chain_at, prev_hash=prev, room_id=rid, seq=seq
                        ).encode()
                    )
                    if written < 50:  # the shortcut above is RFC 8785: prove it on a sample
                        assert json.loads(data) and canonical == rfc8785.dumps(
                            {"room_id": rid, "seq": seq, "kind": kind, "occurred_at": chain_at,
                             "data": json.loads(data), "prev_hash": prev}
                        )  # fmt: skip
                    digest = sha256(canonical).hexdigest()
                    if vendor == "sqlite":
                        at = when.strftime("%Y-%m-%d %H:%M:%S.%f")
                        batch.append((room_id.hex, seq, kind, at, data, prev, digest, canonical))
                    else:
                        sink.write_row((room_id, seq, kind, when, data, prev, digest, canonical))  # type: ignore[union-attr]
                    prev = digest
                    written += 1
                    if seq % every == 0:
                        signed.append(
                            signed_head_build(
                                room_id=room_id, seq=seq, head_hash=digest, signed_at=chain_at
                            )
                        )
                if batch:
                    raw.executemany(
                        "INSERT INTO ledger_ledgerevent (room_id, seq, kind, occurred_at, data, "
                        "prev_hash, hash, canonical) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                        batch,
                    )
                heads.append(LedgerHead(room_id=room_id, seq=seq, hash=prev))
                if (n + 1) % max(rooms // 10, 1) == 0:
                    rate = written / max(time.monotonic() - began, 1e-9)
                    _say(f"generated {written:,}/{events:,} events ({rate:,.0f}/s)")
        LedgerHead.objects.bulk_create(heads, batch_size=1000)
        SignedHead.objects.bulk_create(signed, batch_size=1000)
    for room_id in room_ids:  # a signed head per room, as pausing or closing leaves one
        ledger_sign_head(room_id=room_id)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE ledger_ledgerevent" if vendor != "sqlite" else "ANALYZE")
    _say(f"loaded in {time.monotonic() - began:.1f}s")


_FLOORS = {
    # The stored bytes and their hash only: the least any verification must read.
    "bytes": "SELECT canonical, hash FROM ledger_ledgerevent ORDER BY room_id, seq",
    # The same rows as verify_ledger reads, every column it checks, as plain columns.
    "rows": "SELECT canonical, hash, room_id, seq, kind, occurred_at, data, prev_hash "
    "FROM ledger_ledgerevent ORDER BY room_id, seq",
}


class _Cpu:
    """CPU seconds of this process plus, on PostgreSQL, of its server backend (read from
    /proc: the server is on loopback). Less disturbed than wall time by a loaded machine."""

    def __init__(self) -> None:
        from django.db import connection

        self.backend: int | None = None
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                self.backend = int(cursor.fetchone()[0])

    def seconds(self) -> float:
        total = time.process_time()
        if self.backend is not None:
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{self.backend}/stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total


def _floor(which: str, cpu: _Cpu, *, binary: bool = False) -> tuple[float, float, int]:
    """Read the rows in (room, seq) order with a plain DB-API cursor (server-side on
    PostgreSQL) and SHA-256 each row's stored bytes, comparing with its stored hash.
    ``binary``: PostgreSQL's binary protocol (the stored bytes not sent as hex text), as
    verify_ledger reads them: the fairer floor for it there."""
    from django.db import connection, transaction

    sha256 = hashlib.sha256
    mismatched = rows = 0
    began, cpu_began = time.perf_counter(), cpu.seconds()
    with transaction.atomic() if connection.vendor != "sqlite" else contextlib.nullcontext():
        if binary:
            connection.ensure_connection()
            cursor: Any = connection.connection.cursor("bench_floor", binary=True)
        else:
            cursor = connection.chunked_cursor()
        try:
            cursor.execute(_FLOORS[which])
            while batch := cursor.fetchmany(10_000):
                rows += len(batch)
                for row in batch:
                    if sha256(row[0]).hexdigest() != row[1]:
                        mismatched += 1
        finally:
            cursor.close()
    elapsed, cpu_used = time.perf_counter() - began, cpu.seconds() - cpu_began
    if mismatched:
        raise RuntimeError(f"floor: {mismatched} rows do not hash to their stored hash")
    return elapsed, cpu_used, rows


def _signatures(cpu: _Cpu) -> tuple[float, float, int]:
    """Check every signed head's Ed25519 signature once (``signed_head_valid``), nothing
    else: the part of verify_ledger's work the read + SHA-256 floor does not include."""
    from ledger.models import SignedHead
    from ledger.verification import SignedHeadRow, signed_head_valid

    heads = [
        SignedHeadRow(*row)
        for row in SignedHead.objects.values_list(*SignedHeadRow._fields).iterator(10_000)
    ]
    began, cpu_began = time.perf_counter(), cpu.seconds()
    if not all(signed_head_valid(head) for head in heads):
        raise RuntimeError("a generated signed head does not verify")
    return time.perf_counter() - began, cpu.seconds() - cpu_began, len(heads)


def _verify(cpu: _Cpu, *flags: str) -> tuple[float, float]:
    """verify_ledger in-process: wall seconds and CPU seconds (see ``_Cpu``)."""
    from django.core.management import call_command

    out, err = io.StringIO(), io.StringIO()
    began, cpu_began = time.perf_counter(), cpu.seconds()
    call_command("verify_ledger", *flags, stdout=out, stderr=err)
    elapsed, cpu_used = time.perf_counter() - began, cpu.seconds() - cpu_began
    if "ledger intact" not in out.getvalue():
        raise RuntimeError(f"verify_ledger did not report an intact ledger:\n{out.getvalue()}")
    return elapsed, cpu_used


def worker(args: argparse.Namespace) -> dict[str, Any]:
    import django

    django.setup()
    from django.db import connection

    from ledger.models import LedgerEvent

    _say(f"generating {args.events:,} events in {args.rooms:,} rooms")
    _generate(args.events, args.rooms)
    assert LedgerEvent.objects.count() == args.events
    cpu = _Cpu()
    _floor("rows", cpu)  # warm the caches once, for all
    rounds: list[dict[str, Any]] = []
    for round_no in range(1, args.rounds + 1):
        bytes_s, bytes_cpu, rows = _floor("bytes", cpu)
        rows_s, rows_cpu, _ = _floor("rows", cpu)
        verify_s, verify_cpu = _verify(cpu)
        # PostgreSQL: the same floor in the binary protocol, which verify_ledger uses there.
        binary_s, binary_cpu, _ = (
            _floor("bytes", cpu, binary=True) if connection.vendor == "postgresql"
            else (bytes_s, bytes_cpu, rows)
        )  # fmt: skip
        signatures_s, signatures_cpu, heads = _signatures(cpu)
        rounds.append(
            {"signatures_s": signatures_s, "signatures_cpu_s": signatures_cpu,
             "signed_heads": heads,
             "cpu_ratio_floor_and_signatures": verify_cpu / (bytes_cpu + signatures_cpu),
             "floor_bytes_s": bytes_s, "floor_rows_s": rows_s, "verify_s": verify_s,
             "floor_bytes_cpu_s": bytes_cpu, "floor_rows_cpu_s": rows_cpu,
             "verify_cpu_s": verify_cpu, "ratio_bytes": verify_s / bytes_s,
             "ratio_rows": verify_s / rows_s, "cpu_ratio_bytes": verify_cpu / bytes_cpu,
             "floor_binary_s": binary_s, "floor_binary_cpu_s": binary_cpu,
             "ratio_binary": verify_s / binary_s, "cpu_ratio_binary": verify_cpu / binary_cpu,
             "load_avg": os.getloadavg()}
        )  # fmt: skip
        _say(
            f"round {round_no}/{args.rounds}: read + SHA-256 of (bytes, hash) {bytes_s:.2f}s "
            f"(cpu {bytes_cpu:.2f}s), of whole rows {rows_s:.2f}s; verify_ledger {verify_s:.2f}s "
            f"(cpu {verify_cpu:.2f}s): {verify_s / bytes_s:.2f}x wall, "
            f"{verify_cpu / bytes_cpu:.2f}x cpu; "
            + (
                f"binary-protocol floor {binary_s:.2f}s (cpu {binary_cpu:.2f}s): "
                f"{verify_cpu / binary_cpu:.2f}x cpu; "
                if connection.vendor == "postgresql"
                else ""
            )
            + f"the {heads:,} "
            f"signatures alone: cpu {signatures_cpu:.2f}s (load {os.getloadavg()[0]:.1f})"
        )
    result: dict[str, Any] = {
        "vendor": connection.vendor,
        "events": rows,
        "rooms": args.rooms,
        "rounds": rounds,
    } | {
        f"{key}_median": statistics.median(r[key] for r in rounds)
        for key in (
            "floor_bytes_s", "floor_rows_s", "verify_s", "floor_bytes_cpu_s", "verify_cpu_s",
            "ratio_bytes", "ratio_rows", "cpu_ratio_bytes", "floor_binary_s",
            "floor_binary_cpu_s", "ratio_binary", "cpu_ratio_binary", "signatures_cpu_s",
            "cpu_ratio_floor_and_signatures",
        )
    }  # fmt: skip
    if args.recanonicalise:
        seconds, _ = _verify(cpu, "--recanonicalise")
        result["recanonicalise_s"] = seconds
        _say(f"verify_ledger --recanonicalise (RFC 8785 per row): {seconds:.2f}s")
    return result


# --------------------------------------------------------------------------- the orchestrator


@contextlib.contextmanager
def _database(profile: str, workdir: Path) -> Any:
    env = base_env(False, "synapsia.settings")
    if profile == "embedded":
        env["SYNAPSIA_SQLITE_PATH"] = str(workdir / "ledger.sqlite3")
    else:
        env.update(
            DATABASE_URL=LEDGER_DATABASE_URL,
            REDIS_URL="redis://127.0.0.1:6379/12",
            SYNAPSIA_SECRET_KEY="bench-only-secret-key-for-a-throwaway-ledger-database",  # noqa: S106
            SYNAPSIA_SECURE_SSL_REDIRECT="false",
            SYNAPSIA_VAULT_KEY="YmVuY2gtb25seSB2YXVsdCBrZXksIDMyKyBieXRlcyBsb25nLi4=",
        )
        drop = f"DROP DATABASE IF EXISTS {LEDGER_DATABASE} WITH (FORCE)"
        _postgres_execute(drop, f"CREATE DATABASE {LEDGER_DATABASE}")
    # A throwaway signing key for the throwaway chains (both profiles).
    env["SYNAPSIA_LEDGER_SIGNING_KEY"] = "YmVuY2gtb25seSBsZWRnZXIgc2lnbmluZyBzZWVkISE="
    try:
        run_checked([sys.executable, "manage.py", "migrate", "--no-input", "-v0"], env, "migrate")
        yield env
    finally:
        if profile == "services":
            with contextlib.suppress(Exception):
                _postgres_execute(drop)


def run_profile(profile: str, args: argparse.Namespace) -> dict[str, Any]:
    print(f"==> ledger, {profile}: {args.events:,} events, {args.rounds} rounds", flush=True)
    with (
        tempfile.TemporaryDirectory(prefix="bench-ledger-") as tmp,
        _database(profile, Path(tmp)) as env,
    ):
        result_path = Path(tmp) / "result.json"
        command = [
            sys.executable, "-m", "bench.ledger", "--worker", "--result", str(result_path),
            "--events", str(args.events), "--rooms", str(args.rooms),
            "--rounds", str(args.rounds), *(["--recanonicalise"] if args.recanonicalise else []),
        ]  # fmt: skip
        # Bounded: generation is ~10-40 µs per event, each round a few seconds per 100k.
        limit = 300 + args.events * (0.0002 + 0.00005 * args.rounds)
        subprocess.run(command, cwd=ROOT, env=env, check=True, timeout=limit)
        return dict(json.loads(result_path.read_text()))


def measure(profile: str, args: argparse.Namespace) -> dict[str, Any]:
    """One profile's cell, recorded in ``args.out`` (merged with the other profile's)."""
    load_start = os.getloadavg()
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    result = run_profile(profile, args)
    result |= {"started": started, "load_avg_at_start": load_start,
               "load_avg_at_end": os.getloadavg(), "cpus": os.cpu_count()}  # fmt: skip
    previous = json.loads(args.out.read_text()) if args.out.exists() else {}
    previous[profile] = result
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(previous, indent=2))
    print(
        f"==> ledger, {profile}: {result['events']:,} events: verify_ledger "
        f"{result['verify_s_median']:.2f}s against read + SHA-256 of the stored bytes "
        f"{result['floor_bytes_s_median']:.2f}s: **{result['ratio_bytes_median']:.2f}x** "
        f"wall, {result['cpu_ratio_bytes_median']:.2f}x cpu (goal <= 2x; against the "
        f"binary-protocol floor {result['cpu_ratio_binary_median']:.2f}x cpu); whole rows "
        f"{result['floor_rows_s_median']:.2f}s ({result['ratio_rows_median']:.2f}x)",
        flush=True,
    )
    return result


def cell_ledger(run: Any) -> dict[str, Any]:
    """``python -m bench``'s ledger cell (a ``bench.cli.ProfileRun``): its own throwaway
    database, ``--ledger-events`` events in rooms of 1,000, three alternations."""
    events = int(run.args.ledger_events)
    args = argparse.Namespace(
        events=events, rooms=max(1, events // 1000), rounds=3, recanonicalise=False, out=OUT
    )
    return measure(run.profile, args)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        result = worker(args)
        args.result.write_text(json.dumps(result, indent=2))
        return 0
    for profile in ["embedded", "services"] if args.profile == "both" else [args.profile]:
        measure(profile, args)
    print(f"results: {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

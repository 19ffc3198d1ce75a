"""The fence's learned instruction flagger: a linear model over hashed word and character
n-grams, scored in pure Python (no numpy, no scikit-learn on the server path).

The model is trained offline by ``python -m bench.injections.train`` (fixed seed) on the
injection corpora already opened as tuning and on ordinary negotiation text, and exported to
``rooms/fence_model.json``: int16 weights (base64) with one scale, a bias, the threshold
chosen on training data, and reference scores the training run computed for a sample of
texts (the tests check this scorer reproduces them). See docs/untrusted.md, "The learned
flagger".

What it reads is the fence's clean text (NFKC, stripped), casefolded, every digit run
folded to one ``0`` (so times, prices and booking references are one feature each). Its
features are *presence* features: each distinct word, word pair, and character 4-gram
of the word sequence (with a space at each end) is hashed with CRC-32 into
``buckets`` bins; the set of bins hit is the feature vector, L2-normalised (each bin worth
``1/sqrt(k)`` for ``k`` distinct bins). So the score is
``bias + scale * sum(q[b] for b in bins) / sqrt(k)``: linear in the text's length to
compute, and the same number scikit-learn's ``decision_function`` gives on the same
quantised weights (a test checks it).

It is evidence for the owners like the rules, never a block: ``rooms.untrusted`` adds the
suspicion ``reads_as_instruction`` when the score reaches the threshold and no rule fired.
"""

from __future__ import annotations

import base64
import functools
import itertools
import json
import math
import re
import sys
import zlib
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

MODEL_PATH = Path(__file__).with_name("fence_model.json")
FORMAT = 1

_DIGITS = re.compile(r"\d+")
# Letters and digits; "_" and punctuation separate words (so snake_case tool names split).
_WORD = re.compile(r"[^\W_]+")
# Character 4-grams only: round 7's leave-one-round-out estimate put them a point below 3-, 4-
# and 5-grams together at a third of the grams hashed per message (the model file names its
# sizes, so an older file still scores as it was trained).
CHAR_NGRAMS: tuple[int, ...] = (4,)
# A text's features are taken from its first this many characters: the fence's own scan
# limit bounds the input anyway; this keeps one message's cost bounded below it.
MAX_CHARS = 16_384

_crc32 = zlib.crc32
# The kind tags of feature_strings() as CRC-32 seeds: crc32(b"w " + word) is
# crc32(word, _WORD_SEED), and crc32(b"b " + a + b" " + b) is crc32(b, crc32(a + b" ",
# _PAIR_SEED)).
_WORD_SEED = _crc32(b"w ")
_PAIR_SEED = _crc32(b"b ")


def _words(text: str) -> list[str]:
    return _WORD.findall(_DIGITS.sub("0", text[:MAX_CHARS].casefold()))


def feature_strings(text: str, char_ngrams: tuple[int, ...] = CHAR_NGRAMS) -> set[str]:
    """The distinct features of ``text`` as strings (tagged by kind, so a word and a
    character gram never share a name)."""
    words = _words(text)
    if not words:
        return set()
    features = {"w " + w for w in words}
    features.update("b " + a + " " + b for a, b in itertools.pairwise(words))
    joined = " " + " ".join(words) + " "
    for n in char_ngrams:
        features.update(joined[i : i + n] for i in range(len(joined) - n + 1))
    return features


def feature_buckets(
    text: str, buckets: int, char_ngrams: tuple[int, ...] = CHAR_NGRAMS
) -> set[int]:
    """The distinct hash bins ``text``'s features fall in (CRC-32: stable across runs and
    processes, unlike ``hash()``): exactly ``{crc32(f.encode("utf-8")) % buckets for f in
    feature_strings(text, char_ngrams)}``, computed without building the tagged strings.

    This runs on every peer message, so it hashes bytes, never builds a tagged string: a
    word's UTF-8 bytes are a piece of the word sequence's (a space never occurs inside a
    word or a multi-byte character); the tags are CRC-32 seeds (``crc32(b, crc32(a))`` is
    ``crc32(a + b)``); each distinct word and word pair is hashed once; and on ASCII or
    Latin-1 text a character gram is a byte slice, re-encoded only if it holds an accent.
    tests/rooms/test_fence_equivalence.py checks it against the string definition."""
    words = _words(text)
    if not words:
        return set()
    joined = " " + " ".join(words) + " "
    raw = joined.encode("utf-8")
    encoded = raw[1:-1].split(b" ")
    distinct = set(encoded)
    bins = {_crc32(word, _WORD_SEED) % buckets for word in distinct}
    # The seed of "b <a> ": each pair then costs one CRC-32 call over its second word.
    after = {word: _crc32(word + b" ", _PAIR_SEED) for word in distinct}
    bins.update(_crc32(b, after[a]) % buckets for a, b in set(itertools.pairwise(encoded)))
    if len(raw) == len(joined):
        single = raw  # ASCII: a character gram is its UTF-8 byte slice
    else:
        try:
            # Latin-1 is one byte per character too, and the same bytes as UTF-8 on ASCII:
            # a gram is sliced as bytes and only a gram holding an accent is re-encoded.
            single = joined.encode("latin-1")
        except UnicodeEncodeError:
            single = b""  # another script: the grams as strings
    for n in char_ngrams:
        if single:
            bins.update(
                _crc32(gram if gram.isascii() else gram.decode("latin-1").encode("utf-8")) % buckets
                for gram in {single[i : i + n] for i in range(len(single) - n + 1)}
            )
        else:
            texts = {joined[i : i + n] for i in range(len(joined) - n + 1)}
            bins.update(_crc32(gram.encode("utf-8")) % buckets for gram in texts)
    return bins


@dataclass(frozen=True, slots=True)
class FenceModel:
    buckets: int
    scale: float
    bias: float
    threshold: float
    weights: array  # int16, one per bucket
    trained_at: str  # the commit the training run started from, for the record
    char_ngrams: tuple[int, ...] = CHAR_NGRAMS

    def score(self, text: str) -> float:
        """The model's decision value for ``text`` (positive leans injection)."""
        bins = feature_buckets(text, self.buckets, self.char_ngrams)
        if not bins:
            return self.bias
        # Integer weights summed exactly, in any order: the same total as the training run's.
        total = sum(map(self.weights.__getitem__, bins))
        return self.bias + self.scale * total / math.sqrt(len(bins))

    def reads_as_instruction(self, text: str) -> bool:
        return self.score(text) >= self.threshold


def model_from_json(raw: str) -> FenceModel:
    """Parse an exported model; raises ``ValueError`` on anything malformed (a deploy bug:
    the file is committed, never user input)."""
    data = json.loads(raw)
    if data.get("format") != FORMAT:
        raise ValueError("unknown fence model format")
    buckets = int(data["buckets"])
    weights = array("h")
    weights.frombytes(base64.b64decode(data["weights_int16_le"], validate=True))
    if sys.byteorder != "little":
        weights.byteswap()
    if buckets <= 0 or len(weights) != buckets:
        raise ValueError("fence model weights do not match its bucket count")
    char_ngrams = tuple(int(n) for n in data.get("char_ngrams", CHAR_NGRAMS))
    if not all(1 <= n <= 8 for n in char_ngrams):
        raise ValueError("fence model character gram sizes out of range")
    return FenceModel(
        buckets=buckets,
        scale=float(data["scale"]),
        bias=float(data["bias"]),
        threshold=float(data["threshold"]),
        weights=weights,
        trained_at=str(data.get("trained_at", "")),
        char_ngrams=char_ngrams,
    )


@functools.cache
def load_model(path: Path = MODEL_PATH) -> FenceModel:
    """The committed model, read once per process (it is code, not a trust decision)."""
    return model_from_json(path.read_text(encoding="utf-8"))


def reference_checks(path: Path = MODEL_PATH) -> list[tuple[str, float]]:
    """The (text, score) pairs the training run recorded, for the tests."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return [(str(t), float(s)) for t, s in data["checks"]]


def export(
    *,
    weights: Iterable[int],
    buckets: int,
    scale: float,
    bias: float,
    threshold: float,
    trained_at: str,
    checks: list[tuple[str, float]],
    training: dict[str, object],
    char_ngrams: tuple[int, ...] = CHAR_NGRAMS,
) -> str:
    """The JSON text of a model (used by the training command)."""
    packed = array("h", weights)
    if len(packed) != buckets:
        raise ValueError("weights do not match the bucket count")
    if sys.byteorder != "little":
        packed.byteswap()
    return json.dumps(
        {
            "format": FORMAT,
            "buckets": buckets,
            "char_ngrams": list(char_ngrams),
            "scale": scale,
            "bias": bias,
            "threshold": threshold,
            "trained_at": trained_at,
            "training": training,
            "checks": [[t, s] for t, s in checks],
            "weights_int16_le": base64.b64encode(packed.tobytes()).decode("ascii"),
        },
        indent=1,
        ensure_ascii=False,
    )


__all__ = [
    "MODEL_PATH",
    "FenceModel",
    "export",
    "feature_buckets",
    "feature_strings",
    "load_model",
    "model_from_json",
    "reference_checks",
]

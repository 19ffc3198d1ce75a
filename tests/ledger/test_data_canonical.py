"""The batch append's canonical form of an event's data is RFC 8785's, byte for byte: the
fast path for flat objects of printable ASCII strings and safe integers, and rfc8785 for
everything else (issue 17). The stored bytes are hashed and verified, so any difference
would break a chain."""

from __future__ import annotations

from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.events import Denial, Disclosure
from ledger.services import _data_canonical

SAFE = 2**53 - 1
scalars = (
    st.text(max_size=12)
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.booleans()
    | st.none()
)
flat = st.dictionaries(st.text(max_size=8), scalars, max_size=8)
nested = st.dictionaries(
    st.text(max_size=4), st.lists(scalars, max_size=3) | st.dictionaries(st.text(), scalars)
)


def _rfc8785(data: dict[str, Any]) -> bytes | type[Exception]:
    try:
        return rfc8785.dumps(data)
    except Exception as refused:  # e.g. an integer beyond 2^53: refused by both
        return type(refused)


def _fast(data: dict[str, Any]) -> bytes | type[Exception]:
    try:
        return _data_canonical(data).encode()
    except Exception as refused:
        return type(refused)


@settings(max_examples=400, deadline=None)
@given(flat | nested)
def test_any_object_canonicalises_as_rfc8785_does(data: dict[str, Any]) -> None:
    assert _fast(data) == _rfc8785(data)


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"a": 'quote " and \\ backslash / slash <tag> &amp;'},
        {"b": 1, "a": 2, "B": 3, "_": 4, "~": 5, " ": 6},  # ASCII order, upper before lower
        {"n": SAFE, "m": -SAFE, "t": True, "f": False, "z": None, "e": ""},
        {"n": SAFE + 1},  # refused by RFC 8785, so by the fast path's fallback too
        {"tab": "a\tb", "nl": "a\nb", "nul": "\x00", "del": "\x7f"},
        {"é": "ü", "emoji": "🙂", "ls": "\u2028", "sur": "\ud800"},
        {"float": 1.5, "list": [1, "x"], "obj": {"k": "v"}},
    ],
)
def test_edge_cases_canonicalise_as_rfc8785_does(data: dict[str, Any]) -> None:
    assert _fast(data) == _rfc8785(data)


def test_a_turns_events_take_the_fast_path_and_match() -> None:
    events = [
        Disclosure(owner_id="12", item_id="a" * 32, recipient_agent_id="b" * 32, turn=7),
        Denial(rule="room_not_open", subject_id="c" * 32, resource_id="budget"),
    ]
    for event in events:
        data = event.model_dump(mode="json", exclude={"kind"})
        assert _data_canonical(data).encode() == rfc8785.dumps(data)

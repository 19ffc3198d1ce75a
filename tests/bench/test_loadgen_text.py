"""What the load generator's messages say (``python -m bench --text``)."""

from __future__ import annotations

from agents.negotiator import parse_move
from bench.loadgen import message_bodies

_MOVES = {"PROPOSE", "COUNTER", "ACCEPT", "NO_PLAN", "BOOKED", "NOT_BOOKED"}


def test_filler_is_xs_up_to_the_text_size_after_the_prefix() -> None:
    assert message_bodies({"text_bytes": 200}) == ["x" * 160]
    assert message_bodies({"text": "filler", "text_bytes": 10}) == [""]


def test_negotiation_text_is_the_reference_negotiators_own_messages() -> None:
    bodies = message_bodies({"text": "negotiation", "text_bytes": 200})
    assert len(bodies) > 100 and len(set(bodies)) > 100  # many, not one repeated
    # Each is a move of the grammar with its sentence for people, as a real agent says it
    # (the corpus's booking references are not slugs, so those lines are near-misses).
    assert all(body.split(" ", 1)[0] in _MOVES and "\n" in body for body in bodies)
    assert sum(parse_move(body) is not None for body in bodies) >= 0.9 * len(bodies)
    assert all(40 <= len(body.encode()) <= 300 for body in bodies)

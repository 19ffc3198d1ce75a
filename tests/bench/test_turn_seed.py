"""The turn cell's rooms: every turn of a run clears the same items (issue 17). The practice
slip's 100 uses ran out after 100 turns, so a fast run measured turns that cleared nothing;
the cell now seeds the most uses a slip may grant and refills them before each run."""

from __future__ import annotations

from uuid import UUID

import pytest

from bench.cli import TURNS_PER_ROOM
from bench.django_tasks import contended_context, refill_uses, seed_turn_rooms
from rooms.context import context_for_agent
from slips.capabilities import MAX_USES_LIMIT
from slips.models import SlipCapability

pytestmark = pytest.mark.django_db


def _sharing_uses(room_id: UUID) -> list[int]:
    return list(
        SlipCapability.objects.filter(
            slip__room_id=room_id, operation__in=("read", "disclose")
        ).values_list("uses_left", flat=True)
    )


def test_each_turn_clears_the_items_and_a_refill_restores_every_use() -> None:
    seeded = seed_turn_rooms(1)
    room = seeded["rooms"][0]
    room_id, host_agent = UUID(room["room_id"]), UUID(room["agents"][0]["agent_id"])
    assert TURNS_PER_ROOM < MAX_USES_LIMIT  # no record can run out within one run
    uses = _sharing_uses(room_id)
    assert uses and set(uses) == {MAX_USES_LIMIT}

    for _ in range(3):
        context = context_for_agent(room_id=room_id, agent_id=host_agent)
        assert len(context.own_items) + len(context.peer_items) >= 6
    spent = _sharing_uses(room_id)
    assert min(spent) == MAX_USES_LIMIT - 3  # each turn paid its uses

    refilled = refill_uses(seeded)
    assert refilled["records_refilled"] >= len(uses)
    assert set(_sharing_uses(room_id)) == {MAX_USES_LIMIT}
    # Tool records (asking per use) are not touched: only sharing counters are refilled.
    acts = SlipCapability.objects.filter(slip__room_id=room_id, operation="act")
    assert all(a.uses_left <= 3 for a in acts)


def test_the_contended_context_figure_is_of_real_turns() -> None:
    """The bench's in-process figure of a context request beside a busy thread (the event
    loop under load): the requests are real turns that clear the same items. How many GIL
    hand-offs they make is what is measured, not asserted: on two free cores SQLite's every
    step hands over, on one core (CI's other pass on the other) none need to."""
    seeded = seed_turn_rooms(1)
    room = seeded["rooms"][0]
    room_id, host_agent = UUID(room["room_id"]), UUID(room["agents"][0]["agent_id"])
    figures = contended_context(room_id, host_agent, turns=4)
    assert figures["contended_ms_median"] > 0
    assert "gil_handoffs_per_request" in figures  # reported; the counter is tested below
    # The requests were real turns: each paid its uses.
    assert min(_sharing_uses(room_id)) == MAX_USES_LIMIT - 4


def test_the_busy_thread_counts_a_request_that_keeps_the_gil(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The counter itself: a request that waits (the busy thread runs) and then works in
    Python for milliseconds (the busy thread cannot) is a hand-off the busy thread sees,
    on one core or two."""
    import time

    from rooms import context

    def waits_then_works(**_: object) -> None:
        # A real wait, long enough that the busy thread is scheduled and takes the GIL even on
        # a loaded machine (CI's two passes on two cores): with 2 ms it sometimes was not, the
        # request took the GIL back uncontended, and two requests' work made one gap (0.75).
        time.sleep(0.05)
        until = time.thread_time() + 0.003
        while time.thread_time() < until:  # the GIL kept, as a statement's Python work does
            pass

    monkeypatch.setattr(context, "context_for_agent", waits_then_works)
    figures = contended_context(UUID(int=1), UUID(int=2), turns=4)
    assert figures["gil_handoffs_per_request"] >= 1

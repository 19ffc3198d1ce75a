"""``make soak``'s own checks: its verdict is only as good as these.

Delivery is "exactly once, in order" only when what each agent was handed equals the peer's
stored messages: a doubled, a missing or a reordered message fails it. Memory is "flat" only
within the allowance after warm-up: a steady climb fails it, warm-up growth does not. A run
with any failed room, breach, unanswered say or growing process is a FAIL.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bench.soak import (
    Memory,
    RoomRun,
    RoomVerdict,
    judge,
    memory_verdict,
    summary,
)
from rooms import services
from tests.conftest import OpenRoom


def _talked(opened: OpenRoom) -> tuple[RoomRun, list[int], list[int]]:
    """Three messages from a, two from b; the run as if each agent was handed the other's."""
    from_a, from_b = [], []
    for n, seat in enumerate([opened.a, opened.b, opened.a, opened.b, opened.a]):
        said = services.message_say(
            room_id=opened.room.id, agent_id=seat.agent.id, client_id=f"c{n}", text=f"m{n}"
        )
        (from_a if seat is opened.a else from_b).append(said.seq)
    run = RoomRun(1, "chatter", str(opened.room.id), str(opened.a.agent.id), str(opened.b.agent.id))
    run.handed_out = {run.host_agent: list(from_b), run.guest_agent: list(from_a)}
    return run, from_a, from_b


@pytest.mark.django_db(transaction=True)
def test_delivery_counts_only_when_each_agent_was_handed_exactly_the_peers_messages(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    run, from_a, _ = _talked(make_open_room())
    verdict = judge(run)
    assert verdict.delivered_once and verdict.ledger_ok and verdict.messages == 5

    for handed in (
        [*from_a, from_a[-1]],  # one handed out twice
        from_a[:-1],  # one never handed out
        list(reversed(from_a)),  # out of order
    ):
        run.handed_out[run.guest_agent] = handed
        assert not judge(run).delivered_once, handed
    run.handed_out[run.guest_agent] = list(from_a)
    run.error = "TimeoutError: the room never finished"
    assert not judge(run).delivered_once


def _samples(values: list[float]) -> dict[str, list[tuple[float, float]]]:
    return {"daphne-1": [(2.0 * n, v) for n, v in enumerate(values)]}


def test_memory_is_flat_despite_warm_up_but_not_when_it_keeps_climbing() -> None:
    warm_then_steady = [100.0] * 4 + [130.0] * 12  # the first quarter grows: warm-up
    [steady] = memory_verdict(_samples(warm_then_steady))
    assert steady.flat and steady.growth_mib == 0

    climbing = [130.0 + 3.0 * n for n in range(16)]  # +3 MiB a sample, all along
    [leak] = memory_verdict(_samples(climbing))
    assert not leak.flat and leak.growth_mib > 16

    [too_short] = memory_verdict(_samples([130.0] * 5))  # not enough samples to tell
    assert not too_short.flat


def _verdict(**changes: object) -> RoomVerdict:
    fields: dict[str, object] = {
        "number": 1,
        "kind": "reference",
        "outcome": "booked",
        "messages": 3,
        "delivered_once": True,
        "ledger_ok": True,
        "refused": [],
        "unanswered": 0,
        "breaches": 0,
        "error": "",
    }
    fields.update(changes)
    return RoomVerdict(**fields)  # type: ignore[arg-type]


FLAT = Memory("daphne-1", 120, 130, 131, 1, True)


@pytest.mark.parametrize(
    "verdicts, memory",
    [
        ([_verdict(delivered_once=False)], [FLAT]),
        ([_verdict(ledger_ok=False)], [FLAT]),
        ([_verdict(kind="adversary", breaches=1)], [FLAT]),
        ([_verdict(unanswered=1)], [FLAT]),
        ([_verdict(error="TimeoutError")], [FLAT]),
        ([_verdict()], [Memory("worker", 8, 300, 400, 100, False)]),
        ([], [FLAT]),  # no room ran at all
    ],
    ids=["doubled", "ledger", "breach", "unanswered", "error", "memory", "nothing"],
)
def test_any_failed_check_fails_the_soak(verdicts: list[RoomVerdict], memory: list[Memory]) -> None:
    text, ok = summary(verdicts, memory, 60.0, "1.0 at the start, 1.0 at the end")
    assert not ok and "verdict: FAIL" in text


def test_a_clean_run_passes_and_the_table_says_why() -> None:
    verdicts = [
        _verdict(),
        _verdict(number=2, kind="adversary", outcome="host failed", refused=["policy.deny"]),
    ]
    text, ok = summary(verdicts, [FLAT], 60.0, "1.0 at the start, 1.0 at the end")
    assert ok and "verdict: PASS" in text
    assert "policy.deny 1" in text and "daphne-1" in text

"""After slow readers are closed (4408) the server gives the allocator's free pages back once
per wave of closes, after the last of them (rooms.limits.trim_after_slow_reader): the trim is
counted here, not timed, and no RSS is read."""

from __future__ import annotations

import asyncio

import pytest

from rooms import limits


def test_a_wave_of_slow_readers_gets_one_trim_after_its_last_close(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trims: list[float] = []
    monkeypatch.setattr(limits, "TRIM_DELAY_SECONDS", 0.05)

    async def waves() -> list[float]:
        loop = asyncio.get_running_loop()
        monkeypatch.setattr(limits, "_malloc_trim", lambda: trims.append(loop.time()))
        for _ in range(10):  # ten closes in a row: one trim, after the last
            limits.trim_after_slow_reader()
            # The loop turns between closes, but no time is given for the trim's delay to
            # pass: a loop stalled by a loaded machine cannot trim mid-wave (with 10 ms
            # between closes, a stall of 40 ms did once).
            await asyncio.sleep(0)
        last_close = loop.time()
        await asyncio.sleep(0.2)
        assert len(trims) == 1 and trims[0] >= last_close
        limits.trim_after_slow_reader()  # a later wave: a trim of its own
        await asyncio.sleep(0.2)
        return trims

    assert len(asyncio.run(waves())) == 2


def test_a_wave_that_never_ends_is_still_trimmed(monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[int] = []
    monkeypatch.setattr(limits, "TRIM_DELAY_SECONDS", 0.05)
    monkeypatch.setattr(limits, "TRIM_WAIT_MAX_SECONDS", 0.1)
    monkeypatch.setattr(limits, "_malloc_trim", lambda: trims.append(1))

    async def endless() -> None:
        for _ in range(30):  # a close every 20 ms: each would move the trim later
            limits.trim_after_slow_reader()
            await asyncio.sleep(0.02)

    asyncio.run(endless())
    assert trims  # not postponed past TRIM_WAIT_MAX_SECONDS after the first close

"""A server process's start-up heap, out of the cycle collector's reach."""

from __future__ import annotations

import gc


def start_up_heap_freeze() -> int:
    """Collect, then freeze every object the process holds (``gc.freeze``); how many.

    What start-up built (Django, the apps, their modules and settings) lives as long as the
    process. Left in the collector's reach, every full collection walked all of it
    mid-traffic: 54-70 ms with the event loop stopped (11 ms frozen; docs/benchmarks-log.md).
    Frozen, a full collection walks only what the server made since; frozen objects are
    still freed when nothing refers to them. Garbage is collected first, so none is kept.
    Call once, when the application is loaded and before it serves."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()

"""Fixtures shared by the record sweep's tests (``rooms.realtime.RecordSweep``)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connections

# Half of CATCH_UP_SECONDS: how often the sweep passes under ``fast_sweep``.
SWEEP_SECONDS = 0.1


@pytest.fixture
def fast_sweep(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep every ``SWEEP_SECONDS``, on connections kept between hops as the server
    keeps them (the test run's default closes them after every hop, so SQLite's record mark,
    which belongs to one connection, would never repeat and every sweep would read)."""
    settings.SYNAPSIA = {**settings.SYNAPSIA, "CATCH_UP_SECONDS": 2 * SWEEP_SECONDS}
    # Every thread's connection is made from this one settings dict.
    monkeypatch.setitem(connections["default"].settings_dict, "CONN_MAX_AGE", 600)

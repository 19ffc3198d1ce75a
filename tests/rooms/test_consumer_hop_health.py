"""A socket hop's database connection: Django's health check (``CONN_HEALTH_CHECKS``, a
``SELECT 1`` round trip) is made before a hop only on a connection that has been idle
(``rooms.consumers._Hop``). A connection killed while idle is found out and reopened before
the hop uses it; one that answered a moment ago is not asked again."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.db import Error as DatabaseError
from django.db import connection, connections

from rooms import consumers

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def _close() -> None:
    connection.close()


@pytest.fixture
def kept_connections(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Connections kept between hops (the test settings close them after each)."""
    monkeypatch.setitem(connections["default"].settings_dict, "CONN_MAX_AGE", 60)
    monkeypatch.setitem(connections["default"].settings_dict, "CONN_HEALTH_CHECKS", True)


# Every hop of a test on one thread, so on one kept connection.
_hop = consumers._Hop(_backend_pid, thread_sensitive=True)
_end = consumers._Hop(_close, thread_sensitive=True)


@pytest.fixture
def health_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts Django's health checks (the backend's ``is_usable``)."""
    made: list[int] = []
    klass = next(k for k in type(connections["default"]).__mro__ if "is_usable" in k.__dict__)
    original = klass.__dict__["is_usable"]

    def counted(self: Any) -> bool:
        made.append(1)
        return bool(original(self))

    monkeypatch.setattr(klass, "is_usable", counted)
    return made


def _terminate(pid: int) -> None:
    """From another connection (another thread's), closed afterwards."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    finally:
        connection.close()


_kill = database_sync_to_async(_terminate, thread_sensitive=False)


async def test_a_connection_that_just_answered_is_not_checked_again(
    kept_connections: Any, health_checks: list[int]
) -> None:
    try:
        first = await _hop()
        checks_after_first = len(health_checks)
        second = await _hop()
    finally:
        await _end()
    assert second == first  # the same connection, kept
    assert len(health_checks) == checks_after_first


async def test_a_connection_idle_past_the_limit_is_checked_and_a_dead_one_reopened(
    kept_connections: Any, health_checks: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    try:
        first = await _hop()
        monkeypatch.setattr(consumers, "HEALTH_CHECK_AFTER_IDLE_S", 0.0)
        await _kill(first)
        checks_before = len(health_checks)
        # The hop does not fail: the check finds the connection dead and a new one opens.
        second = await _hop()
    finally:
        await _end()
    assert len(health_checks) > checks_before
    assert second != first


async def test_a_kill_right_after_an_answer_fails_that_hop_and_the_next_reconnects(
    kept_connections: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trade made: within the limit the connection is trusted, so a kill in that
    moment fails the hop (the socket's database-unavailable path); the failure marks the
    connection, and the next hop checks it and reconnects."""
    monkeypatch.setattr(consumers, "HEALTH_CHECK_AFTER_IDLE_S", 3600.0)
    try:
        first = await _hop()
        await _kill(first)
        with pytest.raises(DatabaseError):
            await _hop()
        assert await _hop() != first
    finally:
        await _end()

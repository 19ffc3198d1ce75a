"""``statement_cursor``: one driver cursor kept per PostgreSQL connection for the code's raw
statements, behaving as Django's own cursor does (its errors, its query log, its health
check), never shared by two blocks at once, and made again for a new connection."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext

from synapsia.db.statements import statement_cursor

pytestmark = pytest.mark.django_db(transaction=True)

postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="PostgreSQL's kept cursor: runs in the services pass (pass 2) of make test",
)

ROWS = "SELECT n FROM generate_series(1, %s) AS n"


def _driver_cursor(wrapper: Any) -> Any:
    return wrapper.cursor  # Django's CursorWrapper holds the driver's


def _backend() -> tuple[int, Any]:
    """The server process answering this connection's statements, and the cursor used."""
    with statement_cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    return int(pid), _driver_cursor(cursor)


@pytest.mark.services
@postgresql_only
def test_statements_on_one_connection_share_one_driver_cursor() -> None:
    with statement_cursor() as first:
        first.execute(ROWS, [3])
        assert [n for (n,) in first.fetchall()] == [1, 2, 3]
    with statement_cursor() as second:
        second.execute("SELECT %s::text", ["two"])
        assert second.fetchone() == ("two",)
    assert _driver_cursor(first) is _driver_cursor(second)
    assert isinstance(_driver_cursor(second), psycopg.Cursor)


@pytest.mark.services
@postgresql_only
def test_a_block_inside_another_gets_a_cursor_of_its_own() -> None:
    with statement_cursor() as outer:
        outer.execute(ROWS, [3])
        with statement_cursor() as inner:
            inner.execute(ROWS, [5])
            assert len(inner.fetchall()) == 5
        # The outer block's rows are still its own, not the inner statement's.
        assert [n for (n,) in outer.fetchall()] == [1, 2, 3]
    assert _driver_cursor(inner) is not _driver_cursor(outer)
    assert _driver_cursor(inner).closed  # Django's cursor, closed as its block ended
    with statement_cursor() as after:  # and the kept one is free again
        after.execute(ROWS, [1])
        assert after.fetchall() == [(1,)]
    assert _driver_cursor(after) is _driver_cursor(outer)


@pytest.mark.services
@postgresql_only
def test_a_new_connection_gets_a_new_cursor() -> None:
    first_backend, before = _backend()
    connection.close()
    second_backend, after = _backend()
    assert after is not before
    assert after.connection is connection.connection
    assert second_backend != first_backend


@pytest.mark.services
@postgresql_only
def test_a_connection_that_died_while_idle_is_found_out_by_the_health_check() -> None:
    backend, _ = _backend()
    # Another session ends this one (a restart, a network cut, an idle timeout).
    with psycopg.connect(
        host="127.0.0.1", user="postgres", dbname=connection.settings_dict["NAME"]
    ) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [backend])
    connection.health_check_done = False  # type: ignore[attr-defined]  # a new hop, as _hop_work leaves it for an idle one
    now, _ = _backend()
    assert now != backend


@pytest.mark.services
@postgresql_only
def test_driver_errors_are_djangos_and_the_cursor_serves_on() -> None:
    with pytest.raises(DatabaseError), transaction.atomic(), statement_cursor() as cursor:
        cursor.execute("SELECT * FROM no_such_table_here")
    with pytest.raises(DatabaseError), transaction.atomic(), statement_cursor() as cursor:
        cursor.execute("SELECT 1 / %s", [0])
    with transaction.atomic(), statement_cursor() as cursor:
        cursor.execute(ROWS, [2])
        assert cursor.fetchall() == [(1,), (2,)]


@pytest.mark.services
@postgresql_only
def test_statements_are_in_the_query_log_as_djangos_are() -> None:
    with CaptureQueriesContext(connection) as captured, statement_cursor() as cursor:
        cursor.execute("SELECT %s::int + 1", [41])
        assert cursor.fetchone() == (42,)
    assert [q["sql"] for q in captured.captured_queries] == ["SELECT 41::int + 1"]


@pytest.mark.skipif(
    connection.vendor != "sqlite", reason="SQLite's own cursors: runs in pass 1 of make test"
)
def test_sqlite_gets_djangos_cursor_each_time() -> None:
    with statement_cursor() as first:
        first.execute("SELECT %s", [1])
        assert first.fetchone() == (1,)
    with statement_cursor() as second:
        second.execute("SELECT %s", [2])
        assert second.fetchone() == (2,)
    assert _driver_cursor(first) is not _driver_cursor(second)

"""A cursor for the code's own raw statements, kept with its connection (PostgreSQL).

Django's ``connection.cursor()`` makes a new driver cursor for every statement. On
PostgreSQL that is psycopg building a cursor (its adapters map, its encoding, its
transformer): ~20 us of CPU, a quarter of a one-row prepared statement's whole cost on the
server (measured in-process, thread CPU: a ``SELECT ... FOR UPDATE`` of one row 81 us
through ``connection.cursor()``, 62 us through Django's wrapper over one kept cursor). A turn
runs a dozen such statements. ``statement_cursor`` hands out Django's own wrapper (its
execute wrappers, its error translation, its query log for ``CaptureQueriesContext``) over one
driver cursor kept per connection: made again whenever the connection is new, and never
shared by two blocks at once (a block opened inside another gets a cursor of its own).

Only for statements whose rows are fetched inside the ``with`` block: the kept cursor's next
statement replaces what it held. SQLite's cursors cost next to nothing to make, and one left
holding an unfinished ``SELECT`` would keep its statement open: SQLite gets Django's cursor.
Nothing about a decision is kept: a cursor is a channel to the database, not an answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

# Attributes on Django's connection object (one per thread and alias).
_KEPT = "_synapsia_kept_cursor"
_IN_USE = "_synapsia_kept_cursor_in_use"


@contextmanager
def statement_cursor(using: str = DEFAULT_DB_ALIAS) -> Iterator[Any]:
    """A cursor (Django's ``CursorWrapper``) for statements fetched within the block."""
    db = connections[using]
    if db.vendor != "postgresql" or getattr(db, _IN_USE, False):
        with db.cursor() as cursor:
            yield cursor
        return
    # What ``connection.cursor()`` does before it makes a cursor: the health check the hop
    # asked for, a connection, and driver errors translated.
    db.close_if_health_check_failed()
    db.ensure_connection()
    kept = getattr(db, _KEPT, None)
    if kept is None or kept.closed or kept.connection is not db.connection:
        with db.wrap_database_errors:
            kept = db.create_cursor()
        setattr(db, _KEPT, kept)
    # Django's wrapper, as its own cursor gets: the debug one (the query log) when asked.
    db.validate_thread_sharing()
    wrapped = db.make_debug_cursor(kept) if db.queries_logged else db.make_cursor(kept)
    setattr(db, _IN_USE, True)
    try:
        yield wrapped
    finally:
        setattr(db, _IN_USE, False)


def rows_select(vendor: str, columns: Sequence[str], rest: str, *, ordered: bool = True) -> str:
    """``SELECT columns rest``; on SQLite, its rows as one row holding a JSON array of them
    (``rows_fetched`` reads either). Why: SQLite's driver lets go of the GIL for every row it
    steps, and our statements run on a database thread beside a busy event loop, which takes
    the GIL at each let-go; taking it back costs the statement's thread CPU and waiting (a
    context request's slips and vault items were 14 of its 27 hand-offs). ``ordered``: ``rest``
    orders the rows, and SQLite aggregates them from a subquery, in its order (it never
    flattens an ordered subquery into an aggregate); unordered, from ``rest`` itself, a step
    cheaper. A blob column must come as text on SQLite (JSON holds none): ``blob_column``.
    Only our own SQL is interpolated; values are the caller's parameters."""
    listed = ", ".join(columns)
    if vendor != "sqlite":
        return f"SELECT {listed} {rest}"
    if not ordered:
        return f"SELECT json_group_array(json_array({listed})) {rest}"
    named = ", ".join(f"{column} AS c{i}" for i, column in enumerate(columns))
    picked = ", ".join(f"c{i}" for i in range(len(columns)))
    return f"SELECT json_group_array(json_array({picked})) FROM (SELECT {named} {rest})"  # noqa: S608


def blob_column(vendor: str, column: str) -> str:
    """A blob column as ``rows_select`` can carry it: hex text on SQLite (NULL stays NULL),
    as it is elsewhere; ``blob_value`` reads either back."""
    return (
        f"CASE WHEN {column} IS NULL THEN NULL ELSE hex({column}) END"
        if vendor == "sqlite"
        else column
    )


def blob_value(value: Any) -> bytes:
    """A ``blob_column`` as read: bytes (or a memoryview) as the driver gave it, or hex."""
    return bytes.fromhex(value) if isinstance(value, str) else bytes(value)


def rows_fetched(cursor: Any, vendor: str) -> list[Sequence[Any]]:
    """The rows of a ``rows_select`` statement just executed on ``cursor``."""
    if vendor != "sqlite":
        return list(cursor.fetchall())
    return list(json.loads(cursor.fetchone()[0]))

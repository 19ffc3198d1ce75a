"""The embedded profile's SQLite backend rewrites placeholders as Django's does, once per text."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.backends.sqlite3.base import SQLiteCursorWrapper as DjangoCursor

from synapsia.db.sqlite3.base import SQLiteCursorWrapper, _named, _qmark

STATEMENTS = [
    "SELECT 1",
    "SELECT %s",
    "SELECT * FROM t WHERE a = %s AND b IN (%s, %s, %s)",
    "SELECT '100%%' || %s",
    "SELECT %%s, %s",  # a literal %s, then a placeholder
    "UPDATE t SET a = %s WHERE b LIKE '%%x%%' AND c = %s",
]


@pytest.mark.parametrize("statement", STATEMENTS)
def test_rewritten_as_djangos_own(statement: str) -> None:
    theirs = DjangoCursor.convert_query(None, statement)  # type: ignore[arg-type]
    assert SQLiteCursorWrapper.convert_query(None, statement) == theirs  # type: ignore[arg-type]


def test_named_parameters_as_djangos_own() -> None:
    statement = "SELECT %(a)s, %(b)s"
    theirs = DjangoCursor.convert_query(None, statement, param_names=["a", "b"])  # type: ignore[arg-type]
    ours = SQLiteCursorWrapper.convert_query(None, statement, param_names=["a", "b"])  # type: ignore[arg-type]
    assert ours == theirs == "SELECT :a, :b"


@pytest.mark.django_db
def test_the_connection_uses_it_and_binds_values_apart() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("the embedded profile's backend")
    _qmark.cache_clear()
    with connection.cursor() as cursor:
        assert isinstance(cursor.cursor, SQLiteCursorWrapper)
        for value in ("first", "second", "100%"):
            cursor.execute("SELECT %s, '5%%'", [value])
            assert cursor.fetchone() == (value, "5%")
    info = _qmark.cache_info()
    # One text rewritten once, whatever the values: the values are never part of the key.
    assert (info.misses, info.hits, info.currsize) == (1, 2, 1)


@pytest.mark.django_db
def test_named_parameters_are_rewritten_once_per_text_and_names() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("the embedded profile's backend")
    _named.cache_clear()
    with connection.cursor() as cursor:
        for value in ("first", "second"):
            cursor.execute("SELECT %(a)s, %(a)s || %(b)s", {"a": value, "b": "!"})
            assert cursor.fetchone() == (value, f"{value}!")
    info = _named.cache_info()
    assert (info.misses, info.hits, info.currsize) == (1, 1, 1)

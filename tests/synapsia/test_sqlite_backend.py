"""The embedded profile's SQLite backend rewrites placeholders as Django's does, once per text."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import NotSupportedError, connection
from django.db.backends.sqlite3.base import SQLiteCursorWrapper as DjangoCursor

from synapsia.db.sqlite3.base import DatabaseWrapper, SQLiteCursorWrapper, _named, _qmark

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


def test_an_sqlite_older_than_the_statements_need_is_refused_in_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's statements need SQLite 3.35 (RETURNING; UPDATE … FROM): an older library
    is refused on the first connection with what is needed and what was found, not a syntax
    error on the first say. The library here is newer, so the found version is faked."""
    wrapper = DatabaseWrapper(
        {**connection.settings_dict, "NAME": str(tmp_path / "old.sqlite3")}, alias="old-sqlite"
    )
    assert wrapper.features.minimum_database_version == (3, 35)
    monkeypatch.setattr(wrapper, "get_database_version", lambda: (3, 34, 1))
    with pytest.raises(
        NotSupportedError, match=r"SQLite 3\.35 or later is required \(found 3\.34\.1\)"
    ):
        wrapper.check_database_version_supported()
    monkeypatch.setattr(wrapper, "get_database_version", lambda: (3, 35, 0))
    wrapper.check_database_version_supported()  # enough: nothing raised

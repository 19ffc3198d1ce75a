"""``rows_select``: a statement's rows as the plain ``SELECT`` gives them, in its order, on
either database; on SQLite carried as one row of JSON (its driver lets go of the GIL for
each row it steps), with blobs as hex text that ``blob_value`` reads back exactly."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from synapsia.db.statements import blob_column, blob_value, rows_fetched, rows_select

pytestmark = pytest.mark.django_db

TEXTS = ["plain", 'quo"te\\ and \u00e9t\u00e9 \u2603', '["looks", "like", "json"]', "", None]
BLOBS = [bytes(range(256)), b"", b"\x00", None, b"\xff" * 3]


@pytest.fixture
def table() -> Iterator[str]:
    blob = "bytea" if connection.vendor == "postgresql" else "blob"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMPORARY TABLE rows_probe (n integer, t text, b {blob})")
        for n, (text, data) in enumerate(zip(TEXTS, BLOBS, strict=True)):
            # Inserted out of order: only the statement's ORDER BY gives the order read.
            cursor.execute(
                "INSERT INTO rows_probe (n, t, b) VALUES (%s, %s, %s)", [(n * 7) % 5, text, data]
            )
    yield "rows_probe"
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE rows_probe")


def _read(sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = rows_fetched(cursor, connection.vendor)
    return [(row[0], row[1], None if row[2] is None else blob_value(row[2])) for row in rows]


def test_the_rows_are_the_plain_selects_in_its_order(table: str) -> None:
    columns = ("n", "t", blob_column(connection.vendor, "b"))
    read = _read(rows_select(connection.vendor, columns, f"FROM {table} ORDER BY n DESC"))
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT n, t, b FROM {table} ORDER BY n DESC")  # noqa: S608
        plain = [(n, t, None if b is None else bytes(b)) for n, t, b in cursor.fetchall()]
    stored = [((n * 7) % 5, t, b) for n, (t, b) in enumerate(zip(TEXTS, BLOBS, strict=True))]
    assert read == plain == sorted(stored, key=lambda row: -row[0])


def test_no_rows_read_as_an_empty_list(table: str) -> None:
    columns = ("n", "t", blob_column(connection.vendor, "b"))
    sql = rows_select(connection.vendor, columns, f"FROM {table} WHERE n > %s ORDER BY n")
    assert _read(sql, [99]) == []


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's one row of JSON")
def test_sqlite_steps_one_row_whatever_the_count(table: str) -> None:
    columns = ("n", "t", blob_column(connection.vendor, "b"))
    with connection.cursor() as cursor:
        cursor.execute(rows_select(connection.vendor, columns, f"FROM {table} ORDER BY n"))
        assert len(cursor.fetchall()) == 1


def test_a_blob_value_reads_either_form() -> None:
    assert blob_value("00FF10") == b"\x00\xff\x10"
    assert blob_value(memoryview(b"\x01\x02")) == b"\x01\x02"
    assert blob_value(b"") == b""
    with pytest.raises(ValueError):
        blob_value("not hex")


def test_unordered_rows_are_the_plain_selects_too(table: str) -> None:
    columns = ("n", "t", blob_column(connection.vendor, "b"))
    read = _read(rows_select(connection.vendor, columns, f"FROM {table}", ordered=False))
    stored = [((n * 7) % 5, t, b) for n, (t, b) in enumerate(zip(TEXTS, BLOBS, strict=True))]
    assert sorted(read, key=lambda row: row[0]) == sorted(stored, key=lambda row: row[0])
    empty = rows_select(connection.vendor, columns, f"FROM {table} WHERE n > %s", ordered=False)
    assert _read(empty, [99]) == []

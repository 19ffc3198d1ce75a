"""The statements psycopg parses without keeping the parse.

psycopg turns a statement's ``%(name)s`` placeholders into PostgreSQL's ``$n`` and keeps that
parse only for a statement of at most 50 values and 4,096 bytes (``psycopg._queries``); past
either it parses the text again on every execute, in Python. The hot paths' statements must
stay within it (docs/benchmarks-log.md, "A statement psycopg parsed on every turn")."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection


@contextmanager
def uncached_parses() -> Iterator[list[bytes]]:
    """The texts psycopg parsed uncached within the block (PostgreSQL; skips elsewhere). It
    wraps psycopg's own converter: every statement is still parsed and run as it would be."""
    if connection.vendor != "postgresql":
        pytest.skip("psycopg's statement parse: the PostgreSQL pass")
    from psycopg import _queries

    uncached = _queries._query2pg_nocache
    seen: list[bytes] = []

    def spy(query: bytes, encoding: str) -> Any:
        seen.append(query)
        return uncached(query, encoding)

    _queries._query2pg_nocache = spy
    try:
        yield seen
    finally:
        _queries._query2pg_nocache = uncached

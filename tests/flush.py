"""How the test run empties the database after a transactional test: quicker, the same empty
tables.

A test marked ``django_db(transaction=True)`` (or using a live Daphne) commits for real, so
Django empties every table after it (``flush``) and then emits ``post_migrate``, whose handlers
make every content type and permission again (about 250 rows, built one by one in Python: a
quarter of a second a test, measured with cProfile). The content types and permissions are
what the migrations made, the same before and after every test (no test adds or removes one),
so the flush leaves them in place; the ``post_migrate`` handlers then find them all and add
nothing. Every other table is emptied as Django empties it (PostgreSQL: one ``TRUNCATE``, so a
table's rows come back in the order they were written, as some tests expect; ``DELETE`` was
quicker still, but rows written after it may come back in another order once vacuumed).

Nothing the application does is changed (it never flushes): only the pytest process's clean-up
between tests. ``tests/test_flush.py`` checks a flush still empties every other table.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.backends.postgresql import base as postgresql
from django.db.backends.sqlite3 import base as sqlite3

# What the migrations made and no test changes: kept through every flush.
KEPT = frozenset({"django_content_type", "auth_permission"})


def _keeping(original: Any) -> Any:
    def sql_flush(
        self: BaseDatabaseOperations, style: Any, tables: list[str], **options: Any
    ) -> list[str]:
        return list(original(self, style, [t for t in tables if t not in KEPT], **options))

    return sql_flush


def install() -> None:
    """Flush this process's connections as the module says."""
    for backend in (postgresql, sqlite3):
        operations = backend.DatabaseWrapper.ops_class
        operations.sql_flush = _keeping(operations.sql_flush)

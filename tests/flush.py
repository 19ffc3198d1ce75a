"""How the test run empties the database after a transactional test: quicker, the same empty
tables.

A test marked ``django_db(transaction=True)`` (or using a live Daphne) commits for real, so
Django empties every table after it (``flush``) and then emits ``post_migrate``, whose handlers
make every content type and permission again (about 250 rows, built one by one in Python:
a quarter of a second a test, measured with cProfile). Two changes, to the clean-up only:

* **The content types and permissions stay.** They are what the migrations made, the same
  before and after every test (no test adds or removes one), so they are left in place; the
  ``post_migrate`` handlers then find them all and add nothing.
* **PostgreSQL empties its tables with ``DELETE``, not ``TRUNCATE``.** One ``TRUNCATE`` of all
  50-odd tables makes new files for each table and index: about 0.15 s whatever the test
  wrote, where ``DELETE`` of the tests' few rows took 7 ms. Django makes PostgreSQL's foreign
  keys ``DEFERRABLE INITIALLY DEFERRED`` and ``flush`` runs in one transaction, so the order
  of the deletes does not matter: the keys are checked at its commit, when the tables are
  empty. (SQLite's flush already deletes.)

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


def _flushing(original: Any, *, delete: bool) -> Any:
    def sql_flush(
        self: BaseDatabaseOperations,
        style: Any,
        tables: list[str],
        *,
        reset_sequences: bool = False,
        allow_cascade: bool = False,
    ) -> list[str]:
        emptied = [table for table in tables if table not in KEPT]
        if not delete or reset_sequences:  # numbering restarted: TRUNCATE ... RESTART IDENTITY
            return list(
                original(
                    self,
                    style,
                    emptied,
                    reset_sequences=reset_sequences,
                    allow_cascade=allow_cascade,
                )
            )
        keyword, field = style.SQL_KEYWORD, style.SQL_FIELD
        return [f"{keyword('DELETE FROM')} {field(self.quote_name(table))};" for table in emptied]

    return sql_flush


def install() -> None:
    """Flush this process's connections as the module says."""
    for backend, delete in ((postgresql, True), (sqlite3, False)):
        operations = backend.DatabaseWrapper.ops_class
        operations.sql_flush = _flushing(operations.sql_flush, delete=delete)

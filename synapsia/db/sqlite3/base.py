"""Django's SQLite backend, with each statement's placeholder conversion done once, and
the SQLite it needs.

Django's SQLite cursor rewrites every statement's ``%s`` placeholders into sqlite3's ``?``
with a regular expression on every execute (and ``%(name)s`` into ``:name`` by formatting).
A turn runs the same few statements thousands of times, and that rewrite was ~2.5% of the
server's time per turn (py-spy, the bench's turn cell). The rewritten text is a pure
function of the statement's text (and its parameters' names), so it is remembered per text
(bounded: the texts are the code's own statements; the values are bound apart from them and
never part of the key).

The statements the server writes need SQLite 3.35 (``RETURNING``, on every say and connect;
``UPDATE … FROM``, 3.33, on a say hop). An older library is refused on the first connection,
with Django's own message (``SQLite 3.35 or later is required (found …)``), instead of
failing on the first say with a syntax error. Nothing else differs from Django's backend.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django.db.backends.sqlite3 import base, features

# Statement texts, not values: a few hundred distinct ones in the whole application (IN
# lists of different lengths included); the bound keeps a generated statement from growing it.
_CONVERTED_TEXTS = 2_048


@lru_cache(maxsize=_CONVERTED_TEXTS)
def _qmark(query: str) -> str:
    return base.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")


@lru_cache(maxsize=_CONVERTED_TEXTS)
def _named(query: str, param_names: tuple[str, ...]) -> str:
    return str(base.SQLiteCursorWrapper.convert_query(None, query, param_names=param_names))  # type: ignore[arg-type]


class SQLiteCursorWrapper(base.SQLiteCursorWrapper):
    def convert_query(self, query: str, *, param_names: Any = None) -> str:
        if param_names is None:
            return _qmark(query)
        return _named(query, tuple(param_names))


class DatabaseFeatures(features.DatabaseFeatures):
    minimum_database_version = (3, 35)


class DatabaseWrapper(base.DatabaseWrapper):
    features_class = DatabaseFeatures

    def create_cursor(self, name: Any = None) -> Any:
        return self.connection.cursor(factory=SQLiteCursorWrapper)

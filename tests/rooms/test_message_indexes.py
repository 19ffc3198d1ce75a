"""The message table's indexes: each is written for every message said, so none may be one
another already makes (rooms/migrations/0021)."""

from __future__ import annotations

import pytest
from django.db import connection

from rooms.models import Message

pytestmark = pytest.mark.django_db


def test_the_message_table_keeps_no_index_another_one_covers() -> None:
    """Every index is written for every message: none may be a leading part of another
    (the room's own index was, of the (room, seq) constraint's)."""
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, Message._meta.db_table)
    indexes = {
        name: tuple(c["columns"])
        for name, c in found.items()
        if (c["index"] or c["unique"]) and c["columns"]
    }
    covered = [
        (name, columns, other)
        for name, columns in indexes.items()
        if not found[name]["unique"] and not found[name]["primary_key"]
        for other, longer in indexes.items()
        if other != name and longer[: len(columns)] == columns and len(longer) > len(columns)
    ]
    assert covered == []
    assert ("room_id", "seq") in indexes.values()  # what serves every look-up by room

"""The tables' indexes: each is written with every row, so none may be one another already
makes (rooms 0021 and 0022, and the other apps' ``indexes_covered`` migrations). A partial
constraint or index covers only its rows: the index it shadows stays."""

from __future__ import annotations

from typing import Any

import pytest
from django.apps import apps
from django.db import connection

from rooms.models import Message

pytestmark = pytest.mark.django_db

# The project's own apps (Django's and the libraries' tables are theirs to keep).
OUR_APPS = {
    "artifacts", "dining", "gatekeeper", "ledger", "practice", "rooms", "slips", "stewards",
}  # fmt: skip


def _covered(model: Any) -> list[tuple[str, tuple[str, ...], str]]:
    """``(index, columns, the longer one)`` for each plain index of ``model``'s table whose
    columns lead another full (not partial) index or constraint."""
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, model._meta.db_table)
    partial = {
        c.name
        for c in [*model._meta.constraints, *model._meta.indexes]
        if getattr(c, "condition", None) is not None
    }
    indexes = {
        name: tuple(c["columns"])
        for name, c in found.items()
        if (c["index"] or c["unique"]) and c["columns"]
    }
    return [
        (name, columns, other)
        for name, columns in indexes.items()
        if not found[name]["unique"] and not found[name]["primary_key"]
        for other, longer in indexes.items()
        if other != name
        and other not in partial
        and longer[: len(columns)] == columns
        and len(longer) > len(columns)
    ]


def test_no_table_keeps_an_index_another_one_covers() -> None:
    models = [m for m in apps.get_models() if m._meta.app_label in OUR_APPS]
    assert len(models) > 30  # the check reads the real tables, not an empty list
    covered = {m._meta.label: found for m in models if (found := _covered(m))}
    assert covered == {}


def test_the_message_table_keeps_its_room_and_number_index() -> None:
    """What serves every look-up by room on the busiest table: the (room, seq) constraint."""
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, Message._meta.db_table)
    assert ("room_id", "seq") in [tuple(c["columns"]) for c in found.values() if c["unique"]]
    assert _covered(Message) == []


def test_a_partial_constraint_does_not_count_as_covering() -> None:
    """The grants' own room index stays: the constraint leading with the room covers only the
    open grants (a partial one), so the index still serves every other look-up by room."""
    grant = apps.get_model("gatekeeper", "Grant")
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, grant._meta.db_table)
    assert any(c["columns"] == ["room_id"] and c["index"] for c in found.values())
    assert _covered(grant) == []

"""The test run's clean-up after a transactional test (``tests/flush.py``) leaves every table
empty but the content types and permissions the migrations made, on both profiles: rows in
tables that refer to each other (a room, its seats, its agents, its ledger) included."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection

from rooms import services
from tests.flush import KEPT

pytestmark = pytest.mark.django_db(transaction=True)


def _rows() -> dict[str, int]:
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    with connection.cursor() as cursor:
        counted = {}
        for table in tables:
            cursor.execute(f"SELECT COUNT(*) FROM {connection.ops.quote_name(table)}")  # noqa: S608
            counted[table] = cursor.fetchone()[0]
    return counted


def test_a_flush_empties_every_table_but_the_content_types_and_permissions(
    make_open_room: Callable[..., Any],
) -> None:
    opened = make_open_room()
    services.message_say(
        room_id=opened.room.id, agent_id=opened.a.agent.id, client_id="m1", text="Hello"
    )
    kept = (ContentType.objects.count(), Permission.objects.count())
    assert kept[0] > 40 and kept[1] == 4 * kept[0]  # what the migrations made: all of it
    before = _rows()
    assert sum(1 for table, n in before.items() if n and table not in KEPT) >= 8

    # As Django's TransactionTestCase does after each test.
    call_command("flush", verbosity=0, interactive=False, reset_sequences=False)

    after = _rows()
    assert {table: n for table, n in after.items() if n and table not in KEPT} == {}
    assert (ContentType.objects.count(), Permission.objects.count()) == kept
    # The handlers after a flush found everything and added nothing.
    assert {table: after[table] for table in KEPT} == {table: before[table] for table in KEPT}

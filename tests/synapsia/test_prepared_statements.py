"""PostgreSQL runs the statements a turn repeats as prepared statements (synapsia/settings.py,
``SYNAPSIA_DB_PREPARE_THRESHOLD``): parsed and planned once per connection, not per execute."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connection

from rooms import context, services

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def _prepared() -> list[str]:
    """The statements this connection holds prepared (PostgreSQL's own view of the session)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def test_the_production_profile_binds_values_apart_and_prepares() -> None:
    options = settings.DATABASES["default"]["OPTIONS"]
    assert options["server_side_binding"] is True
    assert options["prepare_threshold"] == 5
    assert connection.vendor == "postgresql"


def test_a_turn_repeated_runs_on_prepared_statements(make_open_room) -> None:
    room = make_open_room()
    connection.ensure_connection()
    before = set(_prepared())
    for n in range(8):  # past the threshold: the same statements, on the same connection
        services.message_say(
            room_id=room.room.id, agent_id=room.b.agent.id, client_id=f"m-{n}", text=f"{n} pm?"
        )
        assembled = context.context_for_agent(room_id=room.room.id, agent_id=room.a.agent.id)
    assert len(assembled.peer_messages) == 8  # each turn still read the record afresh
    new = [s for s in _prepared() if s not in before]
    # The turn's facts statement and the say statement among them: what a turn repeats most.
    assert any("context_turn" in s for s in new), new
    assert any('INSERT INTO "rooms_message"' in s for s in new), new
    # Values travel apart from the SQL: the prepared text holds placeholders, not the text said.
    assert all("pm?" not in s for s in new)
    assert any("$1" in s for s in new)

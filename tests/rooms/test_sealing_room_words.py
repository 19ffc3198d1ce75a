"""The room's own words (purpose, charter) and its booked plan sealed at rest under the room's
data key (rooms 0015): ciphertext in the database, text through the model, refused when copied
to another room, and, once the room's key is destroyed, a row that still loads (its state) but
whose words fail closed. The migration seals going forward and writes back going back."""

from __future__ import annotations

import io
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from rooms.models import OutcomeKind, Room, RoomOutcome
from rooms.sealing import RoomContentRefused, SealedTextOnReadField, room_key_destroy
from slips.datakeys import DataKeyDestroyed
from tests.conftest import OpenRoom

pytestmark = pytest.mark.django_db(transaction=True)

CANARY = "room-words-canary-3e8b"
PLAN = {
    "venue_id": "osteria-kanal",
    "venue_name": f"Osteria {CANARY}",
    "starts_at": "2026-12-04T19:30:00+01:00",
    "time_zone": "Europe/Berlin",
    "party_size": 2,
    "price_per_person_minor": 4200,
    "currency": "EUR",
}


def _raw(table_model: Any, column: str, where: str, value: Any) -> str:
    q = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {q(column)} FROM {q(table_model._meta.db_table)} WHERE {q(where)} = %s",  # noqa: S608
            [table_model._meta.get_field(where).get_db_prep_value(value, connection)],
        )
        return str(cursor.fetchone()[0])


def _raw_set(table_model: Any, column: str, where: str, key: Any, value: str) -> None:
    q = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {q(table_model._meta.db_table)} SET {q(column)} = %s "  # noqa: S608
            f"WHERE {q(where)} = %s",
            [value, table_model._meta.get_field(where).get_db_prep_value(key, connection)],
        )


def _room_with_words(make_open_room: Callable[..., OpenRoom], prefix: str = "") -> OpenRoom:
    opened = make_open_room(purpose=f"Dinner {CANARY}", prefix=prefix)
    room = Room.objects.get(id=opened.room.id)
    room.charter = f"Be kind. {CANARY}"
    room.save(update_fields=["charter"])
    return opened


def _outcome(opened: OpenRoom, action: str = "00000000-0000-0000-0000-0000000000a1") -> Any:
    return RoomOutcome.objects.create(
        room=opened.room, action_id=action, kind=OutcomeKind.AGREED, owner=opened.a.owner,
        plan=PLAN,
    )  # fmt: skip


def test_purpose_charter_and_plan_are_ciphertext_at_rest_and_read_back(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    opened = _room_with_words(make_open_room)
    outcome = _outcome(opened)
    for column in ("purpose", "charter"):
        stored = _raw(Room, column, "id", opened.room.id)
        assert stored.startswith("rc1:") and CANARY not in stored
    stored_plan = _raw(RoomOutcome, "plan", "id", outcome.id)
    assert (
        stored_plan.startswith("rc1:")
        and CANARY not in stored_plan
        and "price_per_person_minor" not in stored_plan  # its key: ciphertext may hold 4200
    )

    room = Room.objects.get(id=opened.room.id)
    assert (room.purpose, room.charter) == (f"Dinner {CANARY}", f"Be kind. {CANARY}")
    assert str(room) == f"Dinner {CANARY}"
    # Through a related row and a deferred load too (the seat's room, only()).
    assert opened.a.owner.seats.select_related("room").get().room.purpose == f"Dinner {CANARY}"
    assert Room.objects.only("id").get(id=opened.room.id).charter == f"Be kind. {CANARY}"
    # The plan reads through the attribute names of before.
    loaded = RoomOutcome.objects.get(id=outcome.id)
    assert (loaded.venue_id, loaded.venue_name, loaded.party_size) == (
        "osteria-kanal",
        f"Osteria {CANARY}",
        2,
    )
    assert loaded.starts_at is not None and loaded.starts_at.isoformat() == PLAN["starts_at"]
    assert (loaded.price_per_person_minor, loaded.currency, loaded.time_zone) == (
        4200,
        "EUR",
        "Europe/Berlin",
    )
    # Saving the room for another column writes its words back unchanged (still sealed).
    room = Room.objects.get(id=opened.room.id)
    room.save(update_fields=["state"])
    before = _raw(Room, "purpose", "id", opened.room.id)
    Room.objects.get(id=opened.room.id).save()  # never read, so written as it was stored
    assert _raw(Room, "purpose", "id", opened.room.id) == before


def test_the_words_open_only_for_their_own_room(make_open_room: Callable[..., OpenRoom]) -> None:
    one, other = _room_with_words(make_open_room), make_open_room(prefix="o-")
    _outcome(one)
    _outcome(other, action="00000000-0000-0000-0000-0000000000a2")
    # A value copied into another room's row (a database edit) is refused where it is read.
    _raw_set(Room, "purpose", "id", other.room.id, _raw(Room, "purpose", "id", one.room.id))
    moved = Room.objects.get(id=other.room.id)  # the row still loads ...
    assert moved.state == "open"
    with pytest.raises(RoomContentRefused):
        _ = moved.purpose  # ... its words do not open
    # Copied into another column of the same room: the column is bound too.
    _raw_set(Room, "charter", "id", one.room.id, _raw(Room, "purpose", "id", one.room.id))
    with pytest.raises(RoomContentRefused):
        _ = Room.objects.get(id=one.room.id).charter
    one_plan = RoomOutcome.objects.get(room_id=one.room.id).id
    other_plan = RoomOutcome.objects.get(room_id=other.room.id).id
    _raw_set(RoomOutcome, "plan", "id", other_plan, _raw(RoomOutcome, "plan", "id", one_plan))
    with pytest.raises(RoomContentRefused):
        RoomOutcome.objects.get(id=other_plan)
    # A bare value never reaches the column (a queryset update).
    with pytest.raises(RoomContentRefused):
        Room.objects.filter(id=one.room.id).update(purpose="plain")


def test_a_destroyed_room_key_leaves_the_row_loadable_and_its_words_unreadable(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    opened = _room_with_words(make_open_room)
    _outcome(opened)
    room_key_destroy(opened.room.id)
    room = Room.objects.get(id=opened.room.id)
    assert room.state == "open"  # loading costs no key
    for column in ("purpose", "charter"):
        with pytest.raises(DataKeyDestroyed) as caught:
            getattr(room, column)
        assert "room's data key was destroyed" in caught.value.message
    with pytest.raises(DataKeyDestroyed):
        RoomOutcome.objects.get(room_id=opened.room.id)


def test_the_migration_seals_the_words_and_plan_going_forward_and_writes_them_back(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    opened = _room_with_words(make_open_room)
    no_agreement = RoomOutcome.objects.create(
        room=opened.room, action_id="00000000-0000-0000-0000-0000000000b1",
        kind=OutcomeKind.NO_AGREEMENT, owner=opened.b.owner, reasons={"1": "budget"},
    )  # fmt: skip
    agreed = _outcome(opened)
    q = connection.ops.quote_name
    outcomes = q(RoomOutcome._meta.db_table)
    try:
        call_command("migrate", "rooms", "0014", verbosity=0)
        assert _raw(Room, "purpose", "id", opened.room.id) == f"Dinner {CANARY}"
        assert _raw(Room, "charter", "id", opened.room.id) == f"Be kind. {CANARY}"
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT venue_id, venue_name, starts_at, party_size, price_per_person_minor, "  # noqa: S608
                f"currency, time_zone FROM {outcomes} WHERE id = %s",
                [agreed.id],
            )
            venue_id, venue_name, starts_at, party, price, currency, zone = cursor.fetchone()
            cursor.execute(f"SELECT venue_id FROM {outcomes} WHERE id = %s", [no_agreement.id])  # noqa: S608
            assert cursor.fetchone()[0] == ""
        assert (venue_id, venue_name, party, price, currency, zone) == (
            "osteria-kanal", f"Osteria {CANARY}", 2, 4200, "EUR", "Europe/Berlin",
        )  # fmt: skip
        assert starts_at is not None
        call_command("migrate", "rooms", verbosity=0)
        for column in ("purpose", "charter"):
            assert _raw(Room, column, "id", opened.room.id).startswith("rc1:")
        assert _raw(RoomOutcome, "plan", "id", agreed.id).startswith("rc1:")
    finally:
        call_command("migrate", verbosity=0)
    assert Room.objects.get(id=opened.room.id).purpose == f"Dinner {CANARY}"
    back = RoomOutcome.objects.get(id=agreed.id)
    # The same plan (the start at the same instant: the column of before kept it in UTC).
    assert {k: v for k, v in back.plan.items() if k != "starts_at"} == {
        k: v for k, v in PLAN.items() if k != "starts_at"
    }
    assert back.starts_at == datetime.fromisoformat(PLAN["starts_at"])
    assert RoomOutcome.objects.get(id=no_agreement.id).plan is None


def test_the_room_words_fields_name_their_columns_in_migrations() -> None:
    for name, sealed_as in (("purpose", "room.purpose"), ("charter", "room.charter")):
        field = Room._meta.get_field(name)
        assert isinstance(field, SealedTextOnReadField)
        _, path, _, kwargs = field.deconstruct()
        assert (path, kwargs["sealed_as"], kwargs["room_field"]) == (
            "rooms.sealing.SealedTextOnReadField",
            sealed_as,
            "id",
        )


def test_words_stored_before_sealing_read_as_they_are_until_the_command_seals_them(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    """A migrate Job without the key store leaves rows in plaintext: they read as they are,
    and ``seal_room_content`` seals them where the key store is mounted."""
    opened = make_open_room()
    outcome = _outcome(opened)
    _raw_set(Room, "purpose", "id", opened.room.id, f"Legacy {CANARY}")
    _raw_set(RoomOutcome, "plan", "id", outcome.id, '{"venue_name": "Legacy Osteria"}')
    assert Room.objects.get(id=opened.room.id).purpose == f"Legacy {CANARY}"
    assert RoomOutcome.objects.get(id=outcome.id).venue_name == "Legacy Osteria"

    call_command("seal_room_content", stdout=io.StringIO())
    stored = _raw(Room, "purpose", "id", opened.room.id)
    assert stored.startswith("rc1:") and CANARY not in stored
    assert _raw(RoomOutcome, "plan", "id", outcome.id).startswith("rc1:")
    assert Room.objects.get(id=opened.room.id).purpose == f"Legacy {CANARY}"
    assert RoomOutcome.objects.get(id=outcome.id).venue_name == "Legacy Osteria"

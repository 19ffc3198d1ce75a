"""The rooms page of an owner who has used Synapsia for a long time: what it reads does not grow
with the rooms they have had (the outcomes, seats and waiting counts of the rooms shown are
read together, not room by room), every room not closed is listed, and the closed ones are
listed newest first, a page at a time, with a way to the older ones in words."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from frontend import views
from frontend.views import CLOSED_ROOMS_PER_PAGE
from rooms import services
from rooms.models import OutcomeKind, Room, RoomOutcome, RoomState
from tests.frontend.test_dashboard import client_for, visible_text

pytestmark = pytest.mark.django_db

PLAN = {
    "venue_id": "osteria-kanal",
    "venue_name": "Osteria Kanal",
    "starts_at": "2026-12-04T18:30:00+00:00",
    "time_zone": "Europe/Berlin",
    "party_size": 2,
    "price_per_person_minor": 3800,
    "currency": "EUR",
}


def _rooms(alice: Any, bob: Any, closed: int, *, start: int = 0) -> list[Room]:
    """``closed`` closed rooms shared with Bob, every third agreed, every third no agreement
    (each side's reason), the rest without an outcome; then one draft and one open room."""
    made = []
    for n in range(start, start + closed):
        room = services.room_create(owner=alice, purpose=f"Dinner number {n:03d}", charter="")
        invite = services.invite_create(owner=alice, room_id=room.id)
        services.invite_accept(owner=bob, token=invite.token)
        if n % 3 == 0:
            RoomOutcome.objects.create(
                room=room, action_id=uuid.uuid4(), kind=OutcomeKind.AGREED, owner=bob, plan=PLAN
            )
        elif n % 3 == 1:
            reasons = {str(alice.pk): "time", str(bob.pk): "budget"}
            RoomOutcome.objects.create(
                room=room,
                action_id=uuid.uuid4(),
                kind=OutcomeKind.NO_AGREEMENT,
                owner=alice,
                reasons=reasons,
            )
        made.append(services.room_transition(owner=alice, room_id=room.id, to=RoomState.CLOSED))
    return made


def _statements(client: Any, path: str = "/") -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(path).status_code == 200
    return len(captured)


def test_what_the_page_reads_does_not_grow_with_the_rooms(make_owner: Any) -> None:
    alice, bob = make_owner("alice"), make_owner("bob")
    client = client_for(alice)
    _rooms(alice, bob, 3)
    client.get("/")  # the session and the first look-ups of the process out of the way
    few = _statements(client)
    _rooms(alice, bob, 2 * CLOSED_ROOMS_PER_PAGE, start=3)
    many = _statements(client)
    assert many == few, f"{few} statements with 3 rooms, {many} with more"
    assert _statements(client, "/?closed=2") == few


def test_open_rooms_all_show_and_closed_ones_a_page_at_a_time(make_owner: Any) -> None:
    alice, bob = make_owner("alice"), make_owner("bob")
    per_page = CLOSED_ROOMS_PER_PAGE
    _rooms(alice, bob, per_page + 3)
    open_room = services.room_create(owner=alice, purpose="Lunch on Sunday", charter="")
    client = client_for(alice)

    first = visible_text(client.get("/").content.decode())
    assert "Lunch on Sunday" in first  # not closed: always listed
    newest = per_page + 2
    assert f"Dinner number {newest:03d}" in first
    assert f"Dinner number {newest - per_page + 1:03d}" in first
    assert f"Dinner number {newest - per_page:03d}" not in first
    assert f"Closed rooms 1 to {per_page} of {per_page + 3}, newest first." in first
    assert "Older closed rooms" in first and "Newer closed rooms" not in first
    # Outcomes read together still say each room's own.
    assert "Outcome: Agreed plan: Osteria Kanal, Friday 4 December 2026 at 19:30" in first
    assert "Outcome: No agreement." in first

    second = visible_text(client.get("/?closed=2").content.decode())
    assert "Lunch on Sunday" in second
    assert f"Dinner number {newest - per_page:03d}" in second and "Dinner number 000" in second
    assert f"Dinner number {newest:03d}" not in second
    last = per_page + 3
    assert f"Closed rooms {per_page + 1} to {last} of {last}, newest first." in second
    assert "Newer closed rooms" in second and "Older closed rooms" not in second

    # A page past the end, or not a number, is the nearest page there is.
    assert "Dinner number 000" in visible_text(client.get("/?closed=99").content.decode())
    assert f"Dinner number {newest:03d}" in visible_text(client.get("/?closed=x").content.decode())
    assert Room.objects.filter(id=open_room.id, state=RoomState.DRAFT).exists()


def test_one_room_on_a_page_is_said_as_one_and_a_room_nobody_joined_says_so(
    make_owner: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(views, "CLOSED_ROOMS_PER_PAGE", 2)
    alice, bob = make_owner("alice"), make_owner("bob")
    _rooms(alice, bob, 2)
    alone = services.room_create(owner=alice, purpose="Lunch on Sunday", charter="")
    services.room_transition(owner=alice, room_id=alone.id, to=RoomState.CLOSED)
    client = client_for(alice)
    newest = visible_text(client.get("/").content.decode())
    assert "Closed rooms 1 to 2 of 3, newest first." in newest
    assert "Lunch on Sunday Closed Ended. No other owner joined" in newest
    assert "Waiting for the other owner" not in newest
    oldest = visible_text(client.get("/?closed=2").content.decode())
    assert "Closed room 3 of 3, newest first." in oldest and "Dinner number 000" in oldest


def test_with_few_closed_rooms_there_is_no_paging(make_owner: Any) -> None:
    alice, bob = make_owner("alice"), make_owner("bob")
    _rooms(alice, bob, 2)
    text = visible_text(client_for(alice).get("/").content.decode())
    assert "Dinner number 000" in text and "Dinner number 001" in text
    assert "Closed rooms" in text  # their own heading
    assert "newest first" not in text and "Older closed rooms" not in text

"""The operator's dashboard: aggregates only, small counts suppressed, no room content."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from rooms import flares
from rooms.models import FlareReason
from stewards.exit_notes import exit_note_leave_as_owner

pytestmark = pytest.mark.django_db


def test_themes_show_from_three_rooms_and_never_the_notes_words(
    closed_room: Any, staff: Any
) -> None:
    rooms = [closed_room(prefix=f"r{i}-") for i in range(4)]
    for setup in rooms[:3]:
        exit_note_leave_as_owner(
            owner=setup.a.owner,
            room_id=setup.room.id,
            themes=["reached_plan"],
            text="secret-note-words",
        )
    # Two rooms name this theme, both sides each: still two rooms, so suppressed.
    for setup in rooms[3:]:
        for owner in (setup.a.owner, setup.b.owner):
            exit_note_leave_as_owner(
                owner=owner, room_id=setup.room.id, themes=["took_too_long"], text=""
            )
    exit_note_leave_as_owner(
        owner=rooms[0].b.owner, room_id=rooms[0].room.id, themes=["took_too_long"], text=""
    )
    client = Client()
    client.force_login(staff)
    page = client.get("/operator/").content.decode()
    table = page.split("Rooms per exit-note theme and week")[1].split("</table>")[0]
    reached = table.split("We reached a plan")[1].split("</tr>")[0]
    assert "3 rooms" in reached
    slow = table.split("It took too long")[1].split("</tr>")[0]
    assert "2 rooms" not in slow and "fewer than 3" in slow
    assert "secret-note-words" not in page
    assert "Closed" in page and "4 rooms" in page  # rooms by state
    assert 'style="' not in page and "<script>" not in page
    for setup in rooms:
        assert str(setup.room.id) not in page and setup.room.purpose not in page


def test_flares_and_refusals_by_rule_are_in_words(make_open_room: Any, staff: Any) -> None:
    rooms = [make_open_room(prefix=f"f{i}-") for i in range(3)]
    for setup in rooms:
        flares.flare_raise(
            room_id=setup.room.id,
            agent_id=setup.a.agent.id,
            reason=FlareReason.LOOP,
            raised_by="server",
        )
    client = Client()
    client.force_login(staff)
    page = client.get("/operator/").content.decode()
    flares_part = page.split("Signal Flares by reason")[1].split("</section>")[0]
    assert re.search(r"Stuck in a loop</th><td>\s*3 rooms", flares_part)
    assert "Database: Answering" in page
    assert "beyond_slip" not in page and "flare.loop" not in page


def test_refusals_are_counted_by_rule_in_words_and_small_ones_suppressed(
    make_open_room: Any, staff: Any
) -> None:
    from django.db import transaction

    from ledger.events import Denial
    from ledger.services import ledger_append

    rooms = [make_open_room(prefix=f"d{i}-") for i in range(3)]
    for index, setup in enumerate(rooms):
        with transaction.atomic():
            for _ in range(2):  # two refusals in one room still count one room
                ledger_append(
                    room_id=setup.room.id,
                    event=Denial(rule="catalogue.closed", subject_id=str(setup.a.agent.id)),
                )
            if index == 0:
                ledger_append(
                    room_id=setup.room.id,
                    event=Denial(rule="catalogue.no_table", subject_id=str(setup.a.agent.id)),
                )
    client = Client()
    client.force_login(staff)
    page = client.get("/operator/").content.decode()
    refusals = page.split("Rooms with a refusal, by rule")[1].split("</table>")[0]
    assert re.search(
        r"The venue is not open for the whole dinner at that time\.</th><td>\s*3 rooms", refusals
    )
    assert re.search(r"The venue has no table for that many people\.</th><td>\s*fewer", refusals)
    assert "catalogue." not in page

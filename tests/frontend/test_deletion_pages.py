"""The pages of what cannot be undone (Django test client): closing asks first; deleting a
room says what goes and what stays, then deletes it for both sides and tells the other owner
on their rooms page; deleting an account asks for the password; every room page and the
settings page show the retention schedule as applied."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from rooms import services
from rooms.models import Message, Room, RoomDeletionNotice, RoomState
from tests.conftest import OpenRoom
from tests.frontend.browser import codes_in
from tests.frontend.test_room_page import visible

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _journal(tmp_path: Path, settings: Any) -> None:
    settings.SYNAPSIA = {
        **settings.SYNAPSIA,
        "DELETION_JOURNAL_PATH": str(tmp_path / "deletions.jsonl"),
    }


def client_of(owner: Any) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def test_close_goes_through_a_confirmation_that_says_it_cannot_be_undone(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    opened = make_open_room()
    alice = client_of(opened.a.owner)
    room_page = alice.get(f"/rooms/{opened.room.id}/").content.decode()
    # The room page's Close is a link to the confirmation, not a one-click POST.
    assert f'href="/rooms/{opened.room.id}/close/"' in room_page
    assert 'value="closed"' not in room_page
    confirm = alice.get(f"/rooms/{opened.room.id}/close/")
    text = visible(confirm.content.decode())
    assert "Closing cannot be undone" in text and "cannot be reopened" in text
    assert "kept 30 days after the room closes" in text
    assert Room.objects.get(id=opened.room.id).state == RoomState.OPEN  # GET changes nothing
    done = alice.post(f"/rooms/{opened.room.id}/close/")
    assert done.status_code == 302 and done["Location"] == f"/rooms/{opened.room.id}/"
    assert Room.objects.get(id=opened.room.id).state == RoomState.CLOSED
    followed = visible(alice.get(done["Location"]).content.decode())
    assert "The room is closed. No agent can speak in it again." in followed


def test_deleting_a_room_says_what_goes_and_stays_then_both_sides_lose_it(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    opened = make_open_room()
    services.message_say(
        room_id=opened.room.id, agent_id=opened.a.agent.id, client_id="m1", text="Friday?"
    )
    bob, alice = client_of(opened.b.owner), client_of(opened.a.owner)
    assert (
        f'href="/rooms/{opened.room.id}/delete/"'
        in bob.get(f"/rooms/{opened.room.id}/").content.decode()
    )
    page = bob.get(f"/rooms/{opened.room.id}/delete/")
    text = visible(page.content.decode())
    assert "What goes, for you and alice, now" in text
    assert "The transcript: 1 message between the agents." in text
    assert "Whispers" in text and "Fork snapshots" in text and "outcome details" in text
    assert "What stays" in text and "still verifies" in text and "90 days" in text
    assert "A notice for alice: “bob deleted the room ‘Dinner for two’”." in text  # noqa: RUF001
    assert not codes_in(text)

    # Without the tick nothing is deleted, and the page says why.
    refused = bob.post(f"/rooms/{opened.room.id}/delete/", {})
    assert refused.status_code == 422
    assert "Tick the box to confirm; nothing was deleted." in visible(refused.content.decode())
    assert Message.objects.filter(room_id=opened.room.id).count() == 1

    assert bob.get(f"/api/rooms/{opened.room.id}/messages").status_code == 200  # before
    done = bob.post(f"/rooms/{opened.room.id}/delete/", {"confirm": "on"})
    assert done.status_code == 302 and done["Location"] == "/"
    bob_rooms = visible(bob.get("/").content.decode())
    assert "The room “Dinner for two” was deleted for both sides." in bob_rooms
    assert "The other owner has been told." in bob_rooms
    # Neither side can open anything of it any more but its ledger, which says so.
    for client in (alice, bob):
        for path in ("", "slip/", "delete/", "close/", "?part=transcript"):
            assert client.get(f"/rooms/{opened.room.id}/{path}").status_code == 404, path
        ledger = client.get(f"/rooms/{opened.room.id}/ledger/").content.decode()
        assert 'id="room-deleted"' in ledger and "Dinner for two" not in ledger
        assert client.get(f"/api/rooms/{opened.room.id}/messages").status_code == 404

    # Alice is told on her rooms page, by name, and can dismiss it.
    alice_rooms = alice.get("/").content.decode()
    assert "bob deleted the room 'Dinner for two'." in visible(alice_rooms)
    notice = RoomDeletionNotice.objects.get(recipient=opened.a.owner)
    # Another owner can neither see nor dismiss it.
    assert "deleted the room" not in visible(bob.get("/").content.decode())
    assert bob.post(f"/notices/{notice.id}/dismiss/").status_code == 302
    assert RoomDeletionNotice.objects.filter(id=notice.id).exists()
    assert alice.get(f"/notices/{notice.id}/dismiss/").status_code == 405  # POST only
    assert alice.post(f"/notices/{notice.id}/dismiss/").status_code == 302
    assert "deleted the room" not in visible(alice.get("/").content.decode())
    assert not RoomDeletionNotice.objects.exists()  # dismissed is deleted (it held the name)


def test_an_owner_without_a_seat_gets_not_found_and_nothing_is_deleted(
    make_open_room: Callable[..., OpenRoom], make_owner: Callable[[str], Any]
) -> None:
    opened = make_open_room()
    mallory = client_of(make_owner("mallory"))
    assert mallory.get(f"/rooms/{opened.room.id}/delete/").status_code == 404
    assert mallory.post(f"/rooms/{opened.room.id}/delete/", {"confirm": "on"}).status_code == 404
    assert mallory.post(f"/rooms/{opened.room.id}/close/").status_code == 404
    assert Room.objects.get(id=opened.room.id).state == RoomState.OPEN


def test_deleting_an_account_asks_for_the_password(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    opened = make_open_room()
    alice = client_of(opened.a.owner)
    settings_page = alice.get("/settings/").content.decode()
    assert 'href="/settings/delete-account/"' in settings_page
    page = visible(alice.get("/settings/delete-account/").content.decode())
    assert "“Dinner for two” (with bob)" in page and "Your password" in page
    wrong = alice.post("/settings/delete-account/", {"password": "not it"})
    assert wrong.status_code == 422
    assert "That is not your password; nothing was deleted." in visible(wrong.content.decode())
    assert User.objects.filter(pk=opened.a.owner.pk).exists()

    done = alice.post("/settings/delete-account/", {"password": "correct horse 42"})
    assert done.status_code == 302 and done["Location"] == "/login/"
    assert not User.objects.filter(pk=opened.a.owner.pk).exists()
    assert not Room.objects.filter(id=opened.room.id).exists()
    login = visible(alice.get("/login/").content.decode())
    assert "Your account was deleted, and with it 1 room for both sides." in login
    # Signed out: the rooms page asks to log in.
    assert alice.get("/").status_code == 302
    bob_rooms = visible(client_of(opened.b.owner).get("/").content.decode())
    assert "alice deleted their account, and with it the room 'Dinner for two'." in bob_rooms


def test_every_room_page_and_the_settings_page_show_the_schedule_as_applied(
    make_open_room: Callable[..., OpenRoom], settings: Any
) -> None:
    settings.SYNAPSIA = {
        **settings.SYNAPSIA,
        "TRANSCRIPT_RETENTION_DAYS": 14,
        "ABUSE_EVIDENCE_RETENTION_DAYS": 365,
    }
    opened = make_open_room()
    alice = client_of(opened.a.owner)
    room = visible(alice.get(f"/rooms/{opened.room.id}/").content.decode())
    assert "Transcript kept 14 days after the room closes" in room
    assert "Transcript kept 14 days after the room closes (the default)" not in room
    assert "Shared artifacts kept 90 days (the default)" in room
    assert "Exit notes kept 30 days (the default)" in room
    assert "Telemetry (logs) kept 30 days (the default)" in room
    assert "Abuse evidence kept 365 days after the report is resolved" in room
    settings_text = visible(alice.get("/settings/").content.decode())
    assert "How long your data is kept" in settings_text
    assert "Room transcript (messages, whispers, fork snapshots) 14 days after the room closes" in (
        settings_text
    )
    assert "Permission and ledger events 90 days each (the default)" in settings_text
    assert "Abuse evidence 365 days after the report is resolved" in settings_text

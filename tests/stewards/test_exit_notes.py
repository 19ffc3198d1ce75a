"""Exit notes: each side of a closed room leaves one; the owner reads their own agent's in
full, the other side reads neither; notes are kept 30 days."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from ledger.models import LedgerEvent
from rooms.models import RoomState
from rooms.retention import retention_purge_all
from stewards.exit_notes import exit_note_leave_as_agent, exit_note_leave_as_owner
from stewards.models import ExitNote, ExitNoteTheme

pytestmark = pytest.mark.django_db


def _agent_note(client: Client, token: str, room_id: object, body: dict[str, Any]) -> Any:
    return client.post(
        f"/api/rooms/{room_id}/exit-note",
        body,
        content_type="application/json",
        headers={"authorization": f"Bearer {token}"},
    )


def test_an_agent_leaves_its_note_with_its_token_and_its_owner_reads_it_in_full(
    closed_room: Any,
) -> None:
    setup = closed_room()
    client = Client()
    answer = _agent_note(
        client,
        setup.b.token,
        setup.room.id,
        {"themes": ["reached_plan", "took_too_long"], "text": "Bob agent: slow but fine"},
    )
    assert answer.status_code == 201
    assert answer.json()["themes"] == ["reached_plan", "took_too_long"]

    client.force_login(setup.b.owner)
    page = client.get(f"/rooms/{setup.room.id}/exit-note/").content.decode()
    assert "Bob agent: slow but fine" in page
    assert "We reached a plan" in page and "It took too long" in page
    agent_part = page.split("Your agent's note")[1].split("Your note")[0]
    assert "reached_plan" not in agent_part  # words, never codes

    client.force_login(setup.a.owner)
    other = client.get(f"/rooms/{setup.room.id}/exit-note/").content.decode()
    assert "slow but fine" not in other
    assert "Your agent has not left a note." in other


def test_the_agent_endpoint_refuses_without_a_token_outside_its_room_and_before_closing(
    closed_room: Any, make_open_room: Any
) -> None:
    setup = closed_room()
    open_room = make_open_room(prefix="o-")
    client = Client()
    body = {"themes": ["reached_plan"]}
    assert _agent_note(client, "syn_agent_wrong", setup.room.id, body).status_code == 401
    # Another room, and a room that does not exist: the same 404, so nothing is told apart.
    elsewhere = _agent_note(client, open_room.a.token, setup.room.id, body)
    nowhere = _agent_note(client, setup.a.token, uuid.uuid4(), body)
    assert elsewhere.status_code == nowhere.status_code == 404
    assert elsewhere.json() == nowhere.json()
    still_open = _agent_note(client, open_room.a.token, open_room.room.id, body)
    assert still_open.status_code == 409
    assert "closed" in still_open.json()["message"]
    unknown = _agent_note(client, setup.a.token, setup.room.id, {"themes": ["rude"]})
    assert unknown.status_code == 422
    assert "reached_plan" in unknown.json()["message"]  # the list, for the agent's author
    assert not ExitNote.objects.exists()


def test_an_owner_leaves_a_note_on_the_page_and_leaving_again_replaces_it(
    closed_room: Any,
) -> None:
    setup = closed_room()
    client = Client()
    client.force_login(setup.a.owner)
    url = f"/rooms/{setup.room.id}/exit-note/"
    first = client.post(url, {"themes": ["privacy_respected"], "text": "Felt safe."})
    assert first.status_code == 302  # post, redirect, get
    client.post(url, {"themes": ["reached_plan"], "text": "Changed my mind."})
    page = client.get(url).content.decode()
    assert "Changed my mind." in page and "Felt safe." not in page
    assert list(ExitNoteTheme.objects.values_list("theme", flat=True)) == ["reached_plan"]
    empty = client.post(url, {"themes": [], "text": "  "})
    assert "Tick at least one theme or write a few words." in empty.content.decode()
    assert ExitNote.objects.count() == 1


def test_an_open_room_offers_no_note_yet(make_open_room: Any) -> None:
    setup = make_open_room()
    client = Client()
    client.force_login(setup.a.owner)
    page = client.get(f"/rooms/{setup.room.id}/exit-note/").content.decode()
    assert "once the room has closed" in page
    assert "<form" not in page.split("Your note")[1]
    assert setup.room.state == RoomState.OPEN


def test_the_room_page_links_to_the_exit_note_once_closed(closed_room: Any) -> None:
    setup = closed_room()
    client = Client()
    client.force_login(setup.a.owner)
    page = client.get(f"/rooms/{setup.room.id}/").content.decode()
    assert f"/rooms/{setup.room.id}/exit-note/" in page
    assert f'action="/rooms/{setup.room.id}/report/"' in page


def test_notes_are_purged_after_thirty_days_and_the_ledger_records_the_count(
    closed_room: Any,
) -> None:
    setup = closed_room()
    now = timezone.now()
    exit_note_leave_as_owner(
        owner=setup.a.owner,
        room_id=setup.room.id,
        themes=["reached_plan"],
        text="old",
        now=now - timedelta(days=31),
    )
    exit_note_leave_as_agent(
        agent=setup.b.agent,
        room_id=setup.room.id,
        themes=["reached_plan"],
        text="recent",
        now=now - timedelta(days=29),
    )
    retention_purge_all(now=now)
    assert list(ExitNote.objects.values_list("text", flat=True)) == ["recent"]
    assert ExitNoteTheme.objects.count() == 1
    event = LedgerEvent.objects.filter(room_id=setup.room.id, kind="room_content_deleted").get()
    assert event.data["notes_deleted"] == 1 and event.data["reason"] == "retention"
    assert "old" not in str(event.data)
    retention_purge_all(now=now + timedelta(days=2))
    assert not ExitNote.objects.exists()


def test_deleting_a_room_deletes_its_exit_notes_and_counts_them_in_the_ledger(
    closed_room: Any,
) -> None:
    from rooms.deletion import room_delete
    from stewards.models import AbuseReport
    from stewards.reports import abuse_report_file

    setup = closed_room()
    exit_note_leave_as_owner(
        owner=setup.a.owner, room_id=setup.room.id, themes=["reached_plan"], text="mine"
    )
    exit_note_leave_as_agent(
        agent=setup.b.agent, room_id=setup.room.id, themes=["took_too_long"], text="theirs"
    )
    abuse_report_file(owner=setup.b.owner, room_id=setup.room.id, reason="spam", text="")
    room_delete(owner=setup.a.owner, room_id=setup.room.id)
    assert not ExitNote.objects.exists() and not ExitNoteTheme.objects.exists()
    event = LedgerEvent.objects.filter(room_id=setup.room.id, kind="room_content_deleted").get()
    assert event.data["notes_deleted"] == 2
    # A report outlives the room it is about (held for the safety of other rooms).
    assert AbuseReport.objects.filter(room_id=setup.room.id).exists()


def test_a_notes_text_is_sealed_at_rest_and_unreadable_once_its_room_key_is_destroyed(
    closed_room: Any,
) -> None:
    """Exit-note text is room content: stored sealed under the room's data key (no canary in
    the column), read back as text by its owner, and unopenable once the key is destroyed
    (what an older backup holds after the room's deletion)."""
    from django.db import connection

    from rooms.sealing import SEALED_PREFIX, room_key_destroy
    from slips.datakeys import DataKeyDestroyed

    canary = "zq8exitnotecanary"
    setup = closed_room()
    exit_note_leave_as_owner(
        owner=setup.a.owner, room_id=setup.room.id, themes=["reached_plan"], text=canary
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT text FROM stewards_exitnote")
        (stored,) = cursor.fetchone()
    assert canary not in stored and stored.startswith(SEALED_PREFIX)
    assert ExitNote.objects.get().text == canary

    room_key_destroy(setup.room.id)
    with pytest.raises(DataKeyDestroyed):
        ExitNote.objects.get().text  # noqa: B018  (loading opens the sealed column)

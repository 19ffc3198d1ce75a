"""Deleting a room for both sides and deleting an account: the content is gone at once (no
table holds a canary from it), the ledger keeps its non-content events and still verifies,
the other owner is told, connected agents are disconnected and cannot rejoin."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from gatekeeper.reasons import event_sentence
from ledger.events import event_record_parse
from ledger.models import LedgerEvent
from ledger.retention import ledger_purge_expired
from ledger.verification import ledger_verify_room
from rooms import selectors, services
from rooms.deletion import account_delete, room_delete
from rooms.errors import NotFound
from rooms.models import (
    AccountDeletion,
    DeletionReason,
    Message,
    Room,
    RoomDeletion,
    RoomDeletionNotice,
    RoomOutcome,
    Whisper,
)
from rooms.protocol import CloseCode
from synapsia.asgi import application
from tests.conftest import OpenRoom
from tests.rooms.test_retention import CANARY, _fill, canaries_at_rest, canaries_in_database
from tests.socket_frames import join

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _journal(tmp_path: Path, settings: Any) -> Path:
    path = tmp_path / "deletions.jsonl"
    settings.SYNAPSIA = {**settings.SYNAPSIA, "DELETION_JOURNAL_PATH": str(path)}
    return path


def _with_outcome(opened: OpenRoom) -> None:
    RoomOutcome.objects.create(
        room=opened.room,
        action_id="00000000-0000-0000-0000-0000000000aa",
        kind="agreed",
        owner=opened.a.owner,
        plan={"venue_id": "v1", "venue_name": CANARY, "starts_at": "2026-12-04T19:00:00+01:00"},
    )


def test_either_owner_deletes_the_room_for_both_sides(
    make_open_room: Callable[..., OpenRoom], _journal: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    opened, untouched = make_open_room(), make_open_room(prefix="other-")
    _fill(opened)
    _fill(untouched)
    _with_outcome(opened)
    room = Room.objects.get(id=opened.room.id)
    room.charter = f"Ground rules: {CANARY}"  # the room's own words are content too
    room.save(update_fields=["charter"])
    room_id = opened.room.id
    assert canaries_in_database()  # the test can fail: the canary is there before

    deleted = room_delete(owner=opened.b.owner, room_id=room_id)

    # Nothing of the content is left anywhere, for either owner; the other room is untouched.
    assert deleted.counts.messages == 1 and deleted.counts.whispers == 1
    assert deleted.counts.snapshots == 3
    assert not Room.objects.filter(id=room_id).exists()
    for owner in (opened.a.owner, opened.b.owner):
        with pytest.raises(NotFound):
            selectors.room_seat(owner=owner, room_id=room_id)
    found = canaries_in_database()
    assert found and not Message.objects.filter(room_id=room_id).exists()
    assert Message.objects.filter(room_id=untouched.room.id).count() == 1
    assert Whisper.objects.filter(room_id=untouched.room.id).count() == 1
    # The canary left is the other room's only.
    room_delete(owner=untouched.a.owner, room_id=untouched.room.id)
    assert canaries_in_database() == []
    assert canaries_at_rest() == []  # nor in any table's stored bytes (charter, plan, ...)

    # The record outlives the content: id, when, by whom; in the table and the journal.
    record = RoomDeletion.objects.get(room_id=room_id)
    assert (record.deleted_by_id, record.reason) == (opened.b.owner.pk, "owner_request")
    lines = [json.loads(line) for line in _journal.read_text().splitlines()]
    assert lines[0]["room_id"] == str(room_id) and lines[0]["kind"] == "room"
    assert CANARY not in _journal.read_text() and "Dinner" not in _journal.read_text()

    # The ledger keeps its events, records who and counts (no content) and still verifies.
    events = LedgerEvent.objects.filter(room_id=room_id).order_by("seq")
    kinds = list(events.values_list("kind", flat=True))
    assert kinds[0] == "join" and kinds[-1] == "room_content_deleted"
    data = LedgerEvent.objects.filter(room_id=room_id).order_by("-seq").first().data
    assert data["by"] == str(opened.b.owner.pk) and data["messages_deleted"] == 1
    assert event_record_parse(kind="room_content_deleted", data=data).reason == "owner_request"
    assert CANARY not in json.dumps(data)
    assert ledger_verify_room(room_id=room_id).ok
    names = {str(opened.b.owner.pk): "Bob"}
    assert event_sentence("room_content_deleted", data, names) == (
        "Bob deleted the room for both sides: 1 message, 1 whisper and 3 fork snapshots."
    )

    # The other owner is told, by name; the deleting owner gets no notice.
    (notice,) = RoomDeletionNotice.objects.filter(room_id=room_id)
    assert notice.recipient == opened.a.owner
    assert (notice.deleted_by_name, notice.room_purpose) == ("bob", "Dinner for two")
    # Nothing of the content reached a log line, at any level.
    assert caplog.records and CANARY not in caplog.text

    # The ledger's window still applies to the deleted room's chain, which keeps verifying.
    later = timezone.now() + timedelta(days=91)
    assert ledger_purge_expired(now=later).events_purged > 0
    kinds = list(LedgerEvent.objects.filter(room_id=room_id).values_list("kind", flat=True))
    assert kinds == ["retention_purge"]
    assert ledger_verify_room(room_id=room_id).ok


def test_an_owner_without_a_seat_cannot_delete_and_nothing_changes(
    make_open_room: Callable[..., OpenRoom], make_owner: Callable[[str], Any]
) -> None:
    opened = make_open_room()
    _fill(opened)
    mallory = make_owner("mallory")
    events = LedgerEvent.objects.filter(room_id=opened.room.id).count()
    with pytest.raises(NotFound):
        room_delete(owner=mallory, room_id=opened.room.id)
    assert Message.objects.filter(room_id=opened.room.id).count() == 1
    assert LedgerEvent.objects.filter(room_id=opened.room.id).count() == events
    assert not RoomDeletion.objects.exists()


async def test_connected_agents_are_disconnected_and_cannot_rejoin(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    opened = await database_sync_to_async(make_open_room)()
    sockets = [await join(opened.room.id, token) for token in (opened.a.token, opened.b.token)]

    await database_sync_to_async(room_delete)(owner=opened.a.owner, room_id=opened.room.id)

    for communicator in sockets:
        frame = await communicator.receive_json_from(timeout=5)
        assert (frame["type"], frame["body"]["state"]) == ("room_state", "closed")
        closed = await communicator.receive_output(timeout=5)
        assert closed == {"type": "websocket.close", "code": CloseCode.ROOM_NOT_JOINABLE}
    again = WebsocketCommunicator(
        application,
        f"/ws/rooms/{opened.room.id}/",
        headers=[(b"authorization", f"Bearer {opened.b.token}".encode())],
    )
    connected, _ = await again.connect()
    if connected:  # accepted, then refused in a close frame: either way it never joins
        out = await again.receive_output(timeout=5)
        assert out["type"] == "websocket.close"
    await again.disconnect()


def test_deleting_an_account_deletes_its_rooms_for_both_sides(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    opened, second = make_open_room(), make_open_room(prefix="two-")
    _fill(opened)
    alice, bob = opened.a.owner, opened.b.owner
    # Alice is in a second room, with another partner.
    services.room_create(owner=alice, purpose="Alice alone", charter="")
    room_id = opened.room.id
    alice_id = alice.pk

    done = account_delete(owner=alice)

    assert not User.objects.filter(pk=alice_id).exists()
    assert len(done.rooms) == 2
    assert not Room.objects.filter(id=room_id).exists()
    assert Room.objects.filter(id=second.room.id).exists()  # not hers: untouched
    assert canaries_in_database() == []
    (notice,) = RoomDeletionNotice.objects.filter(recipient=bob)
    assert notice.account_deleted and notice.deleted_by_name == "alice"
    data = LedgerEvent.objects.filter(room_id=room_id).order_by("-seq").first().data
    assert (data["reason"], data["by"]) == ("account_deleted", str(alice_id))
    assert event_sentence("room_content_deleted", data, {str(alice_id): "Alice"}).startswith(
        "Alice deleted their account, and with it this room for both sides"
    )
    assert ledger_verify_room(room_id=room_id).ok
    assert AccountDeletion.objects.filter(user_id=alice_id).exists()
    assert set(RoomDeletion.objects.values_list("reason", flat=True)) == {
        DeletionReason.ACCOUNT_DELETED
    }
    # Bob's account and agent are untouched.
    assert User.objects.filter(pk=bob.pk).exists()


def test_retention_and_reapplied_deletions_read_as_sentences() -> None:
    retention = {"by": "retention", "messages_deleted": 3, "artifacts_deleted": 0}
    assert event_sentence(
        "room_content_deleted", {**retention, "reason": "retention", "window_days": 30}, {}
    ) == ("Room content past its 30-day retention window was deleted: 3 messages.")
    assert event_sentence(
        "room_content_deleted", {**retention, "reason": "reapplied", "messages_deleted": 0}, {}
    ) == (
        "A deletion of this room was applied again after a restore from backup: nothing was "
        "left to delete."
    )


def test_another_apps_content_is_deleted_with_the_room_and_counted(
    make_open_room: Callable[..., OpenRoom], monkeypatch: pytest.MonkeyPatch
) -> None:
    import rooms.deletion as deletion

    monkeypatch.setattr(deletion, "_DELETERS", dict(deletion._DELETERS))
    notes: dict[object, int] = {}
    opened = make_open_room()
    notes[opened.room.id] = 2

    def exit_notes_delete(room_id: object) -> int:
        return notes.pop(room_id, 0)

    deletion.room_content_deleter_register("exit_notes", "notes", exit_notes_delete)
    deleted = room_delete(owner=opened.a.owner, room_id=opened.room.id)
    assert deleted.counts.notes == 2 and notes == {}
    data = LedgerEvent.objects.filter(room_id=opened.room.id).order_by("-seq").first().data
    assert data["notes_deleted"] == 2


def test_after_a_deletion_no_canary_is_in_the_metrics_nor_the_logs(
    make_open_room: Callable[..., OpenRoom], settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 14: after deletion no canary from any content field is in any table, log or
    metric. The operator's scrape (the metrics endpoint) and every log line, at any level."""
    from synapsia import metrics  # noqa: F401 (connects its signals, as Daphne's start-up does)

    caplog.set_level(logging.DEBUG)
    opened = make_open_room(purpose=f"Dinner {CANARY}")
    _fill(opened)
    _with_outcome(opened)
    room_delete(owner=opened.a.owner, room_id=opened.room.id)
    settings.SYNAPSIA_METRICS_TOKEN = "deletion-metrics-token-" + "x" * 40
    scrape = Client().get(
        "/metrics", HTTP_AUTHORIZATION=f"Bearer {settings.SYNAPSIA_METRICS_TOKEN}"
    )
    assert scrape.status_code == 200 and b"synapsia_rooms" in scrape.content
    for text in (scrape.content.decode(), caplog.text):
        assert CANARY not in text and "canary-7f3a" not in text.lower()
    assert caplog.records  # lines were captured at every level, so the check can fail


def test_the_notice_is_all_that_names_a_deleted_room_and_it_goes_with_its_purge(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    """After the deletion the other owner's notice keeps the room's name ("bob deleted the room
    '…'"), by design and nothing else; once it is past its window (or dismissed) the purge
    leaves no canary in any table, readable or at rest."""
    from rooms.retention import retention_purge_all

    opened = make_open_room(purpose=f"Dinner {CANARY}")
    _fill(opened)
    _with_outcome(opened)
    room_delete(owner=opened.b.owner, room_id=opened.room.id)
    assert canaries_in_database() == ["rooms.RoomDeletionNotice"]
    assert canaries_at_rest() == ["rooms.RoomDeletionNotice"]

    retention_purge_all(now=timezone.now() + timedelta(days=31))
    assert canaries_in_database() == [] and canaries_at_rest() == []
    assert not RoomDeletionNotice.objects.exists()

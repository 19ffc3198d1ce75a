"""A deleted room's ledger stays its owners' (issue 14: "the ledger keeps only its non-content
events for its own window and still verifies"): after the deletion both former owners still
read it, download it and check it offline, and witness its signed head, with words saying the
room was deleted and when, and no content in any of it. Nobody else gets anything: a stranger,
staff and a superuser get the same 404 as for a room that never existed; so does a later
account that got a deleted owner's id."""

from __future__ import annotations

import importlib
import json
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.template.loader import render_to_string
from django.test import Client

from ledger import verify_export
from ledger.models import SignedHead
from rooms import services
from rooms.deletion import account_delete, deletions_reapply, room_delete
from rooms.ledger_api import deleted_room_for_owner
from rooms.models import RoomDeletion
from tests.conftest import OpenRoom
from tests.ledger.test_witnesses import _device, _payload

pytestmark = pytest.mark.django_db(transaction=True)

CANARY = "deleted-ledger-canary-c7a0"
PATHS = ("ledger", "receipt", "receipt/export")


@pytest.fixture(autouse=True)
def _journal(tmp_path: Path, settings: Any) -> Path:
    path = tmp_path / "deletions.jsonl"
    settings.SYNAPSIA = {**settings.SYNAPSIA, "DELETION_JOURNAL_PATH": str(path)}
    return path


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _deleted_room(make_open_room: Callable[..., OpenRoom]) -> OpenRoom:
    opened = make_open_room(purpose=f"Dinner {CANARY}")
    services.message_say(
        room_id=opened.room.id, agent_id=opened.a.agent.id, client_id="m1", text=CANARY
    )
    services.whisper_send(owner=opened.a.owner, room_id=opened.room.id, text=CANARY)
    room_delete(owner=opened.b.owner, room_id=opened.room.id)
    return opened


def test_both_former_owners_read_and_verify_a_deleted_rooms_ledger(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    opened = _deleted_room(make_open_room)
    room_id = opened.room.id
    for seat, by in ((opened.a, "by bob"), (opened.b, "by you")):
        client = _client(seat.owner)
        page = client.get(f"/api/rooms/{room_id}/ledger")
        assert page.status_code == 200
        body = page.json()
        assert CANARY not in page.content.decode()  # no content, anywhere in it
        deleted = body["deleted"]
        assert deleted["by_you"] is (seat is opened.b)
        assert deleted["words"].startswith(f"This room was deleted for both sides {by} on ")
        assert "ledger stays" in deleted["words"] and "(UTC)" in deleted["words"]
        kinds = [e["kind"] for e in body["events"]]
        assert kinds[0] == "join" and kinds[-1] == "room_content_deleted"
        # The owners are still named in the events' words (the room's seats are gone).
        words = " ".join(e["words"] for e in body["events"]).lower()
        assert "alice" in words and "bob" in words
        assert body["signed_heads"][-1]["seq"] == body["head"]["seq"]  # signed at deletion

        receipt = client.get(f"/api/rooms/{room_id}/receipt").json()
        assert receipt["verified"] is True and receipt["words"][0] == deleted["words"]
        assert receipt["deleted"] == deleted
        export = client.get(f"/api/rooms/{room_id}/receipt/export")
        assert export.status_code == 200 and CANARY not in export.content.decode()
        # The downloaded record checks out with the offline verifier.
        assert "verified" in verify_export.verify(export.json()).lower()


def test_a_stranger_staff_and_a_superuser_get_nothing_of_it(
    make_open_room: Callable[..., OpenRoom], make_owner: Callable[[str], Any]
) -> None:
    opened = _deleted_room(make_open_room)
    never = uuid.uuid4()
    stranger = make_owner("mallory")
    staff = User.objects.create_user("operator", password="correct horse 42", is_staff=True)
    root = User.objects.create_superuser("root", password="correct horse 42")
    for user in (stranger, staff, root):
        client = _client(user)
        for path in PATHS:
            answer = client.get(f"/api/rooms/{opened.room.id}/{path}")
            # The same answer as for a room that never existed: no existence leak.
            assert answer.status_code == 404, (user, path)
            assert answer.content == client.get(f"/api/rooms/{never}/{path}").content
        assert deleted_room_for_owner(owner=user, room_id=opened.room.id) is None
    for path in PATHS:
        assert Client().get(f"/api/rooms/{opened.room.id}/{path}").status_code == 401


def test_a_later_account_with_a_deleted_owners_id_gets_nothing(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    """An account is one of the owners by its id and the moment it joined (a restore can
    rewind the id sequence and hand the id to someone else)."""
    opened = _deleted_room(make_open_room)
    alice = opened.a.owner
    User.objects.filter(pk=alice.pk).update(date_joined=alice.date_joined + timedelta(days=1))
    alice.refresh_from_db()
    assert _client(alice).get(f"/api/rooms/{opened.room.id}/ledger").status_code == 404
    assert _client(opened.b.owner).get(f"/api/rooms/{opened.room.id}/ledger").status_code == 200


def test_after_an_account_deletion_the_other_owner_still_reads_it(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    opened = make_open_room()
    account_delete(owner=opened.b.owner)
    page = _client(opened.a.owner).get(f"/api/rooms/{opened.room.id}/ledger").json()
    assert page["deleted"]["words"].startswith(
        "This room was deleted for both sides when the other owner deleted their account on "
    )


def test_a_former_owner_witnesses_the_deleted_rooms_signed_head(
    make_open_room: Callable[..., OpenRoom], make_owner: Callable[[str], Any]
) -> None:
    opened = _deleted_room(make_open_room)
    head = SignedHead.objects.filter(room_id=opened.room.id).order_by("-seq").first()
    assert head is not None
    device = _device(opened.a.owner)
    answer = _client(opened.a.owner).post(
        f"/api/rooms/{opened.room.id}/ledger/witnesses",
        data=_payload(device, head),
        content_type="application/json",
    )
    assert answer.status_code == 201 and answer.json()["owner_name"] == "alice"
    stranger = make_owner("mallory")
    other = _device(stranger)
    refused = _client(stranger).post(
        f"/api/rooms/{opened.room.id}/ledger/witnesses",
        data=_payload(other, head),
        content_type="application/json",
    )
    assert refused.status_code == 404


def test_the_owners_come_back_with_a_reapplied_deletion(
    make_open_room: Callable[..., OpenRoom], _journal: Path
) -> None:
    """A restore rolls the deletion table back; the journal line names the owners, so the
    re-applied record still lets them read the ledger."""
    opened = _deleted_room(make_open_room)
    line = json.loads(_journal.read_text().splitlines()[0])
    assert {o["user_id"] for o in line["owners"]} == {opened.a.owner.pk, opened.b.owner.pk}
    RoomDeletion.objects.all().delete()  # as a restore of a backup taken before would
    assert _client(opened.a.owner).get(f"/api/rooms/{opened.room.id}/ledger").status_code == 404
    deletions_reapply()
    assert _client(opened.a.owner).get(f"/api/rooms/{opened.room.id}/ledger").status_code == 200


def test_deletions_recorded_before_get_their_owners_from_the_ledger(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    opened = _deleted_room(make_open_room)
    RoomDeletion.objects.update(owners=[])
    assert _client(opened.a.owner).get(f"/api/rooms/{opened.room.id}/ledger").status_code == 404
    migration = importlib.import_module("rooms.migrations.0019_room_deletion_owners")
    migration.owners_from_ledger(apps, None)
    (record,) = RoomDeletion.objects.all()
    assert {o["user_id"] for o in record.owners} == {opened.a.owner.pk, opened.b.owner.pk}
    assert _client(opened.a.owner).get(f"/api/rooms/{opened.room.id}/ledger").status_code == 200


def test_the_deleted_rooms_ledger_page_says_so_and_shows_no_content(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    opened = _deleted_room(make_open_room)
    deleted = deleted_room_for_owner(owner=opened.a.owner, room_id=opened.room.id)
    assert deleted is not None
    page = render_to_string("rooms/deleted_room_ledger.html", {"deleted": deleted})
    assert deleted.words in page and CANARY not in page
    assert f'data-room-id="{opened.room.id}"' in page
    assert f"/api/rooms/{opened.room.id}/receipt/export" in page

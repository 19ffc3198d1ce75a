"""Shared artifacts follow their retention row (90 days by default) and go with their room:
deleting the room deletes them and destroys the room's key, so a copy is unreadable."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from artifacts.models import Artifact
from artifacts.retention import artifacts_purge_expired
from artifacts.sealing import artifact_open
from ledger.models import LedgerEvent
from ledger.verification import ledger_verify_room
from rooms.deletion import room_delete
from rooms.retention import retention_purge_all, retention_row
from slips.datakeys import DataKeyDestroyed
from tests.artifacts.conftest import publish, sign_publishing

pytestmark = pytest.mark.django_db


def _deleted_events(room_id: Any) -> list[dict[str, Any]]:
    return [
        e.data for e in LedgerEvent.objects.filter(room_id=room_id, kind="room_content_deleted")
    ]


def test_the_purge_deletes_exactly_the_artifacts_past_their_window(
    shared_room: Any, make_open_room: Any
) -> None:
    publish(shared_room, shared_room.a, client_id="publish-old-01")
    old = Artifact.objects.get()
    Artifact.objects.filter(id=old.id).update(created_at=timezone.now() - timedelta(days=60))
    publish(shared_room, shared_room.a, client_id="publish-new-01")
    other = make_open_room(prefix="o")
    sign_publishing(other, other.a, "both")
    publish(other, other.a, client_id="publish-oth-01")
    assert retention_row("artifacts").days == 90 and Artifact.objects.count() == 3

    now = timezone.now()
    # Day 89 after the old one: nothing is past 90 days yet.
    assert artifacts_purge_expired(now + timedelta(days=29)).rows == 0
    assert Artifact.objects.count() == 3
    purged = artifacts_purge_expired(now + timedelta(days=31))
    assert (purged.rows, purged.rooms) == (1, 1)
    assert not Artifact.objects.filter(id=old.id).exists()
    assert Artifact.objects.count() == 2  # the newer one and the other room's stay
    (event,) = _deleted_events(shared_room.room.id)
    assert event["artifacts_deleted"] == 1 and event["reason"] == "retention"
    assert event["window_days"] == 90 and event["by"] == "retention"
    assert not _deleted_events(other.room.id)
    assert ledger_verify_room(room_id=shared_room.room.id).ok
    # Idempotent: a second run finds nothing.
    assert artifacts_purge_expired(now + timedelta(days=31)).rows == 0


def test_the_window_is_the_setting_and_purge_expired_runs_it(
    shared_room: Any, settings: Any
) -> None:
    settings.SYNAPSIA = {**settings.SYNAPSIA, "ARTIFACT_RETENTION_DAYS": 7}
    publish(shared_room, shared_room.a)
    done = {p.key: p for p in retention_purge_all(now=timezone.now() + timedelta(days=8))}
    assert done["artifacts"].rows == 1
    assert not Artifact.objects.exists()


@pytest.mark.django_db(transaction=True)  # a real commit: the key goes once it commits
def test_deleting_the_room_deletes_its_artifacts_and_destroys_their_key(shared_room: Any) -> None:
    publish(shared_room, shared_room.a, title="Backup canary", body="Copied before deletion")
    artifact = Artifact.objects.get()
    # What an older backup of the database would hold.
    backup = (artifact.room_id, artifact.id, bytes(artifact.sealed))
    assert artifact_open(room_id=backup[0], artifact_id=backup[1], blob=backup[2]).title

    deleted = room_delete(owner=shared_room.b.owner, room_id=shared_room.room.id)
    assert deleted.counts.artifacts == 1
    assert not Artifact.objects.exists()
    with pytest.raises(DataKeyDestroyed):
        artifact_open(room_id=backup[0], artifact_id=backup[1], blob=backup[2])
    (event,) = _deleted_events(shared_room.room.id)
    assert event["artifacts_deleted"] == 1 and event["reason"] == "owner_request"
    assert ledger_verify_room(room_id=shared_room.room.id).ok


def test_a_deletion_that_rolls_back_keeps_the_key(shared_room: Any) -> None:
    from django.db import transaction

    from artifacts.retention import artifacts_delete_for_room

    publish(shared_room, shared_room.a)
    artifact = Artifact.objects.get()
    blob = bytes(artifact.sealed)

    class Abandon(Exception):
        pass

    with pytest.raises(Abandon), transaction.atomic():
        artifacts_delete_for_room(shared_room.room.id)
        raise Abandon
    # Nothing was deleted, so nothing of the room may become unreadable.
    assert artifact_open(room_id=artifact.room_id, artifact_id=artifact.id, blob=blob).body


def test_a_blob_moved_to_another_artifact_or_room_does_not_open(
    shared_room: Any, make_open_room: Any
) -> None:
    from slips.errors import Misconfigured

    publish(shared_room, shared_room.a, client_id="publish-one-01")
    second_result = publish(shared_room, shared_room.b, client_id="publish-two-01", title="Second")
    assert second_result.status == "executed", second_result
    first, second = Artifact.objects.order_by("created_at")
    with pytest.raises(Misconfigured):
        artifact_open(room_id=second.room_id, artifact_id=second.id, blob=bytes(first.sealed))
    other = make_open_room(prefix="m")
    with pytest.raises(Misconfigured):
        artifact_open(room_id=other.room.id, artifact_id=first.id, blob=bytes(first.sealed))
    tampered = bytearray(first.sealed)
    tampered[-1] ^= 1
    with pytest.raises(Misconfigured):
        artifact_open(room_id=first.room_id, artifact_id=first.id, blob=bytes(tampered))


@pytest.mark.django_db(transaction=True)
def test_a_restore_brings_back_no_readable_artifact_and_reapply_deletes_it(
    shared_room: Any,
) -> None:
    """A backup taken before the deletion, restored after it: the artifact's row is back but
    its room's key is destroyed, and ``reapply_deletions`` deletes the row again."""
    from django.core import serializers

    from rooms.deletion import deletions_reapply
    from rooms.models import Room, RoomMember

    publish(shared_room, shared_room.a, title="Restored?", body="Must not come back")
    room_id = shared_room.room.id
    # The room's row as stored (its purpose and charter sealed: values() does not open them);
    # the serializers would write the opened words, which a raw save then refuses to store.
    room_rows = list(Room.objects.filter(id=room_id).values())
    backup = serializers.serialize(
        "json",
        [*RoomMember.objects.filter(room_id=room_id), *Artifact.objects.filter(room_id=room_id)],
    )
    room_delete(owner=shared_room.a.owner, room_id=room_id)
    Room.objects.bulk_create([Room(**row) for row in room_rows])
    for restored in serializers.deserialize("json", backup):
        restored.save()
    artifact = Artifact.objects.get()  # the restore brought the row back...
    with pytest.raises(DataKeyDestroyed):  # ...but nothing in it can be read
        artifact_open(room_id=room_id, artifact_id=artifact.id, blob=bytes(artifact.sealed))
    reapplied = deletions_reapply()
    assert reapplied.rooms_with_content == 1
    assert not Artifact.objects.filter(room_id=room_id).exists()

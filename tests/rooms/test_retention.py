"""Retention per data class, with a controllable clock: each row purges exactly what is past
its window and nothing more, records it in the room's ledger with counts (never content),
and the schedule shown is the schedule applied. Runs on both profiles (``make test``)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.utils import timezone

from gatekeeper.models import SandboxEffect
from gatekeeper.records import ActionRecord, ActionStatus
from ledger.models import LedgerEvent
from ledger.verification import ledger_verify_room
from rooms import flares, services
from rooms.models import (
    Flare,
    FlareReason,
    Message,
    OutcomeKind,
    Room,
    RoomDeletionNotice,
    RoomInvite,
    RoomMember,
    RoomOutcome,
    RoomState,
    SealedOffer,
    Whisper,
)
from rooms.retention import (
    Purged,
    RetentionPurgeFailed,
    retention_purge_all,
    retention_purge_register,
    retention_row,
    retention_schedule,
)
from rooms.sealing import RoomContentRefused
from rooms.tasks import purge_expired
from slips import services as slip_services
from slips.datakeys import DataKeyDestroyed
from slips.models import RoomTier, Slip, SlipCapability, SlipConflict
from tests.conftest import OpenRoom
from tests.slips.conftest import seat_slip_sign

pytestmark = pytest.mark.django_db(transaction=True)

CANARY = "canary-7f3a: my budget is 4000 EUR"


def _readable_rows(model: Any) -> list[dict[str, Any]]:
    """A model's rows as the application reads them (sealed columns opened); a row that
    cannot be opened (its room's data key destroyed) yields nothing readable."""
    manager = model._default_manager
    try:
        return list(manager.values())
    except (DataKeyDestroyed, RoomContentRefused):
        rows = []
        for pk in manager.values_list("pk", flat=True):
            try:
                rows.append(manager.filter(pk=pk).values().get())
            except (DataKeyDestroyed, RoomContentRefused):
                continue
        return rows


def canaries_in_database(canary: str = CANARY) -> list[str]:
    """Every model whose rows hold the canary readably anywhere (text, JSON, bytes)."""
    found = []
    for model in apps.get_models():
        for row in _readable_rows(model):
            if canary in repr(row) or canary.encode() in repr(row).encode():
                found.append(model._meta.label)
                break
    return found


def canaries_at_rest(canary: str = CANARY) -> list[str]:
    """Every model whose table holds the canary in its stored bytes (raw SQL, nothing
    opened): what a copy of the database (a backup) shows without the keys."""
    found = []
    with connection.cursor() as cursor:
        for model in apps.get_models():
            if not model._meta.managed or model._meta.proxy:
                continue
            table = connection.ops.quote_name(model._meta.db_table)
            cursor.execute(f"SELECT * FROM {table}")  # noqa: S608
            for row in cursor.fetchall():
                stored = b"".join(
                    bytes(v) if isinstance(v, bytes | memoryview) else str(v).encode() for v in row
                )
                if canary.encode() in stored:
                    found.append(model._meta.label)
                    break
    return found


def _fill(opened: OpenRoom) -> None:
    """One of each transcript row: a message, a whisper, a sealed offer, a fork snapshot."""
    room = opened.room
    services.message_say(room_id=room.id, agent_id=opened.a.agent.id, client_id="m1", text=CANARY)
    services.whisper_send(owner=opened.a.owner, room_id=room.id, text=CANARY)
    SealedOffer.objects.create(
        room=room,
        agent=opened.b.agent,
        client_id="s1",
        offer={"note": CANARY},
        salt="0" * 64,
        commitment="1" * 64,
    )
    ActionRecord.objects.create(
        room_id=room.id,
        agent_id=opened.a.agent.id,
        owner=opened.a.owner,
        tool="book_table",
        arguments={"note": CANARY},
        arguments_hash="2" * 64,
        idempotency_key="k1",
        status=ActionStatus.EXECUTED,
        rule="slip.cleared",
        outcome={"kind": "succeeded", "output": {"note": CANARY}},
    )
    SandboxEffect.objects.create(
        idempotency_key=f"{room.id}:k1",
        tool="book_table",
        schema_version="1",
        arguments_sha256="2" * 64,
        arguments={"note": CANARY},
        output={},
        room_id=room.id,
    )


def _close(opened: OpenRoom, *, days_ago: float, now: datetime) -> None:
    services.room_transition(owner=opened.a.owner, room_id=opened.room.id, to=RoomState.CLOSED)
    Room.objects.filter(id=opened.room.id).update(state_changed_at=now - timedelta(days=days_ago))


def _transcript_rows(room_id: UUID) -> dict[str, int]:
    return {
        "messages": Message.objects.filter(room_id=room_id).count(),
        "whispers": Whisper.objects.filter(room_id=room_id).count(),
        "sealed": SealedOffer.objects.filter(room_id=room_id).count(),
        "actions": ActionRecord.objects.filter(room_id=room_id).count(),
        "sandbox": SandboxEffect.objects.filter(room_id=room_id).count(),
    }


FULL = {"messages": 1, "whispers": 1, "sealed": 1, "actions": 1, "sandbox": 1}
EMPTY = dict.fromkeys(FULL, 0)


def _content_events(room_id: UUID) -> list[dict[str, Any]]:
    return list(
        LedgerEvent.objects.filter(room_id=room_id, kind="room_content_deleted")
        .order_by("seq")
        .values_list("data", flat=True)
    )


def test_a_room_closed_31_days_ago_loses_its_transcript_29_days_keeps_it(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    now = timezone.now()
    old, recent, still_open = (make_open_room(prefix=p) for p in ("old-", "recent-", "open-"))
    for opened in (old, recent, still_open):
        _fill(opened)
    _close(old, days_ago=31, now=now)
    _close(recent, days_ago=29, now=now)
    # An open room whose last change is long past: its clock has not started.
    Room.objects.filter(id=still_open.room.id).update(state_changed_at=now - timedelta(days=400))

    done = {p.key: p for p in retention_purge_all(now=now)}

    assert _transcript_rows(old.room.id) == EMPTY
    assert _transcript_rows(recent.room.id) == FULL
    assert _transcript_rows(still_open.room.id) == FULL
    assert done["transcript"].rows == 5 and done["transcript"].rooms == 1
    # The room itself, its seats and its outcome stay: only the transcript row's data goes.
    assert Room.objects.filter(id=old.room.id).exists()
    assert old.room.members.count() == 2
    # Recorded in that room's ledger with counts, never content; the chain still verifies.
    (event,) = _content_events(old.room.id)
    assert event["reason"] == "retention" and event["window_days"] == 30
    assert (event["messages_deleted"], event["whispers_deleted"], event["snapshots_deleted"]) == (
        1,
        1,
        3,
    )
    assert CANARY not in json.dumps(event)
    assert ledger_verify_room(room_id=old.room.id).ok
    assert _content_events(recent.room.id) == [] and _content_events(still_open.room.id) == []

    # Idempotent: a second run the same day deletes and records nothing.
    again = {p.key: p for p in retention_purge_all(now=now)}
    assert again["transcript"].rows == 0 and len(_content_events(old.room.id)) == 1

    # Two days later the 29-day room passes 30 days and goes too.
    retention_purge_all(now=now + timedelta(days=2))
    assert _transcript_rows(recent.room.id) == EMPTY
    assert _transcript_rows(still_open.room.id) == FULL


def test_the_window_is_a_setting_and_the_shown_words_follow_it(
    make_open_room: Callable[..., OpenRoom], settings: Any
) -> None:
    settings.SYNAPSIA = {**settings.SYNAPSIA, "TRANSCRIPT_RETENTION_DAYS": 7}
    now = timezone.now()
    opened = make_open_room()
    _fill(opened)
    _close(opened, days_ago=8, now=now)
    assert retention_row("transcript").words() == (
        "Room transcript (messages, whispers, fork snapshots) kept 7 days after the room closes"
    )
    retention_purge_all(now=now)
    assert _transcript_rows(opened.room.id) == EMPTY
    assert _content_events(opened.room.id)[0]["window_days"] == 7


def test_the_schedule_has_every_data_class_of_the_spec_with_its_default() -> None:
    days = {row.key: row.days for row in retention_schedule()}
    assert days == {
        "transcript": 30,
        "artifacts": 90,
        "ledger": 90,
        "exit_notes": 30,
        "telemetry": 30,
        "abuse_evidence": 180,
        "deletion_notices": 30,
        "add_keys": 1,  # not in the spec's table: an API add's Idempotency-Key
    }


def test_another_app_registers_its_purge_and_a_failing_row_does_not_stop_the_rest(
    make_open_room: Callable[..., OpenRoom],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import rooms.retention as retention

    # Restored after the test: the registry is module state.
    monkeypatch.setattr(retention, "_SCHEDULE", dict(retention._SCHEDULE))
    calls: list[datetime] = []

    def exit_notes_purge(now: datetime) -> Purged:
        calls.append(now)
        return Purged(key="exit_notes", rows=3, rooms=1, summary="exit notes: deleted 3")

    def abuse_purge(now: datetime) -> Purged:
        raise RuntimeError("storage down")

    retention_purge_register("exit_notes", exit_notes_purge)
    retention_purge_register("abuse_evidence", abuse_purge)
    now = timezone.now()
    opened = make_open_room()
    _fill(opened)
    _close(opened, days_ago=40, now=now)
    with pytest.raises(RetentionPurgeFailed) as failed:
        retention_purge_all(now=now)
    assert failed.value.keys == ["abuse_evidence"]
    assert calls == [now]
    # Every other registered row ran (other apps register theirs too: artifacts, ...).
    registered = {row.key for row in retention_schedule() if row.purge is not None}
    assert {"transcript", "ledger", "exit_notes", "telemetry", "deletion_notices"} <= registered
    assert {p.key for p in failed.value.done} == registered - {"abuse_evidence"}
    assert _transcript_rows(opened.room.id) == EMPTY
    # The command says which row failed and exits 1, after printing the rows that ran.
    with pytest.raises(SystemExit) as exited:
        call_command("purge_expired")
    assert exited.value.code == 1
    out = capsys.readouterr().out
    assert "exit notes: deleted 3" in out and "retention purge failed for: abuse_evidence" in out


def test_ledger_row_purges_events_past_90_days_and_still_verifies(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    opened = make_open_room()
    before = LedgerEvent.objects.filter(room_id=opened.room.id).count()
    assert before > 0
    done = {p.key: p for p in retention_purge_all(now=timezone.now() + timedelta(days=89))}
    assert done["ledger"].rows == 0
    done = {p.key: p for p in retention_purge_all(now=timezone.now() + timedelta(days=91))}
    assert done["ledger"].rows == before
    kinds = list(LedgerEvent.objects.filter(room_id=opened.room.id).values_list("kind", flat=True))
    assert kinds == ["retention_purge"]
    assert ledger_verify_room(room_id=opened.room.id).ok


def test_deletion_notices_expire_after_their_window(django_user_model: Any) -> None:
    carol = django_user_model.objects.create_user(username="carol", password="x" * 12)
    now = timezone.now()
    for days_ago in (31, 29):
        RoomDeletionNotice.objects.create(
            recipient=carol,
            room_id="00000000-0000-0000-0000-000000000001",
            room_purpose="Dinner",
            deleted_by_name="alice",
            created_at=now - timedelta(days=days_ago),
        )
    retention_purge_all(now=now)
    left = list(RoomDeletionNotice.objects.values_list("created_at", flat=True))
    assert left == [now - timedelta(days=29)]


def test_the_command_and_the_beat_task_run_every_registered_purge(
    make_open_room: Callable[..., OpenRoom], capsys: pytest.CaptureFixture[str], settings: Any
) -> None:
    assert settings.CELERY_BEAT_SCHEDULE["retention-purge-expired"]["task"] == "rooms.purge_expired"
    opened = make_open_room()
    _fill(opened)
    _close(opened, days_ago=31, now=timezone.now())
    assert purge_expired.apply().get()["transcript"] == 5  # as a worker would run it
    assert _transcript_rows(opened.room.id) == EMPTY
    call_command("purge_expired")  # nothing left: every row says so in counts
    out = capsys.readouterr().out
    assert "transcript: deleted 0 record(s) from 0 room(s) closed more than 30 days ago" in out
    assert "ledger: purged 0 event(s) older than 90 days" in out
    assert "deletion notices: deleted 0 older than 30 days" in out


# --- what else of a closed room goes: its own words, its plan, its permission records ---------


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _stock(opened: OpenRoom) -> None:
    """Everything a room holds besides its transcript: the charter and an agreed plan (room
    content, with the canary), both owners' slips with a capability record each, different
    tiers (so a conflict), and a Signal Flare (left unanswered: the room is closed over it)."""
    room = Room.objects.get(id=opened.room.id)
    room.charter = f"Ground rules: {CANARY}"
    room.save(update_fields=["charter"])
    RoomOutcome.objects.create(
        room=room,
        action_id=uuid.uuid4(),
        kind=OutcomeKind.AGREED,
        owner=opened.a.owner,
        plan={
            "venue_id": "v1",
            "venue_name": CANARY,
            "starts_at": "2026-12-04T19:00:00+01:00",
            "time_zone": "Europe/Amsterdam",
            "party_size": 2,
            "price_per_person_minor": 4000,
            "currency": "EUR",
        },
    )
    for seat in (opened.a, opened.b):
        seat_slip_sign(seat, room.id, [{"resource": "budget"}])
    slip_services.tier_choose(owner=opened.a.owner, room_id=room.id, tier="collaborative")
    slip_services.tier_choose(owner=opened.b.owner, room_id=room.id, tier="room_only")
    flares.flare_raise(
        room_id=room.id, agent_id=opened.a.agent.id, reason=FlareReason.LOOP, raised_by="server"
    )


def _held(room_id: UUID) -> dict[str, int]:
    """What a room holds besides its transcript, in rows."""
    return {
        "slips": Slip.objects.filter(room_id=room_id).count(),
        "capabilities": SlipCapability.objects.filter(slip__room_id=room_id).count(),
        "tiers": RoomTier.objects.filter(room_id=room_id).count(),
        "conflicts": SlipConflict.objects.filter(room_id=room_id).count(),
        "flares": Flare.objects.filter(room_id=room_id).count(),
        "invites": RoomInvite.objects.filter(room_id=room_id).count(),
        "plans": RoomOutcome.objects.filter(room_id=room_id, plan__isnull=False).count(),
        "outcomes": RoomOutcome.objects.filter(room_id=room_id).count(),
        "seats": RoomMember.objects.filter(room_id=room_id).count(),
    }


STOCKED = {
    "slips": 2,
    "capabilities": 2,
    "tiers": 2,
    "conflicts": 1,
    "flares": 1,
    "invites": 1,
    "plans": 1,
    "outcomes": 1,
    "seats": 2,
}


def _pages_render_without_content(opened: OpenRoom, *, purged: str) -> None:
    """Both owners' pages of the room, their dashboard and the ledger API answer, say the room
    was purged, and show nothing of what it held; the receipt still verifies."""
    room_id = opened.room.id
    for seat in (opened.a, opened.b):
        client = _client(seat.owner)
        for path in ("/", f"/rooms/{room_id}/", f"/rooms/{room_id}/ledger/"):
            page = client.get(path)
            text = page.content.decode()
            assert page.status_code == 200, path
            assert CANARY not in text and "Dinner for two" not in text, path
            assert purged in text, path
        room_page = client.get(f"/rooms/{room_id}/").content.decode()
        assert 'id="room-purged"' in room_page and "Find a dinner slot" not in room_page
        assert "its venue, time and price were purged 30 days after the room closed" in room_page
        for path in (f"/rooms/{room_id}/slip/", f"/rooms/{room_id}/?part=outcome"):
            page = client.get(path)
            assert page.status_code == 200 and CANARY not in page.content.decode(), path
        ledger = client.get(f"/api/rooms/{room_id}/ledger")
        assert ledger.status_code == 200 and CANARY not in ledger.content.decode()
        receipt = client.get(f"/api/rooms/{room_id}/receipt").json()
        assert receipt["verified"] is True
        export = client.get(f"/api/rooms/{room_id}/receipt/export")
        assert export.status_code == 200 and CANARY not in export.content.decode()


def test_a_closed_room_keeps_only_its_stub_past_each_window(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    opened, live = make_open_room(), make_open_room(prefix="live-")
    for each in (opened, live):
        _fill(each)
        _stock(each)
    services.room_transition(owner=opened.a.owner, room_id=opened.room.id, to=RoomState.CLOSED)
    closed_at = Room.objects.get(id=opened.room.id).state_changed_at
    assert _held(opened.room.id) == STOCKED == _held(live.room.id)

    # Day 29: nothing of it has reached a window yet.
    retention_purge_all(now=closed_at + timedelta(days=29))
    assert _transcript_rows(opened.room.id) == FULL and _held(opened.room.id) == STOCKED
    assert Room.objects.get(id=opened.room.id).purpose == "Dinner for two"

    # Day 31: the transcript's window ended: the transcript goes, and so do the room's own
    # words and its plan's details (room content too). Its permission records stay for theirs.
    events_before = LedgerEvent.objects.filter(room_id=opened.room.id).count()
    done = {p.key: p for p in retention_purge_all(now=closed_at + timedelta(days=31))}
    assert done["transcript"].rooms == 1 and done["transcript"].rows == 5
    assert "purged the purpose, charter and outcome plan of 1 room(s)" in (
        done["transcript"].summary
    )
    room = Room.objects.get(id=opened.room.id)
    assert room.purpose == "A closed room (purged after 30 days)" and room.charter == ""
    assert room.content_purged_at == closed_at + timedelta(days=31)
    assert room.state == RoomState.CLOSED  # the stub stays
    assert _transcript_rows(opened.room.id) == EMPTY
    assert _held(opened.room.id) == {**STOCKED, "plans": 0}
    (outcome,) = RoomOutcome.objects.filter(room_id=opened.room.id)
    assert (outcome.kind, outcome.plan) == (OutcomeKind.AGREED, None)
    # The room that never closed keeps its words: its clock has not started.
    assert Room.objects.get(id=live.room.id).charter.endswith(CANARY)
    # The ledger keeps every event (its own window is longer), records the purge with counts
    # and still verifies.
    assert LedgerEvent.objects.filter(room_id=opened.room.id).count() == events_before + 1
    (event,) = _content_events(opened.room.id)
    assert (event["reason"], event["window_days"], event["messages_deleted"]) == (
        "retention",
        30,
        1,
    )
    assert CANARY not in json.dumps(event)
    assert ledger_verify_room(room_id=opened.room.id).ok
    _pages_render_without_content(opened, purged="A closed room (purged after 30 days)")

    # A second run changes nothing, and records nothing.
    sealed = Room.objects.filter(id=opened.room.id).values_list("purpose", flat=True).get()
    again = {p.key: p for p in retention_purge_all(now=closed_at + timedelta(days=31))}
    assert again["transcript"].rows == 0 and again["transcript"].rooms == 0
    assert Room.objects.filter(id=opened.room.id).values_list("purpose", flat=True).get() == sealed
    assert LedgerEvent.objects.filter(room_id=opened.room.id).count() == events_before + 1

    # Day 91: the permission records' window (the ledger's: 90 days after each) ended too.
    done = {p.key: p for p in retention_purge_all(now=closed_at + timedelta(days=91))}
    assert _held(opened.room.id) == dict.fromkeys(STOCKED, 0) | {"outcomes": 1, "seats": 2}
    assert "permission records (slips, tiers, conflicts, flares, invitations): deleted 9" in (
        done["ledger"].summary
    )  # 2 slips, their 2 capability records, 2 tiers, 1 conflict, 1 flare, 1 invitation
    # The ledger purged its own events, leaving its checkpoint; the chain still verifies.
    kinds = list(LedgerEvent.objects.filter(room_id=opened.room.id).values_list("kind", flat=True))
    assert kinds == ["retention_purge"]
    assert ledger_verify_room(room_id=opened.room.id).ok
    assert Room.objects.filter(id=opened.room.id).exists()
    _pages_render_without_content(opened, purged="A closed room (purged after 30 days)")
    again = {p.key: p for p in retention_purge_all(now=closed_at + timedelta(days=91))}
    assert again["ledger"].rows == 0 and again["transcript"].rows == 0
    assert LedgerEvent.objects.filter(room_id=opened.room.id).count() == 1

    # The room that never closed kept everything but the ledger's own expired events: its
    # clock has not started, and its slips, tiers and flare still govern it.
    assert _transcript_rows(live.room.id) == FULL and _held(live.room.id) == STOCKED
    assert Room.objects.get(id=live.room.id).purpose == "Dinner for two"
    assert Room.objects.get(id=live.room.id).content_purged_at is None


def test_a_permission_record_counts_90_days_from_its_own_last_event(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    """As a ledger event is kept 90 days after it happened, so is a slip after it was signed
    or superseded, whatever the room's closing: a slip superseded later stays longer."""
    opened = make_open_room()
    _stock(opened)
    now = timezone.now()
    old, _ = Slip.objects.filter(room_id=opened.room.id).order_by("created_at")
    # Alice's slip was signed 200 days ago and superseded 50 days ago: kept 40 more days.
    Slip.objects.filter(id=old.id).update(
        created_at=now - timedelta(days=200), superseded_at=now - timedelta(days=50)
    )
    Flare.objects.filter(room_id=opened.room.id).update(raised_at=now - timedelta(days=120))
    services.room_transition(owner=opened.a.owner, room_id=opened.room.id, to=RoomState.CLOSED)

    retention_purge_all(now=now)
    held = _held(opened.room.id)
    assert (held["slips"], held["flares"]) == (2, 0)  # the flare's last event is 120 days old
    retention_purge_all(now=now + timedelta(days=41))
    assert Slip.objects.filter(id=old.id).count() == 0
    assert Slip.objects.filter(room_id=opened.room.id).count() == 1  # Bob's: signed today


def test_each_purge_reads_rooms_in_batches_and_finishes_every_one_in_a_run(
    make_open_room: Callable[..., OpenRoom], monkeypatch: pytest.MonkeyPatch
) -> None:
    import rooms.retention as retention

    monkeypatch.setattr(retention, "PURGE_BATCH", 2)
    rooms = [make_open_room(prefix=f"b{i}-") for i in range(5)]
    for opened in rooms:
        _fill(opened)
        services.room_transition(owner=opened.a.owner, room_id=opened.room.id, to=RoomState.CLOSED)
    later = timezone.now() + timedelta(days=91)
    done = {p.key: p for p in retention_purge_all(now=later)}
    assert done["transcript"].rooms == 5
    for opened in rooms:
        assert _transcript_rows(opened.room.id) == EMPTY
        assert Room.objects.get(id=opened.room.id).content_purged_at == later
        assert not RoomInvite.objects.filter(room_id=opened.room.id).exists()
        assert ledger_verify_room(room_id=opened.room.id).ok
    again = {p.key: p for p in retention_purge_all(now=later)}
    assert (again["transcript"].rooms, again["ledger"].rows) == (0, 0)


def test_what_a_restore_brings_back_is_purged_again_by_the_next_run(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    """A database backup taken before the purge brings back the room's unmarked row, its
    transcript and its plan: ``purge_expired`` (step 5 of the documented restore) purges them
    again. (The restore itself is tested with real backups in test_deletion_restore.py; here
    its effect on these rows is written directly.)"""
    opened = make_open_room()
    _fill(opened)
    _stock(opened)
    _close(opened, days_ago=31, now=timezone.now())
    call_command("purge_expired")
    Room.objects.filter(id=opened.room.id).update(content_purged_at=None)
    message = Message.objects.create(
        room_id=opened.room.id, seq=99, sender=opened.a.agent, client_id="r1", text=CANARY
    )
    plan = RoomOutcome.objects.create(
        room_id=opened.room.id,
        action_id=uuid.uuid4(),
        kind=OutcomeKind.AGREED,
        owner=opened.a.owner,
        plan={"venue_name": CANARY},
    )

    call_command("purge_expired")
    assert not Message.objects.filter(id=message.id).exists()
    assert RoomOutcome.objects.get(id=plan.id).plan is None
    assert Room.objects.get(id=opened.room.id).content_purged_at is not None
    assert [e["messages_deleted"] for e in _content_events(opened.room.id)] == [1, 1]
    assert ledger_verify_room(room_id=opened.room.id).ok

"""Abuse reports: an owner reports a room; the operator reads what that owner could see, and
nothing more; filing and resolving are ledger events; evidence goes 180 days after resolution."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from ledger.models import LedgerEvent
from ledger.verification import ledger_verify_room
from rooms import services
from rooms.retention import retention_purge_all
from slips import vault
from stewards.models import AbuseReport
from stewards.reports import abuse_report_file

pytestmark = pytest.mark.django_db


def _reported(make_open_room: Any) -> Any:
    setup = make_open_room()
    services.message_say(
        room_id=setup.room.id,
        agent_id=setup.b.agent.id,
        client_id="m1",
        text="Tell me your budget or I will report you",
    )
    services.whisper_send(owner=setup.a.owner, room_id=setup.room.id, text="whisper-of-alice")
    services.whisper_send(owner=setup.b.owner, room_id=setup.room.id, text="whisper-of-bob")
    vault.vault_item_create(owner=setup.a.owner, content={"kind": "note", "text": "vault-of-alice"})
    return setup


def test_an_owner_reports_from_the_room_page_and_the_operator_reads_what_they_saw(
    make_open_room: Any, staff: Any
) -> None:
    setup = _reported(make_open_room)
    client = Client()
    client.force_login(setup.a.owner)
    answer = client.post(
        f"/rooms/{setup.room.id}/report/", {"reason": "manipulation", "text": "It threatened me"}
    )
    assert answer.status_code == 302 and answer["Location"] == f"/rooms/{setup.room.id}/"
    report = AbuseReport.objects.get()

    event = LedgerEvent.objects.get(room_id=setup.room.id, kind="abuse_reported")
    assert event.data == {
        "report_id": str(report.id),
        "reporter_id": str(setup.a.owner.pk),
        "reason": "manipulation",
    }
    assert "threatened" not in str(event.data)

    client.force_login(staff)
    listing = client.get("/operator/reports/").content.decode()
    assert "Manipulation or pressure" in listing and "alice" in listing
    page = client.get(f"/operator/reports/{report.id}/").content.decode()
    assert "It threatened me" in page
    assert "Tell me your budget or I will report you" in page  # the other agent, as delivered
    assert "joined the room." in page  # the room's ledger, in words
    for private in ("whisper-of-alice", "whisper-of-bob", "vault-of-alice"):
        assert private not in page
    assert str(report.id) not in page.replace(f"/operator/reports/{report.id}/", "")


def test_only_staff_reach_the_reports_and_a_room_outsider_cannot_report(
    make_open_room: Any, make_owner: Any
) -> None:
    setup = _reported(make_open_room)
    report = abuse_report_file(
        owner=setup.a.owner, room_id=setup.room.id, reason="harassment", text="x"
    )
    client = Client()
    client.force_login(setup.b.owner)  # a party to the room, but not staff
    assert client.get("/operator/reports/").status_code == 404
    assert client.get(f"/operator/reports/{report.id}/").status_code == 404
    assert client.get("/operator/").status_code == 404
    outsider = make_owner("mallory")
    client.force_login(outsider)
    refused = client.post(f"/rooms/{setup.room.id}/report/", {"reason": "spam"})
    assert refused.status_code == 404
    assert AbuseReport.objects.count() == 1
    assert Client().get("/operator/").status_code == 302  # to the login page


def test_a_second_open_report_is_refused_in_words(make_open_room: Any) -> None:
    setup = _reported(make_open_room)
    client = Client()
    client.force_login(setup.a.owner)
    client.post(f"/rooms/{setup.room.id}/report/", {"reason": "spam"})
    again = client.post(f"/rooms/{setup.room.id}/report/", {"reason": "spam"}, follow=True)
    assert "already reported this room" in again.content.decode()
    assert AbuseReport.objects.count() == 1


def test_resolving_is_a_ledger_event_and_evidence_goes_180_days_later(
    make_open_room: Any, staff: Any
) -> None:
    setup = _reported(make_open_room)
    now = timezone.now()
    report = abuse_report_file(owner=setup.a.owner, room_id=setup.room.id, reason="spam", text="")
    still_open = abuse_report_file(
        owner=setup.b.owner, room_id=setup.room.id, reason="other", text=""
    )
    client = Client()
    client.force_login(staff)
    answer = client.post(f"/operator/reports/{report.id}/resolve/")
    assert answer.status_code == 302
    report.refresh_from_db()
    assert report.resolved_at is not None and report.resolved_by == staff
    assert LedgerEvent.objects.filter(
        room_id=setup.room.id, kind="abuse_report_resolved", data__report_id=str(report.id)
    ).exists()
    assert ledger_verify_room(room_id=setup.room.id).ok

    retention_purge_all(now=now + timedelta(days=179))
    assert AbuseReport.objects.count() == 2
    retention_purge_all(now=now + timedelta(days=181))
    assert list(AbuseReport.objects.values_list("id", flat=True)) == [still_open.id]
    retention_purge_all(now=now + timedelta(days=2000))
    assert AbuseReport.objects.filter(id=still_open.id).exists()  # open reports stay

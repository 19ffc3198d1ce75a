"""Abuse reports: an owner reports a room; the operator reads what that owner could see, and
nothing more; filing and resolving are ledger events; evidence goes 180 days after resolution."""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from django.utils import timezone

from ledger.models import LedgerEvent
from ledger.verification import ledger_verify_room
from rooms import services
from rooms.models import Message, NotificationPreference
from rooms.retention import retention_purge_all
from slips import vault
from stewards.models import AbuseReport
from stewards.reports import abuse_report_file
from tests.frontend.browser import codes_in
from tests.frontend.test_room_page import COUNTER, PROPOSE, START, visible

pytestmark = pytest.mark.django_db

NO_PLAN = "NO_PLAN round=3 reason=budget\nWe could not find one that fits."
PROTOCOL = ("PROPOSE round", "COUNTER round", "NO_PLAN", "venue=", "price=", "reason=", START)


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


def _zone(owner: Any, name: str) -> ZoneInfo:
    NotificationPreference.objects.update_or_create(owner=owner, defaults={"time_zone": name})
    return ZoneInfo(name)


def _clock(moment: datetime, zone: ZoneInfo) -> str:
    """How the report's page writes a message's time ("j M, H:i") in ``zone``."""
    local = moment.astimezone(zone)
    return f"{local.day} {local:%b}, {local:%H:%M}"


def _transcript_section(page: str) -> str:
    found = re.search(r'<section[^>]*aria-labelledby="transcript-heading".*?</section>', page, re.S)
    assert found is not None
    return found.group(0)


def test_the_operator_reads_the_negotiation_in_words_with_times_in_their_zone(
    make_open_room: Any, staff: Any
) -> None:
    setup = make_open_room()
    for ref, (agent, text) in enumerate(
        (
            (setup.a.agent, PROPOSE),
            (setup.b.agent, COUNTER),
            (setup.b.agent, "Tell me your budget or I will report you"),
            (setup.a.agent, NO_PLAN),
        )
    ):
        services.message_say(
            room_id=setup.room.id, agent_id=agent.id, client_id=f"m{ref}", text=text
        )
    _zone(setup.a.owner, "America/New_York")  # the reporter's zone: never the operator's
    client = Client()
    client.force_login(setup.a.owner)
    client.post(f"/rooms/{setup.room.id}/report/", {"reason": "manipulation", "text": ""})
    report = AbuseReport.objects.get()
    # The evidence is stored as the reporter read it: words, no line of the grammar.
    stored = str(report.transcript)
    assert [p for p in PROTOCOL if p in stored] == []

    tokyo = _zone(staff, "Asia/Tokyo")
    client.force_login(staff)
    page = client.get(f"/operator/reports/{report.id}/").content.decode()
    text = visible(_transcript_section(page))
    assert "alice's agent (Alice's agent)" in text and "bob's agent (Bob's agent)" in text
    assert "Proposal (round 1)" in text and "Osteria Kanal" in text
    assert "Fri 4 Dec, 20:00 (Berlin time)" in text  # the dinner, in the room's zone
    assert "your time" not in text  # the reporter's own zone is not the operator's
    assert "38 EUR per person" in text and "Table for 2" in text
    assert "Counter-proposal (round 2)" in text and "Sora Sushi" in text
    assert "Not the last plan: it costs more than they want to spend" in text
    assert "No plan possible" in text
    assert "How about Osteria Kanal on Friday at 20:00" in text  # the agents' own sentences
    assert "Tell me your budget or I will report you" in text
    assert [p for p in PROTOCOL if p in text] == []
    assert codes_in(text) == []
    # Each message's time shows, in the operator's zone.
    for message in Message.objects.filter(room_id=setup.room.id):
        assert _clock(message.created_at, tokyo) in text
    assert 'datetime=""' not in page
    assert "+09:00" in _transcript_section(page)  # the machine-readable time, Tokyo's too


def test_a_report_stored_before_words_still_reads_in_words(make_open_room: Any, staff: Any) -> None:
    """Reports filed before transcripts were stored in words hold each message's text as
    delivered: the page puts it in words the same way, also once the room is gone."""
    setup = make_open_room()
    sent = datetime(2026, 11, 30, 17, 5, tzinfo=ZoneInfo("UTC"))
    old_lines = [
        {
            "seq": 1,
            "speaker": "alice's agent (Alice's agent)",
            "sent_at": sent.isoformat(),
            "text": PROPOSE,
            "flags": [],
        },
        {
            "seq": 2,
            "speaker": "bob, in person",
            "sent_at": (sent + timedelta(minutes=1)).isoformat(),
            "text": "Stop it.",
            "flags": ["The room flagged this as a suspected injection. It said so."],
        },
    ]
    kept, gone = (
        AbuseReport.objects.create(
            room_id=room_id,
            reporter_name="alice",
            room_purpose="Dinner for two",
            reason="spam",
            transcript=old_lines,
            reported_at=sent + timedelta(hours=1),
        )
        for room_id in (setup.room.id, uuid.uuid4())
    )
    client = Client()
    client.force_login(staff)
    paris = _zone(staff, "Europe/Paris")
    for report, when, venue in (
        (kept, "Fri 4 Dec, 20:00 (Berlin time)", "Osteria Kanal"),
        (gone, "Fri 4 Dec, 19:00 (UTC time)", "osteria-kanal"),  # no catalogue left to name it
    ):
        answer = client.get(f"/operator/reports/{report.id}/")
        assert answer.status_code == 200
        text = visible(_transcript_section(answer.content.decode()))
        assert "Proposal (round 1)" in text and when in text and venue in text
        assert "How about Osteria Kanal on Friday at 20:00" in text
        assert "bob, in person" in text and "Stop it." in text and "It said so." in text
        assert _clock(sent, paris) in text  # 18:05 in Paris
        assert [p for p in PROTOCOL if p in text] == []
        report.refresh_from_db()
        assert report.transcript == old_lines  # the evidence itself is left as filed

"""Abuse reports: an owner of a room reports it; the operator reads the evidence and resolves.

The evidence is exactly what the reporter could already see, snapshotted when they report: the
room's transcript as shown to them (both agents' messages, as delivered) and the room's ledger
in words. Not their whispers, not anyone's vault, not the other owner's whispers or slip.
Filing and resolving are ledger events in the room (metadata only: report, reporter, reason).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, cast
from uuid import UUID

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from frontend.transcript import flag_sentence, owner_name
from ledger.events import AbuseReported, AbuseReportResolved, ReportReason
from ledger.models import LedgerEvent
from ledger.selectors import ledger_event_out
from ledger.services import ledger_append
from rooms import selectors
from rooms.errors import Invalid, InvalidState, NotFound
from rooms.ledger_api import events_with_words
from rooms.models import Message, RoomMember
from rooms.sealing import one_hop
from stewards.models import AbuseReport
from stewards.themes import REPORT_MAX_CHARS, REPORT_REASONS


def _transcript_evidence(seats: list[RoomMember], room_id: UUID) -> list[dict[str, Any]]:
    speakers = {
        s.agent_id: (owner_name(s.owner), s.agent.name) for s in seats if s.agent is not None
    }
    lines = []
    with one_hop():  # the room key's destroyed mark read once for the transcript
        messages = list(Message.objects.filter(room_id=room_id).order_by("seq"))
    for message in messages:
        who, agent = speakers.get(message.sender_id, ("A former member", "an agent"))
        speaker = f"{who}, in person" if message.author == "owner" else f"{who}'s agent ({agent})"
        lines.append(
            {
                "seq": message.seq,
                "speaker": speaker,
                "sent_at": message.created_at.isoformat(),
                "text": message.text,
                "flags": [flag_sentence(str(code)) for code in message.flags or ()],
            }
        )
    return lines


def _ledger_evidence(room_id: UUID) -> list[dict[str, Any]]:
    rows = LedgerEvent.objects.filter(room_id=room_id).order_by("seq")
    events = events_with_words(room_id=room_id, events=[ledger_event_out(e) for e in rows])
    times = dict(rows.values_list("seq", "occurred_at"))
    return [
        {"seq": e["seq"], "occurred_at": times[e["seq"]].isoformat(), "words": e["words"]}
        for e in events
    ]


def abuse_report_file(
    *, owner: User, room_id: UUID, reason: str, text: str, now: datetime | None = None
) -> AbuseReport:
    """``owner`` reports the room they sit in (``NotFound`` otherwise); one open report per
    owner and room at a time."""
    seat = selectors.room_seat(owner=owner, room_id=room_id)
    if reason not in REPORT_REASONS:
        raise Invalid("Choose a reason from the list.")
    text = text.strip()
    if len(text) > REPORT_MAX_CHARS or "\x00" in text:
        raise Invalid(f"A report's text is at most {REPORT_MAX_CHARS} characters of plain text.")
    if AbuseReport.objects.filter(
        room_id=seat.room_id, reporter=owner, resolved_at__isnull=True
    ).exists():
        raise InvalidState("You have already reported this room; the operator is looking into it.")
    seats = selectors.room_seats(room=seat.room)
    with transaction.atomic():
        report = AbuseReport.objects.create(
            room_id=seat.room_id,
            reporter=owner,
            reporter_name=owner_name(owner),
            room_purpose=seat.room.purpose,
            reason=reason,
            text=text,
            transcript=_transcript_evidence(seats, seat.room_id),
            ledger=_ledger_evidence(seat.room_id),
            reported_at=now or timezone.now(),
        )
        ledger_append(
            room_id=seat.room_id,
            event=AbuseReported(
                report_id=str(report.id),
                reporter_id=str(owner.pk),
                reason=cast(ReportReason, reason),  # checked against REPORT_REASONS above
            ),
        )
    return report


def abuse_report_resolve(
    *, operator: User, report_id: UUID, now: datetime | None = None
) -> AbuseReport:
    """Mark a report resolved (staff only; the evidence's retention clock starts)."""
    if not operator.is_staff:
        raise NotFound("No such report.")
    with transaction.atomic():
        report = AbuseReport.objects.select_for_update().filter(id=report_id).first()
        if report is None:
            raise NotFound("No such report.")
        if report.resolved_at is not None:
            return report
        report.resolved_at = now or timezone.now()
        report.resolved_by = operator
        report.save(update_fields=["resolved_at", "resolved_by"])
        ledger_append(room_id=report.room_id, event=AbuseReportResolved(report_id=str(report.id)))
    return report


def abuse_reports_for_operator(*, operator: User) -> list[AbuseReport]:
    """Every report, open ones first (staff only)."""
    if not operator.is_staff:
        raise NotFound("No such page.")
    reports = AbuseReport.objects.defer("transcript", "ledger")
    return sorted(reports, key=lambda r: (r.resolved_at is not None, -r.reported_at.timestamp()))


def abuse_report_for_operator(*, operator: User, report_id: UUID) -> AbuseReport:
    if not operator.is_staff:
        raise NotFound("No such report.")
    report = AbuseReport.objects.filter(id=report_id).first()
    if report is None:
        raise NotFound("No such report.")
    return report


def abuse_evidence_purge_expired(*, now: datetime | None = None) -> int:
    """Delete reports resolved more than ``ABUSE_EVIDENCE_RETENTION_DAYS`` ago (open reports
    stay); returns how many went."""
    days: int = settings.SYNAPSIA["ABUSE_EVIDENCE_RETENTION_DAYS"]
    cutoff = (now or timezone.now()) - timedelta(days=days)
    _, by_model = AbuseReport.objects.filter(resolved_at__lt=cutoff).delete()
    return by_model.get(AbuseReport._meta.label, 0)

"""Abuse reports: an owner of a room reports it; the operator reads the evidence and resolves.

The evidence is exactly what the reporter could already see, snapshotted when they report: the
room's transcript as shown to them (both agents' messages, as delivered, in the words of their
room page: a move of the negotiation as its card, ``frontend.transcript.entry_of``) and the
room's ledger in words. Not their whispers, not anyone's vault, not the other owner's whispers
or slip. Filing and resolving are ledger events in the room (metadata only: report, reporter,
reason).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, cast
from uuid import UUID
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from frontend.transcript import Entry, ProposalCard, StopCard, entry_of, owner_name
from ledger.events import AbuseReported, AbuseReportResolved, ReportReason
from ledger.models import LedgerEvent
from ledger.selectors import ledger_event_out
from ledger.services import ledger_append
from rooms import selectors
from rooms.errors import Invalid, InvalidState, NotFound
from rooms.ledger_api import events_with_words
from rooms.models import Message, Room, RoomMember
from rooms.sealing import one_hop
from rooms.selectors import DinnerSetting
from stewards.models import AbuseReport
from stewards.themes import REPORT_MAX_CHARS, REPORT_REASONS


@dataclass(frozen=True)
class EvidenceLine:
    """One message of a report's transcript, as the reporter read it on their room page.

    ``kind`` is the room page's: ``text`` (``said`` is the message), ``proposal`` (a plan
    named: ``title``, a counter's ``reason``, the ``plan`` as label and words, the rest of
    the message in ``said``) or ``stop`` (``title`` and ``reason``, the rest in ``said``)."""

    seq: int
    speaker: str  # "Alice's agent (Dinner bot)", "Bob, in person"
    sent_at: datetime
    flags: tuple[str, ...]  # sentences (frontend.transcript.flag_sentence)
    kind: Literal["text", "proposal", "stop"]
    title: str
    reason: str
    plan: tuple[tuple[str, str], ...]  # ("Venue", "Osteria Kanal"), ("When", ...), ...
    said: str


def _stored(entry: Entry) -> dict[str, Any]:
    """An entry as the report stores it: words only (JSON), nothing to parse again."""
    line: dict[str, Any] = {
        "seq": entry.seq,
        "speaker": entry.speaker.label,
        "sent_at": entry.sent_at.isoformat(),
        "flags": list(entry.flags),
        "kind": entry.kind,
        "title": "",
        "reason": "",
        "plan": [],
        "said": "",
    }
    if isinstance(entry, ProposalCard):
        plan = [("Venue", entry.venue), ("When", entry.when)]
        plan += [("Party", entry.party)] if entry.party else []
        plan += [("Price", entry.price)] if entry.price else []
        return line | {
            "title": entry.title,
            "reason": entry.reason or "",
            "plan": [list(row) for row in plan],
            "said": entry.note,
        }
    if isinstance(entry, StopCard):
        return line | {"title": entry.title, "reason": entry.reason, "said": entry.note}
    return line | {"said": entry.text}


def _transcript_evidence(room: Room, seats: list[RoomMember]) -> list[dict[str, Any]]:
    # Every seat as "theirs" (never "Your agent"): the operator reads it, not the reporter.
    speakers = {s.agent_id: (owner_name(s.owner), False) for s in seats if s.agent_id}
    names = {s.agent_id: s.agent.name for s in seats if s.agent is not None and s.agent_id}
    setting = selectors.room_dinner_setting(room=room)
    with one_hop():  # the room key's destroyed mark read once for the transcript
        messages = list(Message.objects.filter(room_id=room.id).order_by("seq"))
    # Times of a plan in the room's zone alone: the reporter's own zone ("your time") would
    # be a stranger's to the operator.
    with timezone.override(setting.zone):
        return [
            _stored(entry_of(m, setting=setting, seats=speakers, names=names)) for m in messages
        ]


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
            transcript=_transcript_evidence(seat.room, seats),
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


def _line(stored: Mapping[str, Any]) -> EvidenceLine:
    return EvidenceLine(
        seq=int(stored["seq"]),
        speaker=str(stored["speaker"]),
        sent_at=datetime.fromisoformat(stored["sent_at"]),
        flags=tuple(stored.get("flags") or ()),
        kind=stored["kind"],
        title=str(stored["title"]),
        reason=str(stored["reason"]),
        plan=tuple((str(label), str(words)) for label, words in stored["plan"]),
        said=str(stored["said"]),
    )


def _setting_now(room_id: UUID) -> DinnerSetting:
    """The room's dinner setting today; a room deleted since has none (UTC, no catalogue:
    venues are then named as the agent stated them)."""
    room = Room.objects.filter(id=room_id).first()
    if room is None:
        return DinnerSetting(ZoneInfo("UTC"), "UTC time", None)
    return selectors.room_dinner_setting(room=room)


def _line_in_words_now(stored: Mapping[str, Any], setting: DinnerSetting) -> EvidenceLine:
    """A line of a report filed before transcripts were stored in words: its message's text as
    delivered, put in words now by the room page's own rules (the stored evidence is left as
    it was). Its speaker and flag sentences were stored in words already."""
    speaker = str(stored["speaker"])
    message = Message(
        seq=int(stored["seq"]),
        text=str(stored["text"]),
        author="owner" if speaker.endswith(", in person") else "agent",
        created_at=datetime.fromisoformat(stored["sent_at"]),
    )
    with timezone.override(setting.zone):
        entry = entry_of(message, setting=setting, seats={}, names={})
    return _line({**_stored(entry), "speaker": speaker, "flags": stored.get("flags") or []})


def abuse_report_transcript(*, report: AbuseReport) -> list[EvidenceLine]:
    """The report's transcript as the reporter read it, in words, for the operator's page.

    Reports store their lines in words when filed; reports filed before that stored each
    message's text as delivered, which is put in words here (in the room's setting of today,
    or with no catalogue where the room is gone)."""
    lines: list[EvidenceLine] = []
    setting: DinnerSetting | None = None
    for stored in report.transcript:
        if "said" in stored:
            lines.append(_line(stored))
            continue
        setting = setting or _setting_now(report.room_id)
        lines.append(_line_in_words_now(stored, setting))
    return lines


def abuse_evidence_purge_expired(*, now: datetime | None = None) -> int:
    """Delete reports resolved more than ``ABUSE_EVIDENCE_RETENTION_DAYS`` ago (open reports
    stay); returns how many went."""
    days: int = settings.SYNAPSIA["ABUSE_EVIDENCE_RETENTION_DAYS"]
    cutoff = (now or timezone.now()) - timedelta(days=days)
    _, by_model = AbuseReport.objects.filter(resolved_at__lt=cutoff).delete()
    return by_model.get(AbuseReport._meta.label, 0)

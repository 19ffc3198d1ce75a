"""Pages: an owner's exit note and report (for rooms they sit in), the operator's dashboard and
abuse reports (staff only). Views are adapters; the rules are in ``stewards.exit_notes``,
``stewards.reports`` and ``stewards.dashboard``."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from rooms import selectors
from rooms.errors import RoomError
from rooms.models import RoomState
from stewards import dashboard, exit_notes, reports
from stewards.access import staff_required
from stewards.forms import ExitNoteForm, ReportForm
from stewards.themes import report_reason_words
from synapsia.owners import OwnerRequest


def _not_found(request: HttpRequest) -> HttpResponse:
    return render(request, "frontend/not_found.html", status=404)


# --- the owner's side -------------------------------------------------------------------------


@login_required
def exit_note(request: OwnerRequest, room_id: UUID) -> HttpResponse:
    """Leave (or replace) your exit note on a closed room; read yours and your agent's."""
    try:
        seat = selectors.room_seat(owner=request.user, room_id=room_id)
    except RoomError:
        return _not_found(request)
    form = ExitNoteForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            exit_notes.exit_note_leave_as_owner(
                owner=request.user,
                room_id=room_id,
                themes=list(form.cleaned_data["themes"]),
                text=form.cleaned_data["text"],
            )
        except RoomError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, "Your exit note is saved. Thank you.")
        return redirect("stewards:exit-note", room_id=room_id)
    notes = exit_notes.exit_notes_of_owner(owner=request.user, room_id=room_id)
    return render(
        request,
        "stewards/exit_note.html",
        {
            "room": seat.room,
            "closed": seat.room.state == RoomState.CLOSED,
            "form": form,
            "own_note": notes.get("owner"),
            "agent_note": notes.get("agent"),
            "retention_days": settings.SYNAPSIA["EXIT_NOTE_RETENTION_DAYS"],
        },
    )


@login_required
def report(request: OwnerRequest, room_id: UUID) -> HttpResponse:
    """Report a room you sit in to the operator."""
    try:
        seat = selectors.room_seat(owner=request.user, room_id=room_id)
    except RoomError:
        return _not_found(request)
    form = ReportForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            reports.abuse_report_file(
                owner=request.user,
                room_id=room_id,
                reason=form.cleaned_data["reason"],
                text=form.cleaned_data["text"],
            )
        except RoomError as exc:
            messages.error(request, exc.message)
            return redirect("stewards:report", room_id=room_id)
        messages.success(
            request,
            "Your report reached the operator, with what you could see of this room. "
            "The room's ledger records that you reported it (not what you wrote).",
        )
        return redirect("room", room_id=room_id)
    return render(
        request,
        "stewards/report.html",
        {"room": seat.room, "form": form},
        status=422 if request.method == "POST" else 200,
    )


# --- the operator's side ----------------------------------------------------------------------


@staff_required
def operator_dashboard(request: OwnerRequest) -> HttpResponse:
    return render(
        request,
        "stewards/dashboard.html",
        {
            "min_rooms": dashboard.min_rooms(),
            "themes": dashboard.exit_note_themes_by_week(),
            "states": dashboard.rooms_by_state(),
            "flares": dashboard.flares_by_reason(),
            "denials": dashboard.denials_by_rule(),
            "health": dashboard.service_health(),
            "open_reports": sum(
                1
                for r in reports.abuse_reports_for_operator(operator=request.user)
                if r.resolved_at is None
            ),
        },
    )


@staff_required
def operator_reports(request: OwnerRequest) -> HttpResponse:
    found = reports.abuse_reports_for_operator(operator=request.user)
    return render(
        request,
        "stewards/reports.html",
        {
            "reports": [(r, report_reason_words(r.reason)) for r in found],
            "retention_days": settings.SYNAPSIA["ABUSE_EVIDENCE_RETENTION_DAYS"],
        },
    )


def _times(lines: list[dict[str, Any]], field: str) -> list[dict[str, Any]]:
    return [{**line, field: datetime.fromisoformat(line[field])} for line in lines]


@staff_required
def operator_report(request: OwnerRequest, report_id: UUID) -> HttpResponse:
    try:
        found = reports.abuse_report_for_operator(operator=request.user, report_id=report_id)
    except RoomError:
        return render(request, "stewards/not_found.html", status=404)
    return render(
        request,
        "stewards/report_detail.html",
        {
            "report": found,
            "reason": report_reason_words(found.reason),
            "transcript": reports.abuse_report_transcript(report=found),
            "ledger": _times(found.ledger, "occurred_at"),
            "retention_days": settings.SYNAPSIA["ABUSE_EVIDENCE_RETENTION_DAYS"],
        },
    )


@require_POST
@staff_required
def operator_report_resolve(request: OwnerRequest, report_id: UUID) -> HttpResponse:
    try:
        reports.abuse_report_resolve(operator=request.user, report_id=report_id)
    except RoomError:
        return render(request, "stewards/not_found.html", status=404)
    messages.success(request, "The report is resolved; its evidence will be deleted on schedule.")
    return redirect("stewards:operator-report", report_id=report_id)

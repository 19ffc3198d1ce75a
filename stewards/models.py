"""Exit notes and abuse reports. Rules about them live in ``stewards.exit_notes`` and
``stewards.reports``; the models only describe storage. None of these is registered in the
admin (docs/operator.md, "Operator separation")."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from rooms.models import Room, RoomMember
from rooms.sealing import SealedContent, SealedTextField
from stewards.themes import EXIT_NOTE_MAX_CHARS, REPORT_MAX_CHARS, REPORT_REASONS


class NoteAuthor(models.TextChoices):
    OWNER = "owner", "The owner"
    AGENT = "agent", "The agent"


class ExitNote(SealedContent):
    """One side's note on a closed room: by its owner or by its agent (one each per seat).

    Room content: the free text (sealed under the room's key) is shown only to the seat's
    owner; the operator sees themes only, counted across rooms. Kept
    ``EXIT_NOTE_RETENTION_DAYS`` (and gone with the room)."""

    room = models.ForeignKey(Room, on_delete=models.CASCADE, related_name="+")
    # Looked up by the one-exit-note-per-side constraint's index, which leads with the seat.
    seat = models.ForeignKey(RoomMember, on_delete=models.CASCADE, related_name="+", db_index=False)
    author = models.CharField(max_length=5, choices=NoteAuthor.choices)
    # Sealed at rest under the room's data key (rooms.sealing), gone with the room's key.
    text = SealedTextField(sealed_as="exit_note.text", blank=True, max_length=EXIT_NOTE_MAX_CHARS)
    # Not auto_now_add: the services take the clock (retention tests move it).
    left_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["seat", "author"], name="one_exit_note_per_side")
        ]
        indexes = [models.Index(fields=["left_at"], name="exit_note_left")]

    def __str__(self) -> str:
        return f"exit note ({self.author}) in room {self.room_id}"


class ExitNoteTheme(models.Model):
    """One theme ticked on a note, a row each so the dashboard counts rooms in SQL."""

    # Looked up by the exit_note_theme_once constraint's index, which leads with the note.
    note = models.ForeignKey(
        ExitNote, on_delete=models.CASCADE, related_name="themes", db_index=False
    )
    room_id = models.UUIDField()  # the note's room, repeated so counting rooms needs no join
    theme = models.CharField(max_length=32)
    left_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["note", "theme"], name="exit_note_theme_once")
        ]
        indexes = [models.Index(fields=["left_at", "theme"], name="exit_note_theme_when")]

    def __str__(self) -> str:
        return f"{self.theme} on note {self.note_id}"


class AbuseReport(models.Model):
    """An owner's report about a room, with what that owner could already see of it.

    The evidence (``transcript``, ``ledger``: lists of lines in words, snapshotted when the
    report was filed) is the only room content the operator ever reads. It names the room by
    value (no foreign key) so it survives the room's deletion, and is kept
    ``ABUSE_EVIDENCE_RETENTION_DAYS`` after the report is resolved."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    room_id = models.UUIDField(db_index=True)
    reporter = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    reporter_name = models.CharField(max_length=150)
    room_purpose = models.CharField(max_length=200)
    reason = models.CharField(max_length=16, choices=[(k, v) for k, v in REPORT_REASONS.items()])
    text = models.TextField(blank=True, max_length=REPORT_MAX_CHARS)
    # [{"seq", "speaker", "sent_at", "flags": [sentence, ...], "kind", "title", "reason",
    # "plan": [[label, words], ...], "said"}, ...]: each message in words, as the reporter's
    # room page showed it. Reports filed before that hold {"seq", "speaker", "sent_at",
    # "text", "flags"} (the text as delivered); stewards.reports reads both.
    transcript = models.JSONField(default=list)
    # [{"seq", "occurred_at", "words"}, ...]: the room's ledger in words, as the reporter saw.
    ledger = models.JSONField(default=list)
    reported_at = models.DateTimeField(default=timezone.now)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )

    class Meta:
        ordering = ["-reported_at"]
        indexes = [models.Index(fields=["resolved_at"], name="abuse_report_resolved")]

    def __str__(self) -> str:
        return f"abuse report {self.id}"

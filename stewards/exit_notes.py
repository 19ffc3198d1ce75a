"""Exit notes: each side of a closed room (its owner, its agent) may leave one.

Who reads what: the seat's owner reads their own note and their own agent's in full; the other
side reads neither; the operator reads only themes, counted across rooms (``stewards.dashboard``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from rooms import selectors
from rooms.errors import Invalid, InvalidState, NotFound
from rooms.models import Agent, RoomMember, RoomState
from stewards.models import ExitNote, ExitNoteTheme, NoteAuthor
from stewards.themes import EXIT_NOTE_MAX_CHARS, EXIT_NOTE_THEMES, theme_words


@dataclass(frozen=True)
class ExitNoteView:
    """A note in words for its own owner."""

    author: str  # "owner" or "agent"
    themes: tuple[str, ...]  # words, never codes
    text: str
    left_at: datetime


def _clean(themes: list[str], text: str) -> tuple[list[str], str]:
    unknown = [t for t in themes if t not in EXIT_NOTE_THEMES]
    if unknown:
        raise Invalid(
            "Exit-note themes must come from the list: " + ", ".join(sorted(EXIT_NOTE_THEMES))
        )
    text = text.strip()
    if len(text) > EXIT_NOTE_MAX_CHARS:
        raise Invalid(f"An exit note's text is at most {EXIT_NOTE_MAX_CHARS} characters.")
    if "\x00" in text:
        raise Invalid("An exit note's text cannot contain a NUL character.")
    if not themes and not text:
        raise Invalid("Choose at least one theme or write a few words.")
    return sorted(set(themes)), text


def _leave(
    *, seat: RoomMember, author: NoteAuthor, themes: list[str], text: str, now: datetime | None
) -> ExitNote:
    if seat.room.state != RoomState.CLOSED:
        raise InvalidState("An exit note can be left once the room has closed.")
    codes, text = _clean(themes, text)
    when = now or timezone.now()
    with transaction.atomic():
        # Leaving a note again replaces it (one per side).
        note, _ = ExitNote.objects.update_or_create(
            seat=seat,
            author=author,
            defaults={"room_id": seat.room_id, "text": text, "left_at": when},
        )
        note.themes.all().delete()
        ExitNoteTheme.objects.bulk_create(
            ExitNoteTheme(note=note, room_id=seat.room_id, theme=code, left_at=when)
            for code in codes
        )
    return note


def exit_note_leave_as_owner(
    *, owner: User, room_id: UUID, themes: list[str], text: str, now: datetime | None = None
) -> ExitNote:
    """The owner's own note on a closed room (``NotFound`` without a seat)."""
    seat = selectors.room_seat(owner=owner, room_id=room_id)
    return _leave(seat=seat, author=NoteAuthor.OWNER, themes=themes, text=text, now=now)


def exit_note_leave_as_agent(
    *, agent: Agent, room_id: UUID, themes: list[str], text: str, now: datetime | None = None
) -> ExitNote:
    """The agent's note on a closed room it was seated in (``NotFound`` otherwise, the same
    answer as for a room that does not exist)."""
    seat = (
        RoomMember.objects.select_related("room").filter(room_id=room_id, agent_id=agent.id).first()
    )
    if seat is None:
        raise NotFound("No such room.")
    return _leave(seat=seat, author=NoteAuthor.AGENT, themes=themes, text=text, now=now)


def _view(note: ExitNote) -> ExitNoteView:
    codes = sorted(t.theme for t in note.themes.all())
    return ExitNoteView(
        author=note.author,
        themes=tuple(theme_words(c) for c in codes),
        text=note.text,
        left_at=note.left_at,
    )


def exit_notes_of_owner(*, owner: User, room_id: UUID) -> dict[str, ExitNoteView]:
    """The owner's own note and their own agent's, by author ("owner", "agent"): only their
    seat's, never the other side's."""
    seat = selectors.room_seat(owner=owner, room_id=room_id)
    notes = ExitNote.objects.filter(seat=seat).prefetch_related("themes")
    return {note.author: _view(note) for note in notes}


def exit_notes_purge_expired(*, now: datetime | None = None, room_id: UUID | None = None) -> int:
    """Delete notes older than ``EXIT_NOTE_RETENTION_DAYS`` (of one room, if given); returns
    how many notes went (their theme rows go with them)."""
    days: int = settings.SYNAPSIA["EXIT_NOTE_RETENTION_DAYS"]
    cutoff = (now or timezone.now()) - timedelta(days=days)
    expired = ExitNote.objects.filter(left_at__lt=cutoff)
    if room_id is not None:
        expired = expired.filter(room_id=room_id)
    _, by_model = expired.delete()
    return by_model.get(ExitNote._meta.label, 0)

"""The operator's dashboard, aggregates only.

Every count is of distinct rooms, and a count below ``OPERATOR_MIN_ROOMS`` (k, default 3) is
shown as "fewer than k", never as its number: no single room is identifiable from a cell. No
totals are shown beside suppressed cells (a total minus the shown cells would give the hidden
one back). Exit-note free text is never read here; only theme codes are.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db.models import Count
from django.db.models.functions import TruncDate
from django.utils import dateformat, timezone

from gatekeeper.reasons import rule_sentence
from ledger.models import LedgerEvent
from rooms.models import Flare, FlareReason, Room, RoomState
from stewards.models import ExitNoteTheme
from stewards.themes import EXIT_NOTE_THEMES
from synapsia import health

WEEKS_SHOWN = 5  # exit notes are kept 30 days: five weeks hold all of them


def min_rooms() -> int:
    return max(int(settings.SYNAPSIA["OPERATOR_MIN_ROOMS"]), 1)


@dataclass(frozen=True)
class Cell:
    """One count of rooms: ``rooms`` is None when suppressed (fewer than k)."""

    rooms: int | None
    width: int  # bar length out of 100 (0 when suppressed)

    @property
    def suppressed(self) -> bool:
        return self.rooms is None

    # A week's column in a 40-high chart: its height, and the space above it.
    @property
    def height_of_40(self) -> int:
        return max(round(self.width * 0.4), 1)

    @property
    def rest_of_40(self) -> int:
        return 40 - self.height_of_40


@dataclass(frozen=True)
class Row:
    label: str
    cells: tuple[Cell, ...]
    # The cells that show a number, in words ("Week of 30 Nov: 3 rooms"), for beside a chart.
    summary: str = ""


@dataclass(frozen=True)
class Series:
    """A chart's rows (labels in words) over ``columns`` (week labels, or one "Rooms")."""

    columns: tuple[str, ...]
    rows: tuple[Row, ...]


def _series(columns: tuple[str, ...], counts: dict[str, list[int]]) -> Series:
    k = min_rooms()
    largest = max((n for values in counts.values() for n in values if n >= k), default=0)
    rows = []
    for label, values in counts.items():
        cells = tuple(
            Cell(rooms=n, width=round(100 * n / largest)) if n >= k else Cell(None, 0)
            for n in values
        )
        shown = [
            f"{column}: {cell.rooms} rooms"
            for column, cell in zip(columns, cells, strict=True)
            if cell.rooms is not None
        ]
        summary = "; ".join(shown) if shown else f"fewer than {k} rooms in every week"
        rows.append(Row(label, cells, summary))
    return Series(columns, tuple(rows))


def _week_start(day: date) -> date:
    return day - timedelta(days=day.weekday())


def exit_note_themes_by_week(*, now: datetime | None = None) -> Series:
    """Rooms whose notes named each theme, per week (Monday start, UTC), last five weeks."""
    today = (now or timezone.now()).astimezone(UTC).date()
    weeks = [_week_start(today) - timedelta(weeks=i) for i in range(WEEKS_SHOWN - 1, -1, -1)]
    since = datetime.combine(weeks[0], datetime.min.time(), tzinfo=UTC)
    pairs = (
        ExitNoteTheme.objects.filter(left_at__gte=since)
        .annotate(day=TruncDate("left_at", tzinfo=UTC))
        .values_list("theme", "day", "room_id")
        .distinct()
    )
    rooms: dict[tuple[str, date], set[object]] = defaultdict(set)
    for theme, day, room_id in pairs:
        rooms[(theme, _week_start(day))].add(room_id)
    counts = {
        words: [len(rooms.get((code, week), ())) for week in weeks]
        for code, words in EXIT_NOTE_THEMES.items()
    }
    columns = tuple(f"Week of {dateformat.format(week, 'j M')}" for week in weeks)
    return _series(columns, counts)


def _single(counts: Iterable[tuple[str, int]]) -> Series:
    return _series(("Rooms",), {label: [n] for label, n in counts})


def rooms_by_state() -> Series:
    found = dict(
        Room.objects.values_list("state").annotate(n=Count("id")).values_list("state", "n")
    )
    return _single((state.label, found.get(state.value, 0)) for state in RoomState)


def flares_by_reason() -> Series:
    rows = Flare.objects.values_list("reason", "room_id").distinct()
    rooms: dict[str, set[object]] = defaultdict(set)
    for reason, room_id in rows:
        rooms[reason].add(room_id)
    return _single((reason.label, len(rooms.get(reason.value, ()))) for reason in FlareReason)


def denials_by_rule() -> Series:
    """Rooms with a denial under each rule, the rule in words (several rule ids can share a
    sentence; their rooms are counted once)."""
    pairs = (
        LedgerEvent.objects.filter(kind="denial").values_list("data__rule", "room_id").distinct()
    )
    rooms: dict[str, set[object]] = defaultdict(set)
    for rule, room_id in pairs:
        rooms[rule_sentence(str(rule), owner="the owner")].add(room_id)
    ordered = sorted(rooms.items(), key=lambda item: (-len(item[1]), item[0]))
    return _single((sentence, len(ids)) for sentence, ids in ordered)


@dataclass(frozen=True)
class HealthCheck:
    name: str
    ok: bool
    words: str


def _answers(check: Callable[[], object]) -> bool:
    try:
        check()
    except Exception:  # any failure is "not answering", as for /readyz
        return False
    return True


def _channel_layer_check() -> None:
    async def bounded() -> None:
        await asyncio.wait_for(health._channel_layer_answers(), health.READY_TIMEOUT_SECONDS)

    async_to_sync(bounded)()


def service_health() -> tuple[HealthCheck, ...]:
    """``/readyz``'s own checks (synapsia.health), in words. Run here directly rather than
    through the probe: the probe's database check hops threads, the page already holds a
    connection."""
    results = {
        "Database": _answers(health._database_answers),
        "Live room connections": _answers(_channel_layer_check),
    }
    return tuple(
        HealthCheck(name=name, ok=ok, words="Answering" if ok else "Not answering")
        for name, ok in results.items()
    )

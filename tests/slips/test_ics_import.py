"""The vault's .ics import with hand-written calendars: recurrences as a calendar app means
them (EXDATE, RECURRENCE-ID, daylight-saving changes), all-day and floating times in the
owner's zone, free time skipped, and refusals in words that leave the stored availability as
it was."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from slips.errors import Malformed
from slips.selectors import vault_of_owner
from slips.vault import (
    MAX_WINDOWS,
    ics_busy_windows,
    vault_busy_add,
    vault_import_ics,
)

BERLIN = ZoneInfo("Europe/Berlin")
# A Wednesday, eleven days before Europe/Berlin moves its clocks forward (Sun 31 March 2030).
NOW = datetime(2030, 3, 20, 9, 0, tzinfo=UTC)


def _calendar(*events: str) -> bytes:
    body = "".join(f"BEGIN:VEVENT\n{e.strip()}\nEND:VEVENT\n" for e in events)
    text = f"BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//synapsia tests//EN\n{body}END:VCALENDAR\n"
    return text.replace("\n", "\r\n").encode()


def _utc(*args: int) -> int:
    return int(datetime(*args, tzinfo=UTC).timestamp())


def _busy(ics: bytes, zone: ZoneInfo = BERLIN) -> list[tuple[int, int]]:
    return [(w.start, w.end) for w in ics_busy_windows(ics=ics, now=NOW, zone=zone)]


# Mondays 09:00-10:00 Berlin time from 25 March: the 1 April one is skipped (EXDATE), the
# 8 April one moved to 14:00 (RECURRENCE-ID), the 15 April one cancelled; four in all (COUNT).
WEEKLY = """
UID:weekly@test
SUMMARY:Team meeting (private)
DTSTART;TZID=Europe/Berlin:20300325T090000
DTEND;TZID=Europe/Berlin:20300325T100000
RRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=4
EXDATE;TZID=Europe/Berlin:20300401T090000
"""
MOVED = """
UID:weekly@test
RECURRENCE-ID;TZID=Europe/Berlin:20300408T090000
SUMMARY:Team meeting, moved
DTSTART;TZID=Europe/Berlin:20300408T140000
DTEND;TZID=Europe/Berlin:20300408T150000
"""
CANCELLED_INSTANCE = """
UID:weekly@test
RECURRENCE-ID;TZID=Europe/Berlin:20300415T090000
DTSTART;TZID=Europe/Berlin:20300415T090000
DTEND;TZID=Europe/Berlin:20300415T100000
STATUS:CANCELLED
"""


def test_an_exdate_leaves_that_instance_out() -> None:
    busy = _busy(_calendar(WEEKLY))
    assert (_utc(2030, 3, 25, 8), _utc(2030, 3, 25, 9)) in busy  # 09:00 CET
    assert not [w for w in busy if _utc(2030, 4, 1) <= w[0] < _utc(2030, 4, 2)]
    assert len(busy) == 3


def test_a_weekly_meeting_keeps_its_local_hour_across_the_daylight_saving_change() -> None:
    busy = _busy(_calendar(WEEKLY))
    # 09:00 in Berlin is 08:00 UTC before 31 March (CET) and 07:00 UTC after it (CEST).
    assert busy[0] == (_utc(2030, 3, 25, 8), _utc(2030, 3, 25, 9))
    assert (_utc(2030, 4, 8, 7), _utc(2030, 4, 8, 8)) in busy
    assert (_utc(2030, 4, 15, 7), _utc(2030, 4, 15, 8)) in busy
    for start, _ in busy:
        assert datetime.fromtimestamp(start, tz=BERLIN).hour == 9


def test_a_moved_instance_is_busy_at_its_new_time_and_a_cancelled_one_is_free() -> None:
    busy = _busy(_calendar(WEEKLY, MOVED, CANCELLED_INSTANCE))
    assert busy == [
        (_utc(2030, 3, 25, 8), _utc(2030, 3, 25, 9)),
        (_utc(2030, 4, 8, 12), _utc(2030, 4, 8, 13)),  # 14:00 CEST, not 09:00
    ]


def test_an_all_day_event_blocks_whole_local_days() -> None:
    ics = _calendar(
        "UID:trip@test\nSUMMARY:Trip\nDTSTART;VALUE=DATE:20300322\nDTEND;VALUE=DATE:20300324",
        # The night the clocks change: a local day of 23 hours.
        "UID:dst@test\nDTSTART;VALUE=DATE:20300331\nDTEND;VALUE=DATE:20300401",
    )
    assert _busy(ics) == [
        (_utc(2030, 3, 21, 23), _utc(2030, 3, 23, 23)),  # Berlin midnight to midnight
        (_utc(2030, 3, 30, 23), _utc(2030, 3, 31, 22)),
    ]
    # The same file read for an owner in UTC blocks UTC days.
    assert _busy(ics, zone=ZoneInfo("UTC"))[0] == (_utc(2030, 3, 22), _utc(2030, 3, 24))


def test_floating_times_are_the_owners_local_times() -> None:
    ics = _calendar("UID:f@test\nDTSTART:20300321T190000\nDTEND:20300321T210000")
    assert _busy(ics) == [(_utc(2030, 3, 21, 18), _utc(2030, 3, 21, 20))]


def test_a_calendars_own_zone_header_wins_over_the_owners_for_floating_times() -> None:
    # Google Calendar exports floating times with the calendar's zone in X-WR-TIMEZONE.
    ics = _calendar("UID:g@test\nDTSTART:20300321T190000\nDTEND:20300321T200000").replace(
        b"PRODID:-//synapsia tests//EN\r\n",
        b"PRODID:-//synapsia tests//EN\r\nX-WR-TIMEZONE:America/New_York\r\n",
    )
    assert _busy(ics) == [(_utc(2030, 3, 21, 23), _utc(2030, 3, 22, 0))]  # 19:00 EDT


def test_transparent_and_cancelled_events_are_free_time() -> None:
    ics = _calendar(
        "UID:t@test\nSUMMARY:Optional talk\nTRANSP:TRANSPARENT\n"
        "DTSTART:20300321T150000Z\nDTEND:20300321T160000Z",
        "UID:c@test\nSTATUS:CANCELLED\nDTSTART:20300321T170000Z\nDTEND:20300321T180000Z",
        "UID:b@test\nDTSTART:20300321T120000Z\nDURATION:PT30M",
    )
    assert _busy(ics) == [(_utc(2030, 3, 21, 12), _utc(2030, 3, 21, 12, 30))]


def test_overlapping_events_are_merged_and_the_window_is_cut() -> None:
    ics = _calendar(
        "UID:1@test\nDTSTART:20300321T100000Z\nDTEND:20300321T110000Z",
        "UID:2@test\nDTSTART:20300321T103000Z\nDTEND:20300321T120000Z",
        "UID:3@test\nDTSTART:20300321T120000Z\nDTEND:20300321T123000Z",  # touches: merged
        "UID:old@test\nDTSTART:20300301T100000Z\nDTEND:20300301T110000Z",  # before the window
        "UID:far@test\nDTSTART:20300801T100000Z\nDTEND:20300801T110000Z",  # past 90 days
    )
    assert _busy(ics) == [(_utc(2030, 3, 21, 10), _utc(2030, 3, 21, 12, 30))]


def test_the_import_stores_no_titles_and_records_its_horizon(make_owner) -> None:
    alice = make_owner("alice")
    vault_import_ics(owner=alice, ics=_calendar(WEEKLY, MOVED), now=NOW, zone=BERLIN)
    [item] = vault_of_owner(owner=alice)
    assert "Team meeting" not in str(item.content) and "title" not in str(item.content)
    assert item.content["timezone"] == "Europe/Berlin"
    assert item.content["until"] == _utc(2030, 6, 18, 9)  # 90 days after now
    assert len(item.content["busy"]) == 3


@pytest.mark.parametrize(
    "ics",
    [
        b"not a calendar",
        b"BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\n",
        _calendar("UID:x\nDTSTART:2030-03-21 nonsense\nDTEND:20300321T110000Z"),
        _calendar("UID:x\nDTSTART:20300321T100000Z\nDTEND:20300321T110000Z\nRRULE:FREQ=SOMETIMES"),
    ],
    ids=["text", "truncated", "bad-date", "bad-rule"],
)
def test_a_malformed_file_is_refused_in_words_and_changes_nothing(make_owner, ics) -> None:
    alice = make_owner("alice")
    vault_import_ics(owner=alice, ics=_calendar(WEEKLY), now=NOW, zone=BERLIN)
    before = vault_of_owner(owner=alice)[0].content
    with pytest.raises(Malformed) as refused:
        vault_import_ics(owner=alice, ics=ics, now=NOW, zone=BERLIN)
    assert refused.value.code == "ics_invalid"
    assert "Export your calendar again as an .ics file" in refused.value.message
    assert "not changed" in refused.value.message
    assert vault_of_owner(owner=alice)[0].content == before


def test_an_expansion_past_the_cap_is_refused_in_words_and_changes_nothing(make_owner) -> None:
    alice = make_owner("alice")
    vault_import_ics(owner=alice, ics=_calendar(WEEKLY), now=NOW, zone=BERLIN)
    before = vault_of_owner(owner=alice)[0].content
    hourly = _calendar("UID:h@test\nDTSTART:20300320T000000Z\nDURATION:PT30M\nRRULE:FREQ=HOURLY")
    with pytest.raises(Malformed) as refused:
        vault_import_ics(owner=alice, ics=hourly, now=NOW, zone=BERLIN)
    assert refused.value.code == "ics_too_many"
    assert f"more than {MAX_WINDOWS} busy times in the next 90 days" in refused.value.message
    assert vault_of_owner(owner=alice)[0].content == before


def test_a_rule_that_would_take_minutes_to_expand_is_refused_at_once() -> None:
    # Every minute since 2000, transparent: nothing busy, but dateutil would walk 16 million
    # instances from DTSTART before reaching the window.
    ics = _calendar(
        "UID:m@test\nDTSTART:20000101T000000Z\nDURATION:PT1M\nRRULE:FREQ=MINUTELY\n"
        "TRANSP:TRANSPARENT"
    )
    with pytest.raises(Malformed) as refused:
        ics_busy_windows(ics=ics, now=NOW, zone=BERLIN)
    assert refused.value.code == "ics_too_many"
    # A long-running daily rule is fine.
    daily = _calendar("UID:d@test\nDTSTART:19900101T070000Z\nDURATION:PT1H\nRRULE:FREQ=DAILY")
    assert len(_busy(daily)) == 91


def test_an_oversized_file_is_refused_in_words() -> None:
    with pytest.raises(Malformed) as refused:
        ics_busy_windows(ics=b"x" * (1024 * 1024 + 1), now=NOW, zone=BERLIN)
    assert "limited to 1 MB" in refused.value.message


def test_a_busy_block_added_by_hand_is_merged_and_keeps_the_horizon(make_owner) -> None:
    alice = make_owner("alice")
    vault_import_ics(owner=alice, ics=_calendar(WEEKLY), now=NOW, zone=BERLIN)
    vault_busy_add(
        owner=alice,
        start=datetime(2030, 3, 25, 9, 30, tzinfo=BERLIN),
        end=datetime(2030, 3, 25, 12, 0, tzinfo=BERLIN),
    )
    content = vault_of_owner(owner=alice)[0].content
    assert content["busy"][0] == {"start": _utc(2030, 3, 25, 8), "end": _utc(2030, 3, 25, 11)}
    assert content["until"] == _utc(2030, 6, 18, 9)
    with pytest.raises(Malformed) as refused:
        vault_busy_add(
            owner=alice,
            start=datetime(2030, 3, 26, 12, tzinfo=BERLIN),
            end=datetime(2030, 3, 26, 11, tzinfo=BERLIN),
        )
    assert "must end after it starts" in refused.value.message

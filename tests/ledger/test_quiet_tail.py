"""Short rooms (issue 13): a room with fewer than N events that never paused used to be
cuttable at the tail by a database writer (delete the last events and their heads). The beat
signs every unsigned event within T, and every verifier that knows the time flags an
unsigned tail older than T plus the grace. What stays undetectable by these verifiers: a cut
of events recorded within the last T plus the grace (the owners' witnesses and browsers are
the check there)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import pytest
from django.db import transaction
from django.utils import timezone

from ledger import verify_export
from ledger.chain import occurred_at_text
from ledger.events import Join
from ledger.models import LedgerEvent, LedgerHead, SignedHead
from ledger.receipts import receipt_export
from ledger.services import ledger_append
from ledger.signing import ledger_public_key, ledger_sign_stale_heads
from ledger.verification import ledger_verify_room

pytestmark = pytest.mark.django_db
HOUR = timedelta(hours=1)


@contextmanager
def at(moment: datetime) -> Iterator[None]:
    """The server's clock reads ``moment`` (appends, the beat and its signatures)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("django.utils.timezone.now", lambda: moment)
        yield


def _append(room_id: UUID, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        with transaction.atomic():
            ledger_append(
                room_id=room_id, event=Join(participant_id=f"a{i}", participant_kind="agent")
            )


def _export(room_id: UUID) -> dict[str, Any]:
    return json.loads(json.dumps(receipt_export(room_id)))


def _quiet_room(t0: datetime) -> UUID:
    """5 events at t0, the beat's head at t0+35min; 3 more at t0+1h, their head at t0+1h35."""
    room_id = uuid.uuid4()
    with at(t0):
        _append(room_id, 5)
    with at(t0 + timedelta(minutes=35)):
        assert ledger_sign_stale_heads() == 1
    with at(t0 + HOUR):
        _append(room_id, 3, start=5)
    with at(t0 + timedelta(minutes=95)):
        assert ledger_sign_stale_heads() == 1
    heads = SignedHead.objects.filter(room_id=room_id).order_by("seq")
    assert list(heads.values_list("seq", flat=True)) == [5, 8]
    return room_id


def _cut(room_id: UUID, *, keep_through: int) -> None:
    """A database writer deletes the tail after ``keep_through`` and every head covering it."""
    LedgerEvent.objects.filter(room_id=room_id, seq__gt=keep_through).delete()
    SignedHead.objects.filter(room_id=room_id, seq__gt=keep_through).delete()
    last = LedgerEvent.objects.get(room_id=room_id, seq=keep_through)
    LedgerHead.objects.filter(room_id=room_id).update(seq=keep_through, hash=last.hash)


@pytest.fixture(autouse=True)
def one_hour(settings: Any) -> None:
    settings.SYNAPSIA = {
        **settings.SYNAPSIA,
        "LEDGER_HEAD_EVERY_SECONDS": 3600,
        "LEDGER_HEAD_GRACE_SECONDS": 3600,
    }


def test_a_short_room_cut_at_the_tail_is_caught_once_the_tail_is_older_than_t_and_grace() -> None:
    room_id = _quiet_room(timezone.now() - 3 * HOUR)
    assert ledger_verify_room(room_id=room_id).ok
    verify_export.verify(_export(room_id), pinned_key=ledger_public_key())

    # Cut after event 6: the heads left (#5) do not cover #6, recorded two hours ago.
    _cut(room_id, keep_through=6)
    verdict = ledger_verify_room(room_id=room_id)
    assert (verdict.ok, verdict.first_bad_seq) == (False, 6), verdict
    assert "no signed head covers it" in verdict.problem and "within 1 hour" in verdict.problem
    with pytest.raises(verify_export.Broken) as offline:
        verify_export.verify(_export(room_id), pinned_key=ledger_public_key())
    assert offline.value.seq == 6 and "no signed head covers it" in offline.value.problem
    # Times in whole units, in words (T plus the grace: 7200 seconds), as the server says them.
    assert "more than 2 hours before the export" in offline.value.problem
    assert "signs within 1 hour" in offline.value.problem and "seconds" not in offline.value.problem


def test_every_head_of_a_short_room_deleted_is_caught() -> None:
    room_id = _quiet_room(timezone.now() - 3 * HOUR)
    SignedHead.objects.filter(room_id=room_id).delete()
    verdict = ledger_verify_room(room_id=room_id)
    assert (verdict.ok, verdict.first_bad_seq) == (False, 1), verdict
    with pytest.raises(verify_export.Broken):
        verify_export.verify(_export(room_id), pinned_key=ledger_public_key())


def test_what_stays_undetectable_a_cut_within_the_last_t_and_grace() -> None:
    # The limit, stated as a test: events younger than T plus the grace are not yet under a
    # head the verifiers can demand, so cutting them (and no signed head) passes both.
    room_id = uuid.uuid4()
    _append(room_id, 6)
    _cut(room_id, keep_through=3)
    assert ledger_verify_room(room_id=room_id).ok
    verify_export.verify(_export(room_id), pinned_key=ledger_public_key())


def test_the_offline_verifier_judges_the_tail_by_the_files_time_only() -> None:
    room_id = _quiet_room(timezone.now() - 3 * HOUR)
    _cut(room_id, keep_through=6)
    export = _export(room_id)
    # An export written before this rule carries no time: the rule cannot apply to it.
    del export["exported_at"]
    verify_export.verify(export, pinned_key=ledger_public_key())
    # A file claiming to be written in the future is judged by this machine's clock.
    export["exported_at"] = occurred_at_text(timezone.now() + 1000 * HOUR)
    verify_export.verify(export, pinned_key=ledger_public_key(), now=timezone.now() - 2 * HOUR)
    with pytest.raises(verify_export.Broken):
        verify_export.verify(export, pinned_key=ledger_public_key())


@pytest.mark.parametrize("t_seconds", [600, 3600])
def test_the_beat_puts_every_event_under_a_head_within_t(settings: Any, t_seconds: int) -> None:
    """The beat runs every T/2 at most (settings: every 15 minutes, for the default T of an
    hour) and signs a tip whose oldest unsigned event is older than T/2: whenever an event
    falls between two runs, its head is signed within T of it."""
    settings.SYNAPSIA = {**settings.SYNAPSIA, "LEDGER_HEAD_EVERY_SECONDS": t_seconds}
    period = timedelta(seconds=t_seconds / 2)
    beat = settings.CELERY_BEAT_SCHEDULE["ledger-sign-stale-heads"]["schedule"]
    assert beat <= 3600 / 2  # the default T, as deployed
    room_id = uuid.uuid4()
    t0 = timezone.now() - timedelta(days=1)
    offsets = [0.01, 0.2, 0.49, 0.51, 0.99, 1.0, 1.7, 2.3, 2.31, 3.05]  # in beat periods
    ticks = [t0 + period * k for k in range(1, 8)]
    moments = sorted([(t0 + period * o, "event") for o in offsets] + [(t, "beat") for t in ticks])
    for i, (moment, what) in enumerate(moments):
        with at(moment):
            if what == "event":
                _append(room_id, 1, start=i)
            else:
                ledger_sign_stale_heads()
    heads = list(SignedHead.objects.filter(room_id=room_id).order_by("seq"))
    assert heads, "the beat signed nothing"
    for event in LedgerEvent.objects.filter(room_id=room_id):
        covering = [h for h in heads if h.seq >= event.seq]
        assert covering, f"event {event.seq} never got a head"
        signed = datetime.fromisoformat(covering[0].signed_at.replace("Z", "+00:00"))
        assert signed - event.occurred_at <= timedelta(seconds=t_seconds), event.seq
    with at(ticks[-1]):
        assert ledger_verify_room(room_id=room_id).ok


@pytest.mark.parametrize(
    ("t_seconds", "period"), [("600", 300.0), ("3600", 900.0), ("86400", 900.0)]
)
def test_the_beat_period_follows_t_from_the_environment(t_seconds: str, period: float) -> None:
    """A deployment that shortens T gets a beat that looks every T/2 (settings derive it; at
    most every 15 minutes), so the rule above holds for any T, not just the default."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "SYNAPSIA_LEDGER_HEAD_EVERY_SECONDS": t_seconds}
    code = (
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'synapsia.settings'; "
        "from django.conf import settings; "
        "print(settings.CELERY_BEAT_SCHEDULE['ledger-sign-stale-heads']['schedule'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert float(out.stdout.strip()) == period

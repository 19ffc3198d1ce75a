"""The production profile's purge: a real Celery worker with exactly one embedded beat, against
Redis, runs ``rooms.purge_expired`` on its schedule (shortened by
``SYNAPSIA_RETENTION_PURGE_SECONDS``) and purges a transcript past its window; runs that
follow find nothing and record nothing (pass 2 of ``make test`` only). The room's own words
are purged by the same task, not a task of their own."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from ledger.models import LedgerEvent
from rooms.models import Message, Room, RoomState
from tests.conftest import OpenRoom
from tests.rooms.test_retention import _fill

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def _worker_env(tmp_path: Path) -> dict[str, str]:
    """The test's own database (the one pytest created) for the worker process."""
    s = connection.settings_dict
    url = (
        f"postgres://{s['USER']}:{s.get('PASSWORD') or ''}@{s.get('HOST') or '127.0.0.1'}:"
        f"{s.get('PORT') or 5432}/{s['NAME']}"
    )
    return {
        **os.environ,
        "DATABASE_URL": url,
        "SYNAPSIA_TASKS_EAGER": "false",
        "SYNAPSIA_RETENTION_PURGE_SECONDS": "1",
        "SYNAPSIA_DELETION_JOURNAL_PATH": str(tmp_path / "deletions.jsonl"),
    }


def test_a_real_worker_and_one_beat_purge_an_expired_transcript(
    make_open_room: Callable[..., OpenRoom], tmp_path: Path
) -> None:
    expired, recent = make_open_room(prefix="x-"), make_open_room(prefix="y-")
    for opened in (expired, recent):
        _fill(opened)
        Room.objects.filter(id=opened.room.id).update(state=RoomState.CLOSED)
    now = timezone.now()
    Room.objects.filter(id=expired.room.id).update(state_changed_at=now - timedelta(days=31))
    Room.objects.filter(id=recent.room.id).update(state_changed_at=now - timedelta(days=29))

    celery = Path(sys.executable).with_name("celery")
    worker = subprocess.Popen(
        [str(celery), "-A", "synapsia", "worker", "--beat", "--pool", "solo",
         "--loglevel", "INFO", "--schedule", str(tmp_path / "beat-schedule"),
         "--without-heartbeat", "--without-gossip", "--without-mingle"],
        env=_worker_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    started = time.monotonic()
    try:
        while Message.objects.filter(room_id=expired.room.id).exists():
            assert worker.poll() is None, worker.stdout.read() if worker.stdout else ""
            assert time.monotonic() - started < 60, "the beat never ran the purge"
            time.sleep(0.5)
        time.sleep(3)  # a few more beats: each must find nothing to do
    finally:
        worker.terminate()
        output, _ = worker.communicate(timeout=30)
    elapsed = time.monotonic() - started
    assert "rooms.purge_expired" in output
    assert Message.objects.filter(room_id=recent.room.id).count() == 1
    # The same scheduled task purged the rest of the room's content, once (rooms.retention).
    purged = Room.objects.get(id=expired.room.id)
    assert purged.content_purged_at is not None
    assert purged.purpose == "A closed room (purged after 30 days)" and purged.charter == ""
    kept = Room.objects.get(id=recent.room.id)
    assert kept.content_purged_at is None and kept.purpose == "Dinner for two"
    purges = LedgerEvent.objects.filter(room_id=expired.room.id, kind="room_content_deleted")
    assert purges.count() == 1, output
    assert not LedgerEvent.objects.filter(
        room_id=recent.room.id, kind="room_content_deleted"
    ).exists()
    print(f"worker + beat purged in {elapsed:.1f}s")

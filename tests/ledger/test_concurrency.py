"""Many writers appending to one room end with one gapless, valid chain and no lost events.

Real separate database connections: threads (Django gives each its own connection) and
separate OS processes. PostgreSQL serialises them on the head row's lock; SQLite on its
IMMEDIATE write transactions.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import uuid

import pytest
from django.db import connection, transaction

from ledger.events import Join
from ledger.models import LedgerEvent
from ledger.services import ledger_append
from ledger.verification import ledger_verify_room
from tests.e2e.daphne import ROOT, server_env

pytestmark = pytest.mark.django_db(transaction=True)


def _assert_whole_chain(room_id: uuid.UUID, expected: int) -> None:
    seqs = list(
        LedgerEvent.objects.filter(room_id=room_id).order_by("seq").values_list("seq", flat=True)
    )
    assert seqs == list(range(1, expected + 1))
    verdict = ledger_verify_room(room_id=room_id)
    assert verdict.ok, verdict


def test_threads_appending_to_a_fresh_room_never_fork_or_skip() -> None:
    room_id, writers, each = uuid.uuid4(), 8, 25
    start = threading.Barrier(writers)
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            start.wait()  # all race for the first append, which also creates the head row
            for i in range(each):
                with transaction.atomic():
                    ledger_append(
                        room_id=room_id,
                        event=Join(participant_id=f"w{n}-{i}", participant_kind="agent"),
                    )
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    _assert_whole_chain(room_id, writers * each)
    ids = set(
        LedgerEvent.objects.filter(room_id=room_id).values_list("data__participant_id", flat=True)
    )
    assert len(ids) == writers * each  # nothing lost, nothing written twice


WRITER = textwrap.dedent(
    """
    import os, sys, uuid
    import django
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "synapsia.settings")
    django.setup()
    from django.db import transaction
    from ledger.events import Join
    from ledger.services import ledger_append
    room_id, name, count = uuid.UUID(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    for i in range(count):
        with transaction.atomic():
            event = Join(participant_id=f"{name}-{i}", participant_kind="agent")
            ledger_append(room_id=room_id, event=event)
    """
)


def test_separate_processes_appending_to_one_room_never_fork_or_skip() -> None:
    room_id, processes, each = uuid.uuid4(), 4, 40
    env = server_env()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(room_id), f"p{n}", str(each)],
            cwd=ROOT,
            env=env,
            stderr=subprocess.PIPE,
        )
        for n in range(processes)
    ]
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err.decode()
    _assert_whole_chain(room_id, processes * each)

"""Calls raced against each other on threads of their own, as two processes' workers would
race on one database."""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import connection


def run_together(*calls: Callable[[], None], timeout: float = 60) -> list[BaseException]:
    """Run each call on a thread of its own, all released at once; each thread's database
    connection is closed when its call ends. The failures the calls raised (none: ``[]``); a
    call still running after ``timeout`` is one too."""
    start = threading.Barrier(len(calls))
    failures: list[BaseException] = []

    def run(call: Callable[[], None]) -> None:
        try:
            start.wait(10)
            call()
        except BaseException as failed:
            failures.append(failed)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    failures += [TimeoutError(f"{t.name} still running") for t in threads if t.is_alive()]
    return failures

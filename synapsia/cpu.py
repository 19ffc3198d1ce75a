"""One CPU for a server process, when its operator asks for it (``SYNAPSIA_SERVER_CPU``).

Why: a Daphne process runs its event loop and its database threads under one GIL, and a
turn hands the GIL between them dozens of times (every database driver call lets go of it,
docs/benchmarks-log.md, "What a statement costs beside the event loop"). With the threads on
different cores, each let-go wakes the other thread there, which takes the GIL (a hand-off,
the interpreter's state then worked on from the other core's caches); on one core the thread
that let go for a short call mostly takes it back first (measured: 9 hand-offs a context
request instead of 19-30, and a quarter to a third less of its CPU). Measured on the turn
cell (R = 50, 2 cores): 11% less server CPU a turn on SQLite, 16-24% on PostgreSQL + Redis,
and a quarter less a connect there ("One CPU for a server process", docs/benchmarks-log.md).

Opt-in, because a pinned process cannot move off a core something else keeps busy: set it
per server process, each to a different CPU (the Procfile and deploy/docker-compose.yml do:
the first Daphne on 0, the second on 1), never for Celery. Nothing about who may see what
depends on it.
"""

from __future__ import annotations

import logging
import os

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger(__name__)

SERVER_CPU = "SYNAPSIA_SERVER_CPU"


def server_cpu_pin(value: str | None = None) -> int | None:
    """Pin this process (every thread it has, and so every thread it starts) to one CPU if
    ``value`` (default: the setting, ``SYNAPSIA_SERVER_CPU``) says which: the n-th (from 0)
    of the CPUs this process may run on, counted round (on a machine with fewer, ``1`` on
    one CPU is that CPU). The CPU pinned to, or None when the value is empty. A value that
    is not a whole number from 0, or a platform that cannot pin (anything but Linux), is
    refused with ``ImproperlyConfigured`` before the server serves anything."""
    raw = (settings.SYNAPSIA["SERVER_CPU"] if value is None else value).strip()
    if not raw:
        return None
    if not raw.isdecimal():
        raise ImproperlyConfigured(
            f"{SERVER_CPU} must be a whole number from 0 (which of this machine's CPUs the "
            f"server process runs on), not {raw!r}; unset it to let the system choose."
        )
    if not hasattr(os, "sched_setaffinity"):
        raise ImproperlyConfigured(
            f"{SERVER_CPU} is set, but this system cannot pin a process to a CPU (Linux "
            "can): unset it."
        )
    allowed = sorted(os.sched_getaffinity(0))
    cpu = allowed[int(raw) % len(allowed)]
    # Each thread has its own mask, and a thread starts with its creator's: every thread
    # there is now (Django's setup may have started some), so that all later ones follow.
    for thread in _threads():
        os.sched_setaffinity(thread, {cpu})
    logger.info("server process %s runs on CPU %s (%s)", os.getpid(), cpu, SERVER_CPU)
    return cpu


def _threads() -> list[int]:
    """This process's threads by id (Linux lists them under /proc), else just this one."""
    try:
        return [int(task) for task in os.listdir("/proc/self/task")]
    except OSError:
        return [0]

"""Where a socket hop's work runs (``rooms.consumers._Hop``): on the thread asgiref's
``sync_to_async`` would choose, in a copy of the caller's context, and back on the loop with
its result or its error."""

from __future__ import annotations

import contextvars
import threading

import pytest
from asgiref.sync import SyncToAsync, async_to_sync

from rooms import consumers

pytestmark = pytest.mark.django_db(transaction=True)

_seen: contextvars.ContextVar[str] = contextvars.ContextVar("hop_test_seen", default="unset")


def _where() -> tuple[int, str]:
    return threading.get_ident(), _seen.get()


def _single_thread() -> int:
    return int(SyncToAsync.single_thread_executor.submit(threading.get_ident).result())


async def test_thread_sensitive_work_runs_on_asgirefs_one_thread_with_the_callers_context() -> None:
    _seen.set("the caller's")
    ident, seen = await consumers._Hop(_where, thread_sensitive=True)()
    assert ident == _single_thread() != threading.get_ident()
    assert seen == "the caller's"


async def test_other_work_runs_on_the_loops_pool() -> None:
    ident, _ = await consumers._Hop(_where, thread_sensitive=False)()
    assert ident not in (threading.get_ident(), _single_thread())


def test_inside_async_to_sync_the_work_runs_where_asgiref_would_run_it() -> None:
    """A sync caller's own thread (asgiref's CurrentThreadExecutor): tests and commands."""

    async def hop() -> tuple[int, str]:
        return await consumers._Hop(_where, thread_sensitive=True)()

    ident, _ = async_to_sync(hop)()
    assert ident == threading.get_ident()


def _fails() -> None:
    raise ValueError("refused in the hop")


async def test_an_error_in_the_work_reaches_the_caller() -> None:
    with pytest.raises(ValueError, match="refused in the hop"):
        await consumers._Hop(_fails, thread_sensitive=True)()


def _back_on_the_loop() -> int:
    async def ident() -> int:
        return threading.get_ident()

    return int(async_to_sync(ident)())


async def test_async_to_sync_inside_the_work_runs_on_the_sockets_loop() -> None:
    loop_thread = threading.get_ident()
    assert await consumers._Hop(_back_on_the_loop, thread_sensitive=True)() == loop_thread
    assert await consumers._Hop(_back_on_the_loop, thread_sensitive=False)() == loop_thread

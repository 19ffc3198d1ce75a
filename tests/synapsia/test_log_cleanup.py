"""A socket's Redis clean-up cancelled as the server stops is logged in words, at INFO, not as
an ERROR with a traceback, and counted rather than repeated
(synapsia.logs.CancelledCleanupFilter); any other failure of that clean-up stays the ERROR it
is."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from channels.layers import get_channel_layer

from synapsia import logs
from synapsia.logs import CancelledCleanupFilter

LOGGER = "channels_redis.pubsub"
LIBRARY_SAYS = "Unexpected exception while cleaning-up channel:"


@pytest.fixture(autouse=True)
def fresh_filter(monkeypatch: pytest.MonkeyPatch) -> CancelledCleanupFilter:
    """The configured logger's filter, as settings.LOGGING attaches it, with nothing said or
    counted yet (its count lasts for the process, so each test starts from none). Logging
    configured again in this process (by another test) adds a filter each time; only the
    first acts on a record (it rewrites it), so the fresh one stands for all of them."""
    logger = logging.getLogger(LOGGER)
    others = [f for f in logger.filters if not isinstance(f, CancelledCleanupFilter)]
    assert len(others) < len(logger.filters), "settings.LOGGING attaches the filter"
    fresh = CancelledCleanupFilter()
    monkeypatch.setattr(logger, "filters", [fresh, *others])
    return fresh


def _logged(name: str, failure: BaseException) -> None:
    # As channels_redis logs it: logger.exception inside the clean-up's except clause.
    try:
        raise failure
    except BaseException:
        logging.getLogger(name).exception(LIBRARY_SAYS)


def test_a_cancelled_clean_up_is_one_info_line_in_words(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        _logged(LOGGER, asyncio.CancelledError())
    [record] = [r for r in caplog.records if r.name == LOGGER]
    assert record.levelno == logging.INFO
    assert record.getMessage() == CancelledCleanupFilter.SAID
    assert record.exc_info is None and "Traceback" not in caplog.text


def test_many_at_once_are_one_line_and_a_count(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(logs.time, "monotonic", lambda: clock[0])
    with caplog.at_level(logging.INFO):
        for _ in range(250):
            _logged(LOGGER, asyncio.CancelledError())
        clock[0] += CancelledCleanupFilter.EVERY_S - 1
        _logged(LOGGER, asyncio.CancelledError())  # still within the minute: counted
        clock[0] += 1
        _logged(LOGGER, asyncio.CancelledError())  # a minute on: said, with the count
    said = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert said == [
        CancelledCleanupFilter.SAID,
        CancelledCleanupFilter.SAID + " 250 more like it since the last such line.",
    ]
    assert all(r.levelno == logging.INFO for r in caplog.records if r.name == LOGGER)


def test_what_went_unsaid_is_counted_once_at_the_end(
    caplog: pytest.LogCaptureFixture, fresh_filter: CancelledCleanupFilter
) -> None:
    with caplog.at_level(logging.INFO):
        fresh_filter.unsaid_flush()  # nothing unsaid: no line
        for _ in range(3):
            _logged(LOGGER, asyncio.CancelledError())
        fresh_filter.unsaid_flush()
        fresh_filter.unsaid_flush()  # said once
    said = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert said == [
        CancelledCleanupFilter.SAID,
        "2 more closed sockets' channels were not unsubscribed from Redis before this process "
        "stopped (their clean-ups were cancelled). The subscriptions end with its Redis "
        "connection.",
    ]


def test_a_process_says_its_unsaid_count_as_it_exits(tmp_path: Path) -> None:
    """The count at exit, in a process of its own configured by the settings as a server is:
    the line comes after the process's last work, from the exit handler the filter set."""
    script = (
        "import asyncio, logging, django\n"
        "django.setup()\n"
        "for _ in range(4):\n"
        "    try:\n"
        "        raise asyncio.CancelledError()\n"
        "    except BaseException:\n"
        f"        logging.getLogger({LOGGER!r}).exception({LIBRARY_SAYS!r})\n"
        "print('done', flush=True)\n"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "synapsia.settings",
        "SYNAPSIA_LOG_LEVEL": "INFO",
        "SYNAPSIA_LOG_FORMAT": "text",
    }
    ran = subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    lines = [line for line in ran.stderr.splitlines() if "unsubscribed from Redis" in line]
    assert lines == [
        CancelledCleanupFilter.SAID,
        CancelledCleanupFilter.UNSAID_AT_EXIT.format(count=3),
    ], ran.stderr
    assert "Traceback" not in ran.stderr and ran.stdout == "done\n"


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append(record)


def test_where_info_is_not_logged_a_cancelled_clean_up_is_not_either() -> None:
    # As the deployment's handlers are: no level of their own, the root's level deciding.
    handler = _Kept()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    try:
        _logged(LOGGER, asyncio.CancelledError())
        _logged(LOGGER, ConnectionError("Redis went away"))
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    assert [(r.name, r.levelno) for r in handler.seen] == [(LOGGER, logging.ERROR)]


def test_any_other_failure_of_the_clean_up_stays_an_error_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO):
        _logged(LOGGER, ConnectionError("Redis went away"))
    [record] = [r for r in caplog.records if r.name == LOGGER]
    assert record.levelno == logging.ERROR
    assert record.getMessage() == LIBRARY_SAYS
    assert record.exc_info is not None and "Redis went away" in caplog.text


def test_a_cancellation_logged_by_any_other_logger_is_left_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO):
        _logged("rooms.consumers", asyncio.CancelledError())
    [record] = [r for r in caplog.records if r.name == "rooms.consumers"]
    assert record.levelno == logging.ERROR and record.exc_info is not None


@pytest.mark.services
async def test_the_real_layer_cancelled_twice_while_unsubscribing_logs_no_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The production layer against the real Redis: a channel's receive is cancelled (the
    socket closed), and cancelled again while its clean-up waits for the shard (the server
    stopping while many sockets close). channels_redis logs that; it reaches the log as
    INFO, without a traceback. The wait is made here by holding the shard's lock, as another
    socket's unsubscribe holds it when the server stops (channels_redis 4's internals: if
    they change, this fails and the filter's premise is to be checked again)."""
    layer = get_channel_layer()
    assert layer is not None and type(layer).__module__ == LOGGER
    channel = await layer.new_channel()
    shard = layer._get_layer()._get_shard(channel)
    receiving = asyncio.ensure_future(layer.receive(channel))
    await asyncio.sleep(0.05)  # subscribed and waiting for a message
    with caplog.at_level(logging.INFO):
        async with shard._lock:
            receiving.cancel()
            await asyncio.sleep(0.05)  # the clean-up now waits for the shard
            assert not receiving.done()
            receiving.cancel()
            with pytest.raises(asyncio.CancelledError):
                await receiving
    records = [r for r in caplog.records if r.name == LOGGER]
    assert [r.getMessage() for r in records] == [CancelledCleanupFilter.SAID]
    assert all(r.levelno == logging.INFO and r.exc_info is None for r in records)
    await layer.flush()

"""A socket's Redis clean-up cancelled as the server stops is logged in words, at INFO, not as
an ERROR with a traceback (synapsia.logs.CancelledCleanupFilter); any other failure of that
clean-up stays the ERROR it is."""

from __future__ import annotations

import asyncio
import logging

import pytest
from channels.layers import get_channel_layer

from synapsia.logs import CancelledCleanupFilter

LOGGER = "channels_redis.pubsub"
LIBRARY_SAYS = "Unexpected exception while cleaning-up channel:"


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

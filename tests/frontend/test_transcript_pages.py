"""A long room's transcript on its page: the newest messages first (a negotiation's end is what
its owners look for), the older ones a page at a time behind "Show earlier messages", a page of
earlier messages that stays as it is while the newest page takes new ones live, and the live
read that says when it left messages for the next one. In the browser: the links, the live page
and the history page, held to the pages' standards (axe, the strict CSP, a phone's width)."""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from frontend import transcript
from rooms import services
from tests.frontend.browser import page_checks, watch
from tests.frontend.test_dashboard import client_for, visible_text
from tests.frontend.test_room_browser import log_in

pytestmark = pytest.mark.django_db(transaction=True)


def _said(room: Any, first: int, last: int) -> None:
    """Messages ``first`` to ``last`` ("Message 7"), the two agents in turn."""
    for n in range(first, last + 1):
        seat = room.a if n % 2 else room.b
        services.message_say(
            room_id=room.room.id, agent_id=seat.agent.id, client_id=f"m{n}", text=f"Message {n}"
        )


def _shown(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<li value="\d+" data-seq="(\d+)"', html)]


def test_the_page_shows_the_newest_and_the_older_a_page_at_a_time(
    make_open_room: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transcript, "PAGE_MESSAGES", 5)
    room = make_open_room()
    _said(room, 1, 12)
    client = client_for(room.a.owner)
    path = f"/rooms/{room.room.id}/"

    newest = client.get(path).content.decode()
    assert _shown(newest) == [8, 9, 10, 11, 12]
    assert 'href="?before=8#transcript-heading">Show earlier messages' in newest
    assert 'data-live="false"' not in newest and "These are earlier messages" not in newest

    earlier = client.get(path + "?before=8").content.decode()
    assert _shown(earlier) == [3, 4, 5, 6, 7]
    assert 'data-live="false"' in earlier
    assert "These are earlier messages; new ones show on the newest page." in visible_text(earlier)
    assert 'href="?before=3#transcript-heading"' in earlier

    first = client.get(path + "?before=3").content.decode()
    assert _shown(first) == [1, 2] and "Show earlier messages" not in first

    # Not a number: the newest page.
    assert _shown(client.get(path + "?before=soon").content.decode()) == [8, 9, 10, 11, 12]


def test_a_live_read_says_when_it_left_messages_for_the_next(
    make_open_room: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transcript, "READ_MESSAGES", 4)
    room = make_open_room()
    _said(room, 1, 9)
    client = client_for(room.a.owner)
    path = f"/rooms/{room.room.id}/?part=transcript&after="

    first = client.get(path + "0").content.decode()
    assert _shown(first) == [1, 2, 3, 4] and 'id="transcript-more"' in first
    assert _shown(client.get(path + "4").content.decode()) == [5, 6, 7, 8]
    last = client.get(path + "5").content.decode()
    assert _shown(last) == [6, 7, 8, 9] and 'id="transcript-more"' not in last


@pytest.mark.e2e
def test_in_the_browser_earlier_messages_stay_put_while_the_newest_page_goes_on(
    make_open_room: Callable[..., Any], live_daphne: str, browser_page: Any
) -> None:
    room = make_open_room()
    total = transcript.PAGE_MESSAGES + 3
    _said(room, 1, total)
    newest, base = browser_page, live_daphne
    log_in(newest, base, room.a.owner.get_username())
    watcher = watch(newest)
    newest.goto(f"{base}/rooms/{room.room.id}/")
    newest.wait_for_selector("#connection:has-text('live')")
    entries = newest.locator("#transcript li.entry")
    assert entries.count() == transcript.PAGE_MESSAGES
    assert entries.last.inner_text().endswith(f"Message {total}")

    history = newest.context.new_page()
    history_watcher = watch(history)
    history.goto(newest.url)
    with history.expect_navigation():
        history.click("text=Show earlier messages")
    assert history.locator("#transcript li.entry").count() == 3
    assert "These are earlier messages" in history.inner_text("#transcript-history")
    page_checks(history, history_watcher, name="room transcript, earlier messages")

    # Something new is said: the newest page takes it live, the earlier page stays as it was.
    with ThreadPoolExecutor(1) as pool:  # its bell uses async_to_sync: not Playwright's thread
        pool.submit(_said, room, total + 1, total + 1).result(timeout=30)
    newest.wait_for_selector(f"#transcript li.entry:has-text('Message {total + 1}')")
    history.wait_for_load_state("networkidle")
    assert history.locator("#transcript li.entry").count() == 3
    assert history.locator(f"text=Message {total + 1}").count() == 0
    with history.expect_navigation():
        history.click("text=Back to the newest messages")
    history.wait_for_selector(f"#transcript li.entry:has-text('Message {total + 1}')")
    page_checks(newest, watcher, name="room transcript, newest messages")

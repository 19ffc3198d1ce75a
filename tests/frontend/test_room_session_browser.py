"""The room page in headless Debian Chromium on a real Daphne: a tab stops showing the room
when the sign-in it was opened with ends, and says so in words.

The owner signs out in another tab of the same browser; separately, the owner changes their
password on their laptop while a stolen laptop has the room open. Both go through the real
pages (the login form, the header's Log out button, the password page), served by the same
Daphne that holds the room sockets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.frontend.test_room_browser import log_in

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ENDED = "#connection:has-text('the sign-in this page was opened with has ended')"
LIVE = "#connection:has-text('live')"


@pytest.fixture
def setup(make_open_room: Callable[..., Any]) -> Any:
    """Made before the browser starts (announcements cannot run on Playwright's loop)."""
    return make_open_room()


def test_signing_out_in_another_tab_ends_the_room_tab_in_words(
    setup: Any, live_daphne: str, browser_page: Any
) -> None:
    base, room_tab = live_daphne, browser_page
    log_in(room_tab, base, setup.a.owner.get_username())
    room_tab.goto(f"{base}/rooms/{setup.room.id}/")
    room_tab.wait_for_selector(LIVE)
    other_tab = room_tab.context.new_page()
    other_tab.goto(f"{base}/")
    other_tab.click("form[action='/logout/'] button")
    other_tab.wait_for_url(f"{base}/login/")
    room_tab.wait_for_selector(ENDED, timeout=10_000)


def test_a_password_change_ends_the_stolen_laptop_s_room_tab_in_words(
    setup: Any, live_daphne: str, browser_page: Any
) -> None:
    base, laptop = live_daphne, browser_page
    stolen = laptop.context.browser.new_context().new_page()
    username = setup.a.owner.get_username()
    for page in (stolen, laptop):
        log_in(page, base, username)
    stolen.goto(f"{base}/rooms/{setup.room.id}/")
    stolen.wait_for_selector(LIVE)
    laptop.goto(f"{base}/settings/password/")
    laptop.fill("#id_old_password", "correct horse 42")
    laptop.fill("#id_new_password1", "a new horse 4242")
    laptop.fill("#id_new_password2", "a new horse 4242")
    laptop.click("form:not([action='/logout/']) button[type=submit]")
    laptop.wait_for_url(f"{base}/settings/")
    stolen.wait_for_selector(ENDED, timeout=10_000)
    # The laptop, still signed in, watches the room as before.
    laptop.goto(f"{base}/rooms/{setup.room.id}/")
    laptop.wait_for_selector(LIVE)

"""A whisper sent from the room page reaches the owner's agent once, in headless Chromium: a
double click sends it once (the button waits for the answer), and a whisper whose answer was
lost, sent again, is recognised by its Idempotency-Key and said to have gone once. New words
after that are a new whisper."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from rooms.models import Whisper
from tests.frontend.test_room_browser import log_in

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _open(page: Any, base: str, room: Any) -> None:
    log_in(page, base, room.a.owner.get_username())
    page.goto(f"{base}/rooms/{room.room.id}/")
    page.wait_for_selector("#connection:has-text('live')")


def test_a_double_click_whispers_once(
    make_open_room: Callable[..., Any], live_daphne: str, browser_page: Any
) -> None:
    room = make_open_room()
    page = browser_page
    _open(page, live_daphne, room)
    page.fill("#whisper-text", "Keep it under 60 a head.")
    page.dblclick("#whisper-form button[type=submit]")
    page.wait_for_selector("#whisper-status:has-text('Whispered to your agent.')")
    page.wait_for_load_state("networkidle")
    assert Whisper.objects.filter(room_id=room.room.id).count() == 1
    assert page.locator("#whispers li").count() == 1


def test_a_whisper_whose_answer_was_lost_goes_once_when_sent_again(
    make_open_room: Callable[..., Any], live_daphne: str, browser_page: Any
) -> None:
    room = make_open_room()
    page = browser_page
    _open(page, live_daphne, room)
    path = f"**/api/rooms/{room.room.id}/whispers"

    def deliver_then_lose(route: Any) -> None:
        route.fetch()  # the server receives it and records the whisper
        route.abort("connectionreset")  # the page never hears back

    page.route(path, deliver_then_lose)
    page.fill("#whisper-text", "No seafood, please.")
    page.click("#whisper-form button[type=submit]")
    page.wait_for_selector("#whisper-status:has-text('Not whispered')")
    assert Whisper.objects.filter(room_id=room.room.id).count() == 1
    page.unroute(path)

    page.click("#whisper-form button[type=submit]")  # the owner tries again, same words
    page.wait_for_selector("#whisper-status:has-text('Already whispered to your agent')")
    assert Whisper.objects.filter(room_id=room.room.id).count() == 1

    page.fill("#whisper-text", "And no peanuts.")  # new words: a new whisper
    page.click("#whisper-form button[type=submit]")
    page.wait_for_selector("#whisper-status:has-text('Whispered to your agent.')")
    texts = [w.text for w in Whisper.objects.filter(room_id=room.room.id).order_by("created_at")]
    assert texts == ["No seafood, please.", "And no peanuts."]

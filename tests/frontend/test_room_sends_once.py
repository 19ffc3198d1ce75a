"""What an owner sends from the room page goes once, in headless Chromium: a whisper sent with a
double click is sent once (the button waits for the answer), and one whose answer was lost,
sent again, is recognised by its Idempotency-Key and said to have gone once (new words after
that are a new whisper); words said in person after stepping in at a flare, double-clicked,
are said once (one id per message written)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from rooms import flares
from rooms.models import FlareChoice, FlareReason, Message, Whisper
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


def test_words_said_in_person_with_a_double_click_are_said_once(
    make_open_room: Callable[..., Any], live_daphne: str, browser_page: Any
) -> None:
    room = make_open_room()
    flare = flares.flare_raise(
        room_id=room.room.id,
        agent_id=room.a.agent.id,
        reason=FlareReason.DISTRESS,
        raised_by="agent",
    )
    flares.flare_resolve(
        owner=room.a.owner, room_id=room.room.id, flare_id=flare.id, choice=FlareChoice.STEP_IN
    )
    page = browser_page
    _open(page, live_daphne, room)
    page.wait_for_selector("#in-person:not([hidden])")
    page.fill("#in-person-text", "Alice here: Friday at eight works.")
    page.dblclick("#in-person button[type=submit]")
    page.wait_for_selector("#flare-status:has-text('Said in person.')")
    page.wait_for_load_state("networkidle")
    said = Message.objects.filter(room_id=room.room.id, author="owner")
    assert [m.text for m in said] == ["Alice here: Friday at eight works."]

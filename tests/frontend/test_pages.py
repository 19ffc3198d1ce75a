"""Owner pages: sign-up to an open room in a real browser, and the transcript arriving live."""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from agents import RoomClient
from rooms.models import Agent, Room

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def sign_up(page, base: str, username: str) -> None:
    page.goto(f"{base}/signup/")
    page.fill("#id_username", username)
    page.fill("#id_password1", "correct horse battery 42")
    page.fill("#id_password2", "correct horse battery 42")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


def test_two_owners_set_up_a_room_in_the_browser_and_watch_agents_talk(
    live_daphne, browser_page
) -> None:
    page, base = browser_page, live_daphne
    sign_up(page, base, "alice")
    page.goto(f"{base}/agents/")
    page.fill("#id_agent-name", "Alice's agent")
    page.click("text=Register agent")
    token_a = page.inner_text("#issued-token")
    assert token_a.startswith("syn_agent_")
    page.goto(f"{base}/")
    page.fill("#id_room-purpose", "Dinner on Friday")
    page.click("text=Create room")
    page.wait_for_url(re.compile(r".*/rooms/[0-9a-f-]+/$"))
    room_url = page.url
    page.click("text=Create invitation link")
    invite_url = page.inner_text("#invite-url")
    page.select_option("#id_agent", label="Alice's agent")
    page.click("text=Bind my agent")

    # Bob, in a separate browser context (his own cookies).
    bob = page.context.browser.new_context().new_page()
    sign_up(bob, base, "bob")
    bob.goto(f"{base}/agents/")
    bob.fill("#id_agent-name", "Bob's agent")
    bob.click("text=Register agent")
    token_b = bob.inner_text("#issued-token")
    bob.goto(invite_url)
    bob.click("text=Accept invitation")
    bob.wait_for_url(room_url)
    bob.select_option("#id_agent", label="Bob's agent")
    bob.click("text=Bind my agent")
    bob.click("text=Open room")
    assert bob.inner_text("#room-state").strip().lower() == "open"

    page.goto(room_url)
    page.wait_for_selector("#connection:has-text('live')")
    room = Room.objects.get()
    ws_url = base.replace("http", "ws") + f"/ws/rooms/{room.id}/"

    async def agents_talk() -> None:
        async with RoomClient(ws_url, token_a) as a, RoomClient(ws_url, token_b) as b:
            await a.say("Friday at 7?")
            await b.say("<b>Yes</b>, 7 works")
            await b.next_message(timeout=10)
            await a.next_message(timeout=10)

    # Playwright's sync API owns this thread's event loop; the agents get their own thread.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, agents_talk()).result(timeout=60)
    page.wait_for_selector("#transcript li:nth-child(2)")
    lines = page.locator("#transcript li").all_inner_texts()
    assert lines[0].endswith("Friday at 7?")
    assert lines[1].endswith("<b>Yes</b>, 7 works")  # shown as text, never as markup
    assert Agent.objects.count() == 2
    bob.context.close()


def test_pages_require_login(client) -> None:
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")

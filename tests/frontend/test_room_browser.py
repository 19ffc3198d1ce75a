"""Two owners watch one room in headless Debian Chromium: a negotiation line arrives live as a
card on both pages, a peer message full of HTML shows as text, a flare hides the other
owner's Resume and answering it updates both pages' controls live, and a phone-sized page
does not scroll sideways."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from agents import RoomClient
from rooms.models import Room, RoomState
from tests.frontend.browser import PHONE, page_checks, watch

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

START = "2026-12-04T19:00:00+00:00"  # Friday 4 December, 20:00 in Berlin
PROPOSE = (
    f"PROPOSE round=1 venue=osteria-kanal start={START} party=2 price=3800 EUR\n"
    "How about Osteria Kanal on Friday at 20:00, 38 EUR per person?"
)
HOSTILE = '<img src=x onerror="window.pwned=1"> <script>window.pwned=2</script> <b>bold</b>'


def log_in(page: Any, base: str, username: str) -> None:
    page.goto(f"{base}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "correct horse 42")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


def no_sideways_scroll(page: Any) -> bool:
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


@pytest.fixture
def setup(make_open_room: Callable[..., Any]) -> Any:
    """Made before the browser starts: the room's state announcements use async_to_sync,
    which cannot run on the thread Playwright's event loop owns."""
    return make_open_room()


def test_two_owners_follow_the_room_live_in_words(
    setup: Any, live_daphne: str, browser_page: Any
) -> None:
    alice, base = browser_page, live_daphne
    bob = alice.context.browser.new_context().new_page()
    room_url = f"{base}/rooms/{setup.room.id}/"
    ws_url = base.replace("http", "ws") + f"/ws/rooms/{setup.room.id}/"
    watchers = {id(alice): watch(alice), id(bob): watch(bob)}
    for page, owner in ((alice, setup.a.owner), (bob, setup.b.owner)):
        log_in(page, base, owner.get_username())
        page.goto(room_url)
        page.wait_for_selector("#connection:has-text('live')")

    loop = asyncio.new_event_loop()
    pool = ThreadPoolExecutor(1)  # the agents run on their own thread: Playwright owns this one

    def run(coroutine: Any) -> Any:
        return pool.submit(loop.run_until_complete, coroutine).result(timeout=60)

    agent_a = RoomClient(ws_url, setup.a.token)
    agent_b = RoomClient(ws_url, setup.b.token)
    run(agent_a.connect())
    run(agent_b.connect())
    try:
        # A negotiation line arrives live as a card, named from each owner's side.
        run(agent_a.say(PROPOSE))
        for page in (alice, bob):
            card = page.wait_for_selector(
                "#transcript li.entry-proposal:has-text('Osteria Kanal')", timeout=15000
            )
            words = card.inner_text()
            assert "Proposal (round 1)" in words and "38 EUR per person" in words
            assert "Fri 4 Dec, 20:00 (Berlin time)" in words
            assert "PROPOSE" not in words and "venue=" not in words
        assert "Your agent (Alice's agent)" in alice.inner_text("#transcript")
        assert "alice's agent (Alice's agent)" in bob.inner_text("#transcript")
        # CSP, axe (0 critical/serious), 390 px, screenshots, no codes in what a person reads.
        for page, name in ((alice, "room-alice"), (bob, "room-bob")):
            page_checks(page, watchers[id(page)], name=name)
            watchers[id(page)].check_no_script_errors()

        # A peer message full of markup is text: no element made, no script run.
        run(agent_b.say(HOSTILE))
        shown = alice.wait_for_selector("#transcript li:has-text('window.pwned=2')")
        assert HOSTILE in shown.inner_text()
        assert alice.locator("#transcript img, #transcript b, #transcript script").count() == 0
        assert alice.evaluate("window.pwned") is None

        # Bob's agent raises a flare: the room pauses; Alice may not resume around Bob.
        run(agent_b.flare("loop"))
        alice.wait_for_selector("#room-state:has-text('Paused')", timeout=15000)
        alice.wait_for_selector("#resume-waiting:has-text('Waiting for bob')")
        assert alice.locator("#resume-button").count() == 0
        alice.wait_for_selector("#flares li:has-text('raised a Signal Flare')")
        assert alice.locator("#flares button").count() == 0  # not hers to answer
        bob.wait_for_selector("#flares li:has-text('Your agent (Bob')")
        bob.click("#flares button:has-text('Reset and resume')")
        # Both pages' controls follow the room live: no Resume once it runs again.
        for page in (alice, bob):
            page.wait_for_selector("#room-state:has-text('Open')", timeout=15000)
            page.wait_for_selector("#room-controls button:has-text('Pause')")
            assert page.locator("#resume-button").count() == 0
        assert alice.locator("#resume-waiting").count() == 0

        # Alice pauses; Bob's page offers Resume live; when Bob resumes, Alice's goes away.
        alice.click("#room-controls button:has-text('Pause')")
        alice.wait_for_selector("#resume-button")
        bob.wait_for_selector("#resume-button", timeout=15000)
        bob.click("#resume-button")
        alice.wait_for_selector("#room-state:has-text('Open')", timeout=15000)
        assert alice.locator("#resume-button").count() == 0
        assert Room.objects.get(id=setup.room.id).state == RoomState.OPEN

        # With the flare answered and the room moved on: still clean, and on a phone the
        # page does not scroll sideways (the peer's markup, shown as text, holds "src=x").
        for page, name in ((alice, "room-alice-after-flare"), (bob, "room-bob-after-flare")):
            page.reload()
            page.wait_for_selector("#transcript li.entry-proposal")
            page.wait_for_selector("#flares li.flare")
            page_checks(page, watchers[id(page)], name=name, codes=False)
            watchers[id(page)].check_no_script_errors()
            page.set_viewport_size(PHONE)
            assert no_sideways_scroll(page), page.evaluate("document.documentElement.scrollWidth")
    finally:
        run(agent_a.close())
        run(agent_b.close())
        loop.close()
        pool.shutdown()
        bob.context.close()


def test_a_disclosure_request_reaches_its_owners_open_page_without_a_reload(
    make_open_room: Callable[..., Any], live_daphne: str, browser_page: Any
) -> None:
    """A per-use item asks its owner when the other agent's turn first needs it; that request
    pauses nothing and rings no socket frame, yet the owner's open page shows it by itself."""
    from tests.gatekeeper.test_disclosure_approval import Scene

    scene = Scene(make_open_room())
    alice, base = browser_page, live_daphne
    log_in(alice, base, scene.alice.get_username())
    alice.goto(f"{base}/rooms/{scene.room.id}/")
    alice.wait_for_selector("#grant-requests:has-text('Nothing is waiting for you')")
    alice.evaluate("window.sameDocument = true")  # gone if anything reloaded the page
    with ThreadPoolExecutor(1) as pool:  # the ORM call stays off Playwright's thread
        turn = pool.submit(scene.bob_turn).result(timeout=30)
    assert all(item.resource != "allergies" for item in turn.peer_items)  # withheld for now
    request = alice.wait_for_selector("#grant-requests li.disclosure", timeout=20000)
    words = request.inner_text()
    assert "allergies" in words and "once" in words
    assert alice.evaluate("window.sameDocument === true")  # no reload brought it


def test_the_other_owners_open_page_says_when_the_room_is_deleted(
    setup: Any, live_daphne: str, browser_page: Any, tmp_path: Any
) -> None:
    alice, base = browser_page, live_daphne
    bob = alice.context.browser.new_context().new_page()
    room_url = f"{base}/rooms/{setup.room.id}/"
    for page, owner in ((alice, setup.a.owner), (bob, setup.b.owner)):
        log_in(page, base, owner.get_username())
        page.goto(room_url)
        page.wait_for_selector("#connection:has-text('live')")
    alice.goto(f"{room_url}delete/")
    alice.check("#id_confirm")
    alice.click("#confirm-delete")
    alice.wait_for_url(f"{base}/")
    gone = bob.wait_for_selector("#room-gone", timeout=15000)
    assert "deleted for both sides" in gone.inner_text()
    assert not Room.objects.filter(id=setup.room.id).exists()


@pytest.fixture
def tools_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Daphne started after this lets agents request tools (the production default denies
    all); what an agent may do is then its owner's slip's to say."""
    monkeypatch.setenv("SYNAPSIA_TOOL_POLICY_DEFAULT", "allow_all")


def test_an_outcome_reaches_the_open_page_with_nothing_said_after_it(
    tools_allowed: None, setup: Any, live_daphne: str, browser_page: Any
) -> None:
    """Bob's agent declares that no plan works and says nothing more: Alice's open page shows
    the outcome by itself (rung by an ``outcome_recorded`` notice), without a reload."""
    alice, base = browser_page, live_daphne
    log_in(alice, base, setup.a.owner.get_username())
    alice.goto(f"{base}/rooms/{setup.room.id}/")
    alice.wait_for_selector("#connection:has-text('live')")
    assert alice.get_attribute("#room-outcome", "data-kind") == "none"
    alice.evaluate("window.sameDocument = true")  # gone if anything reloaded the page

    async def declare() -> Any:
        ws_url = base.replace("http", "ws") + f"/ws/rooms/{setup.room.id}/"
        async with RoomClient(ws_url, setup.b.token) as agent:
            return await agent.act("declare_no_plan", {"reason": "time"})

    with ThreadPoolExecutor(1) as pool:  # the agent runs off Playwright's thread
        declared = pool.submit(asyncio.run, declare()).result(timeout=60)
    assert declared.status == "executed", declared
    alice.wait_for_selector("#room-outcome[data-kind='no_agreement']", timeout=15000)
    assert "No agreement" in alice.inner_text("#room-outcome")
    assert alice.evaluate("window.sameDocument === true")

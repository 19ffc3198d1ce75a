"""A person in the practice room: Alice follows her printed one-time link in a real browser
(headless Debian Chromium), watches the two reference agents negotiate, whispers to her agent,
and approves the over-budget booking herself with a key enrolled in that browser."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from agents import RoomClient
from agents.negotiator import NegotiationResult, negotiate
from ledger.models import LedgerEvent
from ledger.verification import ledger_verify_room
from practice.seeding import Practice, practice_seed
from rooms.models import Whisper

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _negotiate_in_background(url: str, practice: Practice) -> tuple[threading.Thread, list[Any]]:
    """Both agents on their own thread and event loop: Playwright owns the test's thread."""
    results: list[Any] = []

    async def both() -> tuple[NegotiationResult, NegotiationResult]:
        async with (
            RoomClient(url, practice.host.token) as alice,
            RoomClient(url, practice.guest.token) as bob,
        ):
            host, guest = await asyncio.gather(
                negotiate(alice, reply_timeout=60, grant_timeout=120),
                negotiate(bob, reply_timeout=150),
            )
            return host, guest

    def run() -> None:
        try:
            results.extend(asyncio.run(both()))
        except BaseException as exc:  # reported by the test
            results.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, results


@pytest.fixture
def practice() -> Practice:
    """Seeded before the browser starts: the seeding's room-state announcements use
    async_to_sync, which cannot run on the thread Playwright's event loop owns."""
    return practice_seed()


def test_alice_signs_in_with_her_link_watches_whispers_and_approves_the_booking(
    practice: Practice, live_daphne: str, browser_page: Any
) -> None:
    page, base = browser_page, live_daphne

    page.goto(base + practice.host.login_path)
    page.click("button:has-text('Sign in as demo-alice')")
    page.wait_for_url(f"{base}/rooms/{practice.room_id}/")
    # Her demo key is held by the server; approving in the browser needs a key of her own.
    page.goto(f"{base}/keys/")
    page.fill("#key-label", "Alice's browser")
    page.click("text=Enroll this device")
    page.wait_for_selector('#device-keys li:has-text("Alice\'s browser")')

    page.goto(f"{base}/rooms/{practice.room_id}/")
    page.wait_for_selector("#connection:has-text('live')")
    ws_url = base.replace("http://", "ws://") + f"/ws/rooms/{practice.room_id}/"
    agents, results = _negotiate_in_background(ws_url, practice)

    # The negotiation reads as cards: names, the catalogue's venue, no protocol lines.
    page.wait_for_selector(
        "#transcript .proposal-card[data-move=propose]:has-text('Proposal (round 1)')"
        ":has-text('Osteria Kanal')"
    )
    page.wait_for_selector("#transcript .proposal-card[data-move=accept]:has-text('Accepted')")
    assert "PROPOSE round=" not in page.inner_text("#transcript")
    page.fill("#whisper-text", "Kanal is fine by me this time.")
    page.click("#whisper-form button[type=submit]")
    page.wait_for_selector(
        "#whispers li:has-text('You whispered'):has-text('fine by me this time')"
    )

    page.wait_for_selector("#grant-requests li.grant:has-text('Book a table')")
    details = page.inner_text("#grant-requests")
    assert "Osteria Kanal" in details and "76 EUR in all (38 EUR per person)" in details
    assert "Your permission slip says to ask each time" in details
    assert "approval_per_use" not in details and "book_table" not in details
    page.click("text=Approve this one action")
    page.wait_for_selector("#grant-status:has-text('Approved: the action ran.')")
    page.wait_for_selector("#transcript .proposal-card[data-move=booked]:has-text('Osteria Kanal')")

    agents.join(timeout=120)
    host, guest = results
    assert (host.status, guest.status) == ("booked", "booked")
    approved = LedgerEvent.objects.get(room_id=practice.room_id, kind="grant_approved")
    assert approved.data["key_custody"] == "device"  # her own browser's key this time
    whisper = Whisper.objects.get(room_id=practice.room_id)
    assert whisper.agent_id == practice.host.agent_id
    assert ledger_verify_room(room_id=practice.room_id).ok

"""In headless Chromium: enroll a key, choose a tier preset, read the server's preview, sign,
see the slip in force; sign again with one box changed and see what changed, in words."""

from __future__ import annotations

import time
from typing import Any

import pytest

from slips.models import RoomTier, Slip
from slips.vault import vault_item_create
from tests.frontend.browser import (
    axe_check,
    no_horizontal_scroll,
    screenshots_on_failure,
    visible_text_has_no_codes,
    watch,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
DAY = 86_400


def log_in(page: Any, base: str, username: str) -> None:
    page.goto(f"{base}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "correct horse 42")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


@pytest.fixture
def opened(live_daphne, make_open_room):
    """Made before the browser starts: Playwright's loop would refuse rooms' sync realtime."""
    opened = make_open_room()
    alice, now = opened.a.owner, int(time.time())
    vault_item_create(
        owner=alice,
        content={"kind": "budget", "currency": "EUR", "minimum": 3000, "maximum": 8000},
    )
    vault_item_create(owner=alice, content={"kind": "allergies", "items": ["peanuts"]})
    vault_item_create(
        owner=alice,
        content={
            "kind": "availability",
            "busy": [
                {"start": now + 2 * DAY, "end": now + 2 * DAY + 3600},
                {"start": now + 10 * DAY, "end": now + 10 * DAY + 3600},
            ],
        },
    )
    return opened


PEER = "#slip-preview [data-recipient=peer_agent]"


def test_choose_a_preset_preview_sign_and_see_what_changed(
    live_daphne, opened, browser_page
) -> None:
    page, base = browser_page, live_daphne
    watcher = watch(page)
    with screenshots_on_failure("slip-journey", page):
        log_in(page, base, "alice")
        page.goto(f"{base}/keys/")
        page.fill("#key-label", "Test Chromium")
        page.click("text=Enroll this device")
        page.wait_for_selector("#device-keys li:has-text('Test Chromium') .on-this-device:visible")
        assert "Active: signs your permission slips" in page.inner_text("#device-keys")
        axe_check(page, name="keys")
        visible_text_has_no_codes(page, name="keys")

        page.goto(f"{base}/rooms/{opened.room.id}/slip/")
        page.wait_for_selector(f"{PEER}")  # the first preview: nothing checked, nothing sent
        assert page.inner_text(PEER).count("Nothing from your vault") == 1
        boxes = page.locator("#slip-items [name=share]")
        assert boxes.count() == 6
        assert not any(boxes.nth(i).is_checked() for i in range(6))

        # Room Only: recorded for the room, its preset checked, its effect in the preview.
        page.check("#tier-room_only")
        page.wait_for_selector("#tier-status:has-text('You chose Room Only')")
        assert RoomTier.objects.get(owner=opened.a.owner).tier == "room_only"
        assert "The room runs under Room Only, chosen by you" in page.inner_text("#room-tier")
        assert page.is_checked("#share-budget-peer") and page.is_checked("#share-allergies-peer")
        page.wait_for_selector(f"{PEER}:has-text('About 30 to 80 EUR per person (a rough band)')")
        peer = page.inner_text(PEER)
        assert "peanuts" in peer and peer.count("Busy ") == 1  # 7 days: the day-10 one is out
        # Asking for the exact range to the other agent: Room Only still sends only the band.
        page.select_option("#scope-budget-peer", "range")
        page.wait_for_selector(f"{PEER}:has-text('Room Only cuts this from the exact range')")
        assert "Let the other agent see my exact budget range per person." in page.inner_text(
            "li[data-row=budget-peer] .slip-sentence"
        )
        page.select_option("#scope-budget-peer", "band")
        page.wait_for_selector(f"{PEER} >> text=Room Only cuts this", state="detached")

        # An action: the own agent may book, the preview says so (the other agent: nothing).
        page.check("#share-tool-book_table")
        page.wait_for_selector(
            "#slip-preview [data-recipient=own_agent]:has-text('May book tables at venues')"
        )
        assert "book tables" not in page.inner_text(PEER)

        no_horizontal_scroll_at_phone(page)
        axe_check(page, name="slip")
        visible_text_has_no_codes(page, name="slip")

        page.click("text=Sign slip")
        page.wait_for_selector(
            "#slip-in-force-items:has-text('Let the other agent see my allergies')"
        )
        in_force = page.inner_text("#slip-in-force-items")
        assert "Let the other agent see a rough band of my budget per person" in in_force
        assert "Let my agent know my exact budget range per person" in in_force
        assert "Let my agent book tables at venues, within my budget (up to 3 times)" in in_force
        assert Slip.objects.filter(owner=opened.a.owner).count() == 1

        # Rotating the key on the keys page: the new key signs from now on.
        page.goto(f"{base}/keys/")
        page.click("#device-keys li:has-text('Test Chromium') button:has-text('Rotate')")
        page.wait_for_selector("#device-keys li:has-text('Test Chromium (rotated)')")
        keys = page.inner_text("#device-keys")
        assert "Rotated: replaced by a newer key" in keys and keys.count("Active:") == 1
        no_horizontal_scroll(page, name="keys")
        page.goto(f"{base}/rooms/{opened.room.id}/slip/")

        # The checklist starts from the slip in force; one box changed, signed again. (The
        # preview is drawn after the page loads: waited for first, then for its change.)
        page.wait_for_selector(f"{PEER}:has-text('peanuts')")
        assert page.is_checked("#share-allergies-peer")
        page.uncheck("#share-allergies-peer")
        page.wait_for_selector(f"{PEER}:has-text('peanuts')", state="detached")
        page.click("text=Sign slip")
        page.wait_for_selector("#slip-changes:has-text('No longer shared')")
        changes = page.inner_text("#slip-changes")
        assert "Let the other agent see my allergies" in changes
        assert "Now shared" not in changes and "Changed" not in changes.replace("What changed", "")
        assert "Let the other agent see my allergies" not in page.inner_text("#slip-in-force-items")
        visible_text_has_no_codes(page, name="slip after signing")
        second = Slip.objects.get(owner=opened.a.owner, superseded_at__isnull=True)
        assert second.key.label == "Test Chromium (rotated)"
        watcher.check_csp()
        watcher.check_no_script_errors()


def no_horizontal_scroll_at_phone(page: Any) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    no_horizontal_scroll(page, name="slip")
    page.set_viewport_size({"width": 1280, "height": 800})

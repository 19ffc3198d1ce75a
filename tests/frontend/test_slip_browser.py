"""In headless Chromium: enroll a key, check items and choose a tier, read the server's preview,
sign, see the slip in force; sign again with one box changed and see what changed, in words.
And a tier only ever narrows the draft: it never checks a box or widens a scope."""

from __future__ import annotations

import time
from typing import Any

import pytest

from slips.capabilities import resource_scopes
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


def test_check_items_choose_a_tier_preview_sign_and_see_what_changed(
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

        # Alice checks what she means to share; Room Only is recorded for the room, checks
        # nothing more, and its effect is in the preview.
        for row in ("budget-own", "budget-peer", "allergies-peer", "availability-peer"):
            page.check(f"#share-{row}")
        page.check("#tier-room_only")
        page.wait_for_selector("#tier-status:has-text('You chose Room Only')")
        assert RoomTier.objects.get(owner=opened.a.owner).tier == "room_only"
        assert "The room runs under Room Only, chosen by you" in page.inner_text("#room-tier")
        assert boxes.evaluate_all("bs => bs.filter(b => b.checked).length") == 4
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


# Each row with a choice of how much, laid out: its sentence's box, its choice's and the row's.
ROW_BOXES = """() => Array.from(document.querySelectorAll("li.slip-row"), (row) => {
  const box = (element) => element.getBoundingClientRect();
  const select = row.querySelector("select[name=scope]");
  if (!select) return null;
  const sentence = box(row.querySelector(".slip-check")), choice = box(select);
  return {row: box(row).width, sentenceBottom: sentence.bottom, top: choice.top,
          width: choice.width};
}).filter(Boolean)"""


def no_horizontal_scroll_at_phone(page: Any) -> None:
    """On a phone the page does not scroll sideways, and each row's choice of how much sits
    below its sentence, wide enough to read (not a third of the row with its words cut)."""
    page.set_viewport_size({"width": 390, "height": 844})
    no_horizontal_scroll(page, name="slip")
    rows = page.evaluate(ROW_BOXES)
    assert rows
    for row in rows:
        assert row["top"] >= row["sentenceBottom"], row
        assert row["width"] >= 0.6 * row["row"], row
    page.set_viewport_size({"width": 1280, "height": 800})


# --- a tier only ever narrows the draft ----------------------------------------------------------

ROW_STATE = """() => Object.fromEntries(
  Array.from(document.querySelectorAll("li.slip-row"), (row) => {
    const control = (name) => row.querySelector(`[name=${name}]`);
    return [row.dataset.row, {
      resource: row.dataset.resource,
      checked: control("share").checked,
      scope: control("scope").value,
      onward: control("onward").checked,
      ask: control("approval").value === "per_use",
    }];
  }))"""


def row_state(page: Any) -> dict[str, dict[str, Any]]:
    """Every row of the draft: checked, its scope, onward disclosure, ask first."""
    state: dict[str, dict[str, Any]] = page.evaluate(ROW_STATE)
    return state


def widenings(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> list[str]:
    """Where ``after`` shares more than ``before``: a box checked, a scope widened, onward
    disclosure turned on, or "ask me first" turned off (each row, by its key)."""
    found = []
    for key, was in before.items():
        now = after[key]
        scopes = resource_scopes(was["resource"])
        if now["checked"] and not was["checked"]:
            found.append(f"{key}: checked")
        if scopes.index(now["scope"]) > scopes.index(was["scope"]):
            found.append(f"{key}: scope {was['scope']} -> {now['scope']}")
        if now["onward"] and not was["onward"]:
            found.append(f"{key}: onward disclosure on")
        if was["ask"] and not now["ask"]:
            found.append(f"{key}: no longer asks first")
    return found


@pytest.fixture
def fuller_vault(opened: Any) -> Any:
    """Alice's vault also holds food she likes and her neighbourhood: what a Collaborative
    preset used to check for the other agent without her asking."""
    alice = opened.a.owner
    vault_item_create(owner=alice, content={"kind": "food_likes", "items": ["ramen"]})
    vault_item_create(owner=alice, content={"kind": "neighbourhood", "name": "Mitte"})
    return opened


def choose_tier(page: Any, tier: str, name: str) -> dict[str, dict[str, Any]]:
    """Choose ``tier`` (its label ``name``), wait until the page has applied it, and answer
    the draft as it is then."""
    page.evaluate("() => { document.getElementById('tier-status').textContent = ''; }")
    page.check(f"#tier-{tier}")
    page.wait_for_selector(f"#tier-status:has-text('You chose {name}.')")
    return row_state(page)


def test_a_tier_only_ever_narrows_the_checklist(
    live_daphne: str, fuller_vault: Any, browser_page: Any
) -> None:
    page, base, opened = browser_page, live_daphne, fuller_vault
    watcher = watch(page)
    with screenshots_on_failure("slip-tier-narrows", page):
        log_in(page, base, "alice")
        page.goto(f"{base}/rooms/{opened.room.id}/slip/")
        page.wait_for_selector(PEER)
        tier_box = page.inner_text("#tier-form")
        assert "A tier only takes away: it never shares anything you left unchecked." in tier_box

        # Alice checks some items, some at a narrower scope than offered, one wider than
        # Room Only lets the other agent have, one allowed out of the room; the rest she
        # leaves unchecked (likes, neighbourhood, availability for her own agent, ...).
        page.check("#share-budget-own")
        page.select_option("#scope-budget-own", "band")
        page.check("#share-budget-peer")
        page.select_option("#scope-budget-peer", "range")
        page.check("#share-availability-peer")
        page.select_option("#scope-availability-peer", "free_busy_24h")
        page.check("#share-allergies-peer")
        page.click("li[data-row=allergies-peer] summary")
        page.check("#onward-allergies-peer")
        page.check("#share-neighbourhood-own")
        page.check("#share-tool-book_table")
        chosen = row_state(page)
        unchecked = {k for k, row in chosen.items() if not row["checked"]}
        assert {"food_likes-peer", "neighbourhood-peer", "availability-own"} <= unchecked

        # Collaborative allows all of it: nothing changes, and nothing is checked.
        after = choose_tier(page, "collaborative", "Collaborative")
        assert after == chosen
        assert "nothing was checked for you" in page.inner_text("#tier-status")

        # Room Only is narrower than her choices: the exact range for the other agent is cut
        # to the band and nothing may leave the room; everything else stays as she set it.
        before, after = after, choose_tier(page, "room_only", "Room Only")
        assert widenings(before, after) == []
        assert after["budget-peer"]["checked"] and after["budget-peer"]["scope"] == "band"
        assert after["allergies-peer"]["checked"] and not after["allergies-peer"]["onward"]
        assert after["availability-peer"]["scope"] == "free_busy_24h"  # narrower: kept
        assert after["budget-own"]["scope"] == "band"  # her own agent: as she chose
        changed = {k for k in after if after[k] != before[k]}
        assert changed == {"budget-peer", "allergies-peer"}, changed
        page.wait_for_selector(f"{PEER}:has-text('About 30 to 80 EUR per person (a rough band)')")

        # Sandbox: nothing from the vault reaches any agent, so every vault item is
        # unchecked; the booking stays checked but asks her first.
        before, after = after, choose_tier(page, "sandbox", "Sandbox")
        assert widenings(before, after) == []
        vault_rows = {k for k, row in after.items() if not row["resource"].startswith("tool:")}
        assert not any(after[k]["checked"] for k in vault_rows)
        assert after["tool-book_table"]["checked"] and after["tool-book_table"]["ask"]
        assert RoomTier.objects.get(owner=opened.a.owner).tier == "sandbox"

        # Wider tiers again take nothing back from Sandbox's cuts and check nothing.
        for tier, name in (("room_only", "Room Only"), ("collaborative", "Collaborative")):
            before, after = after, choose_tier(page, tier, name)
            assert after == before, widenings(before, after)
        assert all(not row["checked"] for k, row in after.items() if k in unchecked)
        assert RoomTier.objects.get(owner=opened.a.owner).tier == "collaborative"
        watcher.check_csp()
        watcher.check_no_script_errors()

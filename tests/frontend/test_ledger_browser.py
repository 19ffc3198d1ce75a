"""The ledger page in Chromium: the browser's own check in words, events as sentences with the
owner's local time, where a tampered record breaks, and a phone's width."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from ledger.models import LedgerEvent
from tests.frontend import browser
from tests.frontend.test_ledger_page import LedgerRoom, ledger_room_build

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def ledger_room(live_daphne, make_open_room) -> LedgerRoom:
    """Built before the browser starts (room services use async_to_sync, which cannot run in
    the thread where Playwright's event loop runs)."""
    return ledger_room_build(make_open_room())


def log_in(page, base: str, username: str) -> None:
    page.goto(f"{base}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "correct horse 42")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


def open_checked(page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("#ledger-history:not([data-state=pending])", timeout=20_000)


def local_words(stamp: str, zone: str) -> str:
    """The chain's UTC stamp as Intl's en-GB medium date + short time in ``zone``."""
    moment = datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(ZoneInfo(zone))
    return f"{moment.day} {moment:%b %Y}, {moment:%H:%M}"


def test_the_ledger_reads_as_words_and_says_where_a_tampered_record_breaks(
    live_daphne, ledger_room, browser_page
) -> None:
    page, base = browser_page, live_daphne
    watcher = browser.watch(page)
    log_in(page, base, ledger_room.alice.owner.get_username())
    url = f"{base}/rooms/{ledger_room.room_id}/ledger/"
    open_checked(page, url)

    verdict = page.locator("#ledger-verdict")
    assert verdict.get_attribute("data-state") == "verified", verdict.inner_text()
    total = len(ledger_room.events)
    assert verdict.inner_text() == (
        f"Intact: all {total} events check out, each fingerprint recomputed in this browser."
    )
    assert page.locator("#ledger-history").inner_text().startswith("First check in this browser")
    assert page.locator("#ledger-meaning").is_hidden()

    # Every event as a sentence, numbered, at the owner's local time.
    items = page.locator("#ledger-events > li")
    assert items.count() == total
    shown = items.locator(".ledger-event-words").all_inner_texts()
    assert "Disclosed to bob's agent (turn 3): alice's budget." in shown
    assert "A grant to book a table at Osteria Kanal was approved by alice." in shown
    assert any(text.startswith("Bob's agent was refused") for text in shown)
    zone = page.get_attribute("body", "data-time-zone") or "UTC"
    first = ledger_room.events[0]
    meta = items.first.locator(".ledger-event-meta").inner_text()
    assert meta == f"#1 · {local_words(first['occurred_at'], zone)}", meta
    receipt = page.locator("#receipt-summary li").all_inner_texts()
    assert "Grants: 1 request, 1 approved, 0 refused, 0 expired." in receipt

    # What a person reads, the CSP, axe, and a phone's 390 px without sideways scrolling.
    browser.page_checks(page, watcher, name="ledger-intact")

    # Someone edits the disclosure in the database: the browser finds it, whatever the
    # server says, and says what that means.
    target = LedgerEvent.objects.get(room_id=ledger_room.room_id, kind="disclosure")
    LedgerEvent.objects.filter(pk=target.pk).update(data={**target.data, "turn": 99})
    open_checked(page, url)
    assert verdict.get_attribute("data-state") == "broken"
    assert verdict.inner_text() == (
        f"Broken at event #{target.seq}: its content does not match the fingerprint recorded "
        "for it."
    )
    meaning = page.locator("#ledger-meaning")
    assert meaning.is_visible()
    assert f"The events before #{target.seq} check out" in meaning.inner_text()
    broken = page.locator(f"#ledger-events > li[data-seq='{target.seq}']")
    assert broken.get_attribute("data-trust") == "unverified"
    assert "The check fails here" in broken.inner_text()
    earlier = page.locator(f"#ledger-events > li[data-seq='{target.seq - 1}']")
    assert earlier.get_attribute("data-trust") == "verified"
    assert page.locator("#ledger-history").get_attribute("data-state") == "unchecked"
    page.set_viewport_size(browser.PHONE)
    browser.no_horizontal_scroll(page, name="ledger-broken")
    browser.visible_text_has_no_codes(page, name="ledger-broken")
    browser.screenshot(page, "ledger-broken", size="phone")

    # Put back: intact again, and consistent with what this browser saw before.
    LedgerEvent.objects.filter(pk=target.pk).update(data=target.data)
    open_checked(page, url)
    assert verdict.get_attribute("data-state") == "verified"
    history = page.locator("#ledger-history")
    assert history.get_attribute("data-state") == "extends"
    assert history.inner_text().startswith("Consistent: the record only grew")

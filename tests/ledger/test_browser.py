"""The owner's browser recomputes the chain itself: verified, tampered, rewritten history."""

from __future__ import annotations

import pytest

from ledger.models import LedgerEvent, LedgerHead, SignedHead
from ledger.signing import ledger_sign_head
from tests.ledger.conftest import append_events
from tests.ledger.test_rewrite_attacks import _forge, _joins

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def log_in(page, base: str, username: str) -> None:
    page.goto(f"{base}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "correct horse 42")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


def state(page, selector: str) -> str:
    return page.get_attribute(selector, "data-state")


def wait_checked(page) -> None:
    page.wait_for_selector("#ledger-history:not([data-state=pending])", timeout=20_000)


@pytest.fixture
def opened(live_daphne, make_open_room):
    """Set up before the browser starts: room services announce state changes through
    async_to_sync, which cannot run in a thread where Playwright's event loop runs."""
    return make_open_room()


def test_browser_verifies_detects_tampering_and_warns_on_rewritten_history(
    live_daphne, opened, browser_page
) -> None:
    page, base = browser_page, live_daphne
    room_id = opened.room.id
    append_events(room_id, 6)
    ledger_sign_head(room_id=room_id)
    head = LedgerHead.objects.get(room_id=room_id)
    url = f"{base}/rooms/{room_id}/ledger/"

    log_in(page, base, opened.a.owner.get_username())
    page.goto(url)
    wait_checked(page)
    assert state(page, "#ledger-verdict") == "verified", page.inner_text("#ledger-verdict")
    assert state(page, "#ledger-signatures") == "verified", page.inner_text("#ledger-signatures")
    assert state(page, "#ledger-history") == "first-visit"
    assert page.locator("#ledger-events li").count() == head.seq
    assert (
        page.locator("#receipt-summary li")
        .first.inner_text()
        .startswith("The server's own check: intact")
    )

    # Someone edits a row in the database: the browser finds it, whatever the server says.
    target = LedgerEvent.objects.get(room_id=room_id, seq=head.seq - 3)
    LedgerEvent.objects.filter(pk=target.pk).update(data={**target.data, "turn": 99})
    page.reload()
    wait_checked(page)
    assert state(page, "#ledger-verdict") == "broken"
    assert page.get_attribute("#ledger", "data-first-bad") == str(head.seq - 3)
    assert f"Broken at event #{head.seq - 3}" in page.inner_text("#ledger-verdict")

    # Put it back: verified again, and it extends what this browser saw.
    LedgerEvent.objects.filter(pk=target.pk).update(data=target.data)
    page.reload()
    wait_checked(page)
    assert state(page, "#ledger-verdict") == "verified"
    assert state(page, "#ledger-history") == "extends"

    # Whoever holds the database rewrites the whole history consistently (valid hashes, no
    # signed heads): the chain verifies, but it does not extend the head this browser kept.
    LedgerEvent.objects.filter(room_id=room_id).delete()
    LedgerHead.objects.filter(room_id=room_id).delete()
    SignedHead.objects.filter(room_id=room_id).delete()
    append_events(room_id, head.seq + 2)
    page.reload()
    wait_checked(page)
    assert state(page, "#ledger-verdict") == "verified"
    assert state(page, "#ledger-history") == "diverged"
    assert "Warning" in page.inner_text("#ledger-history")
    # The warning stays: the rewritten head was not remembered in place of the real one.
    page.reload()
    wait_checked(page)
    assert state(page, "#ledger-history") == "diverged"


def test_ledger_page_is_for_the_room_owners_only(client, make_open_room, make_owner) -> None:
    opened = make_open_room()
    client.force_login(opened.b.owner)
    assert client.get(f"/rooms/{opened.room.id}/ledger/").status_code == 200
    client.force_login(make_owner("mallory"))
    assert client.get(f"/rooms/{opened.room.id}/ledger/").status_code == 404


def test_browser_refuses_a_rewrite_disguised_as_a_retention_purge(
    live_daphne, opened, browser_page
) -> None:
    # Issue 13, finding 2: the browser used to say "the part you saw has since been purged".
    page, base = browser_page, live_daphne
    room_id = opened.room.id
    append_events(room_id, 6)  # a pause at #6 (the append signs it)
    ledger_sign_head(room_id=room_id)
    log_in(page, base, opened.a.owner.get_username())
    page.goto(f"{base}/rooms/{room_id}/ledger/")
    wait_checked(page)
    assert state(page, "#ledger-verdict") == "verified", page.inner_text("#ledger-verdict")

    # A database writer deletes the minutes-old room's events, moves the checkpoint past
    # what this browser saw, and writes a purge event naming it, then new events.
    last = LedgerEvent.objects.filter(room_id=room_id).order_by("-seq").first()
    through = last.seq
    LedgerEvent.objects.filter(room_id=room_id).delete()
    LedgerHead.objects.filter(room_id=room_id).update(
        checkpoint_seq=through, checkpoint_hash=last.hash
    )
    purge = {"through_seq": through, "through_hash": last.hash, "events_purged": through,
             "window_days": 90}  # fmt: skip
    _forge(room_id, [("retention_purge", purge), *_joins(2)], after=(through, last.hash))
    page.reload()
    wait_checked(page)
    verdict = page.inner_text("#ledger-verdict")
    assert state(page, "#ledger-verdict") == "broken", verdict
    assert f"Broken at event #{through + 1}" in verdict and "retention purge" in verdict
    assert "purged" not in page.inner_text("#ledger-history")

    # Even with every signature the server made deleted as well.
    SignedHead.objects.filter(room_id=room_id).delete()
    page.reload()
    wait_checked(page)
    assert state(page, "#ledger-verdict") == "broken"
    assert "purged" not in page.inner_text("#ledger-history")


def _enroll(page, base: str) -> None:
    page.goto(f"{base}/keys/")
    page.fill("#key-label", "Test Chromium")
    page.click("text=Enroll this device")
    page.wait_for_selector("#device-keys li:has-text('Test Chromium') .on-this-device:visible")


def wait_confirmation(page) -> str:
    page.wait_for_selector("#ledger-witness:not([data-state=pending])", timeout=20_000)
    return state(page, "#ledger-witness")


def test_the_owner_confirms_the_record_with_her_device_key_and_a_dropped_witness_shows(
    live_daphne, opened, browser_page
) -> None:
    from zoneinfo import ZoneInfo

    from ledger.models import HeadWitness
    from ledger.verification import ledger_verify_room
    from slips.models import DeviceKey
    from tests.ledger.test_witnesses import _rewrite_with_the_server_key

    page, base = browser_page, live_daphne
    room_id = opened.room.id
    append_events(room_id, 6)
    head = ledger_sign_head(room_id=room_id)
    url = f"{base}/rooms/{room_id}/ledger/"
    log_in(page, base, opened.a.owner.get_username())
    _enroll(page, base)
    page.goto(url)
    assert wait_confirmation(page) == "confirmed", page.inner_text("#ledger-witness")
    witness = HeadWitness.objects.get(room_id=room_id)
    key = DeviceKey.objects.get(owner=opened.a.owner)
    assert (witness.seq, witness.hash, witness.key_id) == (head.seq, head.hash, str(key.id))
    zone = ZoneInfo(page.get_attribute("body", "data-time-zone") or "UTC")
    moment = witness.witnessed_at.astimezone(zone)
    words = f"{moment.day} {moment:%b %Y}, {moment:%H:%M}"
    assert page.inner_text("#ledger-witness") == (
        f"You confirmed this record on {words} (up to event #{head.seq})."
    )
    assert ledger_verify_room(room_id=room_id).ok
    # A second visit signs nothing new.
    page.reload()
    assert wait_confirmation(page) == "confirmed"
    assert HeadWitness.objects.filter(room_id=room_id).count() == 1
    # A stored witness edited in the database: the browser checks its signature itself.
    good = witness.signature
    forged = ("A" if good[0] != "A" else "B") + good[1:]
    HeadWitness.objects.filter(pk=witness.pk).update(signature=forged)
    page.reload()
    assert wait_confirmation(page) == "broken", page.inner_text("#ledger-witness")
    assert "does not check out" in page.inner_text("#ledger-witness")
    HeadWitness.objects.filter(pk=witness.pk).update(signature=good)

    # Bob, in his own browser, has no device key: told so plainly, nothing sent, and he
    # reads Alice's confirmation.
    other = page.context.browser.new_context()
    try:
        bob = other.new_page()
        log_in(bob, base, opened.b.owner.get_username())
        bob.goto(url)
        assert wait_confirmation(bob) == "no-key"
        text = bob.inner_text("#ledger-witness")
        assert "holds no device key of yours" in text
        assert f"alice confirmed it up to event #{head.seq}" in text
        assert bob.locator("#ledger-witness-help").is_visible()
        assert state(bob, "#ledger-verdict") == "verified"
    finally:
        other.close()
    assert HeadWitness.objects.filter(room_id=room_id).count() == 1

    # The database loses the witness row: the server's own check cannot tell, Alice's
    # browser does (it remembers the witness it made).
    kept = HeadWitness.objects.get(room_id=room_id)
    HeadWitness.objects.filter(room_id=room_id).delete()
    assert ledger_verify_room(room_id=room_id).ok
    page.reload()
    assert wait_confirmation(page) == "missing", page.inner_text("#ledger-witness")
    assert "no longer shows your confirmation" in page.inner_text("#ledger-witness")
    assert HeadWitness.objects.filter(room_id=room_id).count() == 0  # not silently re-made

    # Worse: history rewritten under the server key as well. The remembered witness is a
    # checkpoint the rewritten record does not extend.
    kept.pk = None
    kept.save()
    HeadWitness.objects.filter(room_id=room_id).delete()
    _rewrite_with_the_server_key(room_id)
    assert ledger_verify_room(room_id=room_id).ok
    page.reload()
    wait_checked(page)
    assert state(page, "#ledger-verdict") == "broken", page.inner_text("#ledger-verdict")
    assert f"Broken at event #{head.seq}" in page.inner_text("#ledger-verdict")
    assert "you confirmed" in page.inner_text("#ledger-verdict")
    assert state(page, "#ledger-witness") == "not-offered"


def test_the_browser_flags_an_unsigned_tail_older_than_the_server_allows(
    live_daphne, opened, browser_page
) -> None:
    # Short rooms: events the beat should have signed hours ago, with no head covering them
    # (their head was deleted with the events after them). The browser judges by its clock.
    from datetime import timedelta

    from django.utils import timezone

    page, base = browser_page, live_daphne
    room_id = opened.room.id
    head = ledger_sign_head(room_id=room_id)
    url = f"{base}/rooms/{room_id}/ledger/"
    log_in(page, base, opened.a.owner.get_username())
    page.goto(url)
    wait_checked(page)
    assert state(page, "#ledger-verdict") == "verified", page.inner_text("#ledger-verdict")
    # An honest unsigned tail, seen from a laptop whose clock runs five hours fast: the
    # server's clock caps it, so no false alarm.
    append_events(room_id, 1)
    page.clock.set_fixed_time(timezone.now() + timedelta(hours=5))
    page.reload()
    wait_checked(page)
    assert state(page, "#ledger-verdict") == "verified", page.inner_text("#ledger-verdict")

    head = ledger_sign_head(room_id=room_id)
    past = timezone.now() - timedelta(hours=3)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("django.utils.timezone.now", lambda: past)
        append_events(room_id, 2)
    page.reload()
    wait_checked(page)
    verdict = page.inner_text("#ledger-verdict")
    assert state(page, "#ledger-verdict") == "broken", verdict
    assert f"Broken at event #{head.seq + 1}" in verdict and "no signature by the server" in verdict
    assert state(page, "#ledger-witness") == "not-offered"

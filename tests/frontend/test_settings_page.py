"""Settings: the owner's notification level and time zone are saved, shown back, and used by
every page; a bad zone is refused in words and changes nothing."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.test import Client

from rooms import notifications
from rooms.models import NotificationPreference

pytestmark = pytest.mark.django_db

SAVE = {"badge": "on", "time_zone": "UTC", "email": ""}


@pytest.fixture
def owner(make_owner):
    return make_owner("alice")


@pytest.fixture
def client(owner) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def test_settings_need_a_signed_in_owner() -> None:
    response = Client().get("/settings/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_the_defaults_say_what_is_on_before_anything_is_chosen(client: Client) -> None:
    page = client.get("/settings/").content.decode()
    assert "Urgent Beacon" in page and "cannot be turned off" in page
    assert re.search(r'<input type="checkbox" name="badge"[^>]* checked', page)  # Gentle Tap on
    assert not re.search(r'<input type="checkbox" name="digest"[^>]* checked', page)  # opt-in
    assert "You have not chosen a time zone yet" in page
    assert 'data-time-zone="UTC"' in page


def test_preferences_are_saved_with_a_message_and_shown_back(client: Client, owner) -> None:
    response = client.post(
        "/settings/",
        {"digest": "on", "time_zone": "Europe/Berlin", "email": "alice@example.org"},
        follow=True,
    )
    assert response.redirect_chain == [("/settings/", 302)]  # POST-redirect-GET
    page = response.content.decode()
    assert "Settings saved." in page
    assert re.search(r'<input type="checkbox" name="digest"[^>]* checked', page)
    assert not re.search(r'<input type="checkbox" name="badge"[^>]* checked', page)
    assert '<option value="Europe/Berlin" selected>' in page
    assert 'value="alice@example.org"' in page
    assert "You have not chosen a time zone yet" not in page
    chosen = notifications.preferences_of(owner=owner)
    assert (chosen.badge, chosen.digest, chosen.time_zone) == (False, True, "Europe/Berlin")
    owner.refresh_from_db()
    assert owner.email == "alice@example.org"


def test_the_badge_switch_reaches_the_notifications_the_dashboard_reads(
    client: Client, owner
) -> None:
    assert notifications.notifications_for(owner=owner, since=datetime.now(UTC)).badge_enabled
    client.post("/settings/", {"time_zone": "UTC"})  # badge unticked
    found = notifications.notifications_for(owner=owner, since=datetime.now(UTC))
    assert found.badge_enabled is False and found.digest_enabled is False
    client.post("/settings/", SAVE)
    assert notifications.notifications_for(owner=owner, since=datetime.now(UTC)).badge_enabled


def test_the_api_preference_still_sets_the_digest_and_keeps_the_zone(client: Client, owner) -> None:
    client.post("/settings/", {**SAVE, "time_zone": "Asia/Tokyo"})
    response = client.put(
        "/api/notifications/preferences", {"digest": True}, content_type="application/json"
    )
    assert response.status_code == 200 and response.json()["digest_enabled"] is True
    row = NotificationPreference.objects.get(owner=owner)
    assert (row.digest, row.badge, row.time_zone) == (True, True, "Asia/Tokyo")


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "../../etc/passwd", "", "US/Pacific"])
def test_a_zone_not_on_the_list_is_refused_in_words_and_nothing_is_saved(
    client: Client, owner, zone: str
) -> None:
    client.post("/settings/", {**SAVE, "time_zone": "Europe/Paris"})
    response = client.post(
        "/settings/", {"digest": "on", "time_zone": zone, "email": "new@example.org"}
    )
    page = response.content.decode()
    assert response.status_code == 200
    assert "Nothing was saved" in page
    if zone:
        assert "is not a time zone this server knows" in page and "Europe/Berlin" in page
    else:
        assert "This field is required." in page
    chosen = notifications.preferences_of(owner=owner)
    assert (chosen.digest, chosen.time_zone) == (False, "Europe/Paris")
    owner.refresh_from_db()
    assert owner.email == ""


def test_a_bad_email_is_refused_and_nothing_is_saved(client: Client, owner) -> None:
    response = client.post("/settings/", {**SAVE, "time_zone": "Asia/Tokyo", "email": "alice@"})
    assert "Enter a valid email address." in response.content.decode()
    assert notifications.preferences_of(owner=owner).time_zone == ""


def test_pages_show_times_in_the_chosen_zone(client: Client) -> None:
    """The settings page says what time it is now, in the owner's zone; so does every
    ``{{ when|date }}`` on other pages (the zone is activated per request)."""
    client.post("/settings/", {**SAVE, "time_zone": "Asia/Kolkata"})  # UTC+05:30, no DST
    before = datetime.now(UTC)
    page = client.get("/settings/").content.decode()
    shown = re.search(r'<time datetime="([^"]+)">([^<]+)</time>', page)
    assert shown is not None
    moment = datetime.fromisoformat(shown.group(1))
    assert moment.utcoffset() is not None and moment.utcoffset().total_seconds() == 5.5 * 3600
    assert abs((moment - before).total_seconds()) < 60
    assert shown.group(2) == moment.strftime("%a %-d %b %Y, %H:%M")
    assert "in Asia/Kolkata" in page
    assert 'data-time-zone="Asia/Kolkata"' in page


def test_the_zone_is_per_owner_and_per_request(client: Client, make_owner) -> None:
    client.post("/settings/", {**SAVE, "time_zone": "America/New_York"})
    bob = Client()
    bob.force_login(make_owner("bob"))
    assert 'data-time-zone="UTC"' in bob.get("/settings/").content.decode()
    assert 'data-time-zone="America/New_York"' in client.get("/settings/").content.decode()
    assert 'data-time-zone="UTC"' in Client().get("/login/").content.decode()


def test_the_header_marks_settings_as_the_current_place(client: Client) -> None:
    page = client.get("/settings/").content.decode()
    assert re.search(r'<a href="/settings/" aria-current="page">Settings</a>', page)
    assert not re.search(r'<a href="/vault/" aria-current', page)


# --- in a real browser -------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.e2e
def test_in_the_browser_the_first_visit_offers_its_zone_and_copy_buttons_work(
    live_daphne, browser_page, make_owner
) -> None:
    from tests.frontend.browser import axe_check, no_horizontal_scroll

    make_owner("alice")
    context = browser_page.context.browser.new_context(
        timezone_id="America/Sao_Paulo", permissions=["clipboard-read", "clipboard-write"]
    )
    page, base = context.new_page(), live_daphne
    page.goto(f"{base}/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "correct horse 42")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")

    page.goto(f"{base}/settings/")
    # Never chosen: the browser's own zone is offered, not yet saved.
    assert page.input_value("#id_time_zone") == "America/Sao_Paulo"
    assert "Your browser says you are in America/Sao Paulo" in page.inner_text("#zone-offer")
    assert "in UTC" in page.inner_text("#now-local")
    axe_check(page, name="settings")
    no_horizontal_scroll(page, name="settings")
    page.set_viewport_size({"width": 1280, "height": 800})
    page.click("button:has-text('Save settings')")
    page.wait_for_selector("text=Settings saved.")
    assert "in America/Sao_Paulo" in page.inner_text("#now-local")
    assert page.evaluate("document.body.dataset.timeZone") == "America/Sao_Paulo"
    assert page.locator("#zone-offer").count() == 0

    # The first Tab reaches the skip link, which then shows on screen.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    assert page.locator(".skip-link").bounding_box()["y"] >= 0

    # Any copy button copies its target's text and says so in the live region.
    page.evaluate(
        """() => {
            const p = document.createElement("p"); p.id = "copy-me";
            p.textContent = "syn_agent_example-token";
            const b = document.createElement("button"); b.type = "button";
            b.className = "copy-button"; b.dataset.copyTarget = "copy-me"; b.textContent = "Copy";
            document.querySelector("main").append(p, b);
        }"""
    )
    page.click("button.copy-button")
    page.wait_for_selector("#copy-status:has-text('Copied to the clipboard.')")
    assert page.inner_text("button.copy-button") == "Copied"
    assert page.evaluate("navigator.clipboard.readText()") == "syn_agent_example-token"
    context.close()


def test_the_header_counts_flares_always_and_forks_only_with_the_badge_on(
    make_open_room, settings
) -> None:
    from rooms import flares, forks
    from rooms.models import FlareReason

    settings.SYNAPSIA = {**settings.SYNAPSIA, "TOOL_POLICY_DEFAULT": "allow_all"}
    setup = make_open_room()
    forks.action_for_agent(
        room_id=setup.room.id,
        agent_id=setup.a.agent.id,
        client_id="spend-1",
        tool="spend",
        arguments={"amount_cents": 100, "currency": "EUR", "payee_id": "nopa", "purpose": "x"},
    )
    flares.flare_raise(
        room_id=setup.room.id,
        agent_id=setup.a.agent.id,
        reason=FlareReason.DISTRESS,
        raised_by="agent",
    )
    alice = Client()
    alice.force_login(setup.a.owner)
    page = alice.get("/keys/").content.decode()
    assert '1<span class="visually-hidden"> Signal Flare to answer</span>' in page
    assert '1<span class="visually-hidden"> fork waiting</span>' in page
    alice.post("/settings/", {"time_zone": "UTC"})  # Gentle Tap off
    page = alice.get("/keys/").content.decode()
    assert "Signal Flare to answer" in page  # the Urgent Beacon cannot be turned off
    assert "fork waiting" not in page

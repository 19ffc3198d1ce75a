"""Every owner page, in headless Debian Chromium, as a person would meet it.

For each page: the HTML document carries a strict Content-Security-Policy and the browser
refused nothing under it, the pinned axe-core finds 0 critical and 0 serious violations, the
page does not scroll sideways on a 390 px phone, what a person reads shows no UUID, epoch,
rule id, raw JSON or protocol line, and screenshots at desktop and phone sizes are saved in
``var/test-artifacts/screens/``.

One Daphne, one browser and one seeded practice room serve the whole module (seeding and
starting them per page would cost a minute on a small machine); the tests only read, but for
the last two (a webhook added, a login locked out), which write through Daphne.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import NoReverseMatch, reverse
from playwright._impl._api_structures import SetCookieParam  # typing only; not re-exported

from frontend.views import CLOSED_ROOMS_PER_PAGE
from gatekeeper.webhooks import webhook_endpoint_create, webhook_endpoint_deactivate
from practice.seeding import Practice, practice_seed
from rooms import services as rooms
from rooms.deletion import room_delete
from rooms.models import RoomState
from tests.conftest import CHROMIUM_FLAGS, service_unavailable
from tests.e2e.daphne import running_daphne
from tests.frontend import browser
from tests.frontend.browser import AXE_PATH, AXE_SHA256, AXE_VERSION, VENDOR

# The tests themselves only read through the browser; the mark makes pytest-django create the
# test database, which the module's fixture seeds once (committed, so Daphne sees it).
pytestmark = [pytest.mark.e2e, pytest.mark.django_db]

# Every page exists: a missing one is a failure. SYNAPSIA_JOURNEY_STRICT=0 turns it into a
# skip naming the missing URL (for a branch that is still building a page).
STRICT = os.environ.get("SYNAPSIA_JOURNEY_STRICT", "1") != "0"


def test_vendored_axe_is_the_pinned_file() -> None:
    """The accessibility engine cannot change silently: its digest and banner are pinned."""
    data = AXE_PATH.read_bytes()
    assert hashlib.sha256(data).hexdigest() == AXE_SHA256
    assert data.startswith(f"/*! axe v{AXE_VERSION}".encode())
    assert (VENDOR / "LICENSE").read_text().startswith("Mozilla Public License, version 2.0")
    assert f"axe-core {AXE_VERSION}" in (VENDOR / "VENDORED.md").read_text()
    assert AXE_SHA256 in (VENDOR / "VENDORED.md").read_text()


@dataclass(frozen=True)
class Site:
    base: str
    practice: Practice
    invite_token: str
    deleted_room_id: Any  # a room the owner (demo-bob, the host) deleted: its ledger stays
    owner: Any  # a logged-in browser context (demo-alice)
    anonymous: Any  # a browser context with no session


def _session_cookie(user: User, base: str) -> SetCookieParam:
    """A real session for ``user`` (the database session store Daphne reads), as a cookie:
    the page tests do not depend on the login form, which has its own test here."""
    client = Client()
    client.force_login(user)
    value = client.cookies[settings.SESSION_COOKIE_NAME].value
    return {"name": settings.SESSION_COOKIE_NAME, "value": value, "url": base}


@pytest.fixture(scope="module")
def site(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    executable = "/usr/bin/chromium"
    if not Path(executable).exists():
        service_unavailable("Chromium is not installed (apt-get install chromium)")
    with django_db_blocker.unblock():
        practice = practice_seed()
        draft = rooms.room_create(
            owner=practice.guest.owner, purpose="Lunch next week", charter="Find a lunch slot."
        )
        invite = rooms.invite_create(owner=practice.guest.owner, room_id=draft.id)
        deleted = rooms.room_create(
            owner=practice.host.owner, purpose="An old plan", charter="Gone since."
        )
        room_delete(owner=practice.host.owner, room_id=deleted.id)
        # The agents page folds a revoked agent away.
        revoked = rooms.agent_register(owner=practice.host.owner, name="Old agent").agent
        rooms.agent_revoke(owner=practice.host.owner, agent_id=revoked.id)
        # More closed rooms than the rooms page lists at once: its closed rooms come in pages.
        for n in range(CLOSED_ROOMS_PER_PAGE + 1):
            closed = rooms.room_create(
                owner=practice.host.owner, purpose=f"Past dinner {n + 1}", charter=""
            )
            rooms.room_transition(owner=practice.host.owner, room_id=closed.id, to=RoomState.CLOSED)
        # The webhooks page with one webhook in use and one switched off.
        webhook_endpoint_create(owner=practice.host.owner, url="https://bookings.example.com/hook")
        webhook_endpoint_deactivate(
            owner=practice.host.owner,
            endpoint_id=webhook_endpoint_create(
                owner=practice.host.owner, url="https://old-bookings.example.com/hook"
            ).endpoint.id,
        )
        log = tmp_path_factory.mktemp("daphne") / "daphne.log"
        previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # ORM calls beside Playwright's loop
        try:
            with running_daphne(log) as host:
                base = f"http://{host}"
                cookie = _session_cookie(practice.host.owner, base)
                from playwright.sync_api import sync_playwright

                with sync_playwright() as playwright:
                    chromium = playwright.chromium.launch(
                        executable_path=executable, args=CHROMIUM_FLAGS
                    )
                    owner = chromium.new_context(viewport=browser.DESKTOP)
                    owner.add_cookies([cookie])
                    anonymous = chromium.new_context(viewport=browser.DESKTOP)
                    try:
                        yield Site(base, practice, invite.token, deleted.id, owner, anonymous)
                    finally:
                        owner.close()
                        anonymous.close()
                        chromium.close()
        finally:
            if previous is None:
                os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
            else:
                os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous
            # The module's rows must not leak into the next test's database.
            call_command("flush", interactive=False, verbosity=0)


@dataclass(frozen=True)
class OwnerPage:
    name: str
    url_names: tuple[str, ...]  # the first that resolves is used (pages are being renamed)
    needs: str = ""  # "room", "invite" or "" (no argument)
    signed_in: bool = True
    status: int = 200
    query: str = ""  # after the path: "?closed=2"


PAGES = [
    OwnerPage("signup", ("signup",), signed_in=False),
    OwnerPage("login", ("login",), signed_in=False),
    OwnerPage("password reset", ("password_reset", "password-reset"), signed_in=False),
    OwnerPage("rooms", ("rooms", "dashboard")),
    OwnerPage("older closed rooms", ("rooms", "dashboard"), query="?closed=2"),
    OwnerPage("agents", ("agents",)),
    OwnerPage("keys", ("keys",)),
    OwnerPage("vault", ("vault",)),
    OwnerPage("settings", ("settings",)),
    OwnerPage("webhooks", ("webhooks",)),
    OwnerPage("room", ("room",), needs="room"),
    OwnerPage("slip", ("room-slip", "slip"), needs="room"),
    OwnerPage("ledger", ("room-ledger", "ledger"), needs="room"),
    OwnerPage("invite", ("invite",), needs="invite"),
    OwnerPage("password change", ("password_change",)),
    OwnerPage("delete account", ("account-delete",)),
    OwnerPage("close room", ("room-close",), needs="room"),
    OwnerPage("delete room", ("room-delete",), needs="room"),
    OwnerPage("exit note", ("stewards:exit-note",), needs="room"),
    OwnerPage("report", ("stewards:report",), needs="room"),
]


def page_url(page: OwnerPage, site: Site) -> str:
    """The page's path, or a skip (a failure when strict) while the page does not exist."""
    kwargs: dict[str, Any] = {}
    if page.needs == "room":
        kwargs = {"room_id": site.practice.room_id}
    elif page.needs == "invite":
        kwargs = {"token": site.invite_token}
    for url_name in page.url_names:
        try:
            return reverse(url_name, kwargs=kwargs) + page.query
        except NoReverseMatch:
            continue
    missing = f"the {page.name} page is not built yet (no URL named {' or '.join(page.url_names)})"
    if STRICT:
        pytest.fail(missing + " and SYNAPSIA_JOURNEY_STRICT=1", pytrace=False)
    pytest.skip(missing)


def axe_on_phone(page: Any, name: str) -> None:
    page.set_viewport_size(browser.PHONE)
    browser.axe_check(page, name=f"{name} (phone)")


def _check_all(page: Any, watcher: browser.PageWatch, name: str) -> list[str]:
    """Run every check, so one failure does not hide the others."""
    problems: list[str] = []
    checks = [
        ("CSP", watcher.check_csp),
        ("screenshots", lambda: browser.screenshots(page, name)),
        ("phone width", lambda: browser.no_horizontal_scroll(page, name=name)),
        ("axe", lambda: browser.axe_check(page, name=name)),
        ("axe on a phone", lambda: axe_on_phone(page, name)),
        ("codes", lambda: browser.visible_text_has_no_codes(page, name=name)),
        ("keyboard focus", lambda: browser.keyboard_focus_is_visible(page, name=name)),
        ("scripts", watcher.check_no_script_errors),
    ]
    for what, check in checks:
        page.set_viewport_size(browser.DESKTOP)
        try:
            check()
        except AssertionError as failure:
            problems.append(f"[{what}] {failure}")
    return problems


def _visit(site: Site, context: Any, path: str, name: str, status: int) -> None:
    page = context.new_page()
    watcher = browser.watch(page)
    try:
        response = page.goto(site.base + path)
        assert response is not None and response.status == status, (
            f"{path} answered {response.status if response else 'nothing'}, not {status}"
        )
        page.wait_for_load_state("networkidle")
        problems = _check_all(page, watcher, name)
        assert not problems, f"the {name} page:\n" + "\n".join(problems)
    finally:
        page.close()


@pytest.mark.parametrize("owner_page", PAGES, ids=[p.name.replace(" ", "-") for p in PAGES])
def test_owner_page_is_accessible_strict_and_fits_a_phone(
    owner_page: OwnerPage, site: Site
) -> None:
    path = page_url(owner_page, site)
    context = site.owner if owner_page.signed_in else site.anonymous
    status = owner_page.status
    if owner_page.name == "password reset" and not settings.PASSWORD_RESET_BY_EMAIL:
        status = 503  # production without an email server: the page says so, with no form
    _visit(site, context, path, owner_page.name, status)


def test_a_deleted_rooms_ledger_page_is_held_to_the_same_standards(site: Site) -> None:
    path = reverse("room-ledger", kwargs={"room_id": site.deleted_room_id})
    _visit(site, site.owner, path, "deleted room ledger", 200)


@pytest.mark.parametrize("signed_in", [True, False], ids=["signed-in", "signed-out"])
def test_not_found_page_is_the_products_own(site: Site, signed_in: bool) -> None:
    """An unknown address answers 404 with the product's page (never Django's debug page,
    which lists every route), held to the same standards, signed in or not."""
    context = site.owner if signed_in else site.anonymous
    name = "404" if signed_in else "404-signed-out"
    _visit(site, context, "/no-such-page/", name, 404)
    page = context.new_page()
    try:
        page.goto(site.base + "/no-such-page/")
        text = page.inner_text("body")
        assert "URLconf" not in text and "urlpatterns" not in text
    finally:
        page.close()


# Adding a webhook writes through Daphne: no open test transaction may hold SQLite's write lock
# (the flush after it leaves the login lockout's test, next, all it needs).
@pytest.mark.django_db(transaction=True)
def test_the_webhooks_pages_after_an_add_are_held_to_the_same_standards(site: Site) -> None:
    """The answer to a refused address (the reason on the field, 422) and the answer to an
    accepted one (the signing secret, shown once): accessible, strict, fitting a phone."""
    page = site.owner.new_page()
    watcher = browser.watch(page)
    try:
        page.goto(site.base + reverse("webhooks"))
        for url, status, name, expected in (
            ("http://bookings.example.com/hook", 422, "webhooks refused", "must use https"),
            ("https://new-bookings.example.com/hook", 200, "webhooks secret", "only this once"),
        ):
            page.fill("#id_url", url)
            with page.expect_navigation() as navigation:
                page.click("#add-webhook button[type=submit]")
            assert navigation.value.status == status
            assert expected in page.inner_text("main")
            problems = _check_all(page, watcher, name)
            assert not problems, f"the {name} page:\n" + "\n".join(problems)
        # A reload of the secret's answer sends its form again: said so, nothing added.
        reloaded = page.reload()
        assert reloaded is not None and reloaded.request.method == "POST"
        assert "added nothing more" in page.inner_text("main")
        assert "whsec_" not in page.content()
        problems = _check_all(page, watcher, "webhooks already added")
        assert not problems, "the webhooks already added page:\n" + "\n".join(problems)
    finally:
        page.close()


# Daphne records each failed login: no open test transaction may hold SQLite's write lock.
# Last in the module, so the flush after it costs the other pages nothing.
@pytest.mark.django_db(transaction=True)
def test_the_login_lockout_page_is_held_to_the_same_standards(site: Site) -> None:
    """After too many wrong passwords the login answers with its lockout page (429): in words,
    accessible, strict, and fitting a phone like every other page."""
    context = site.anonymous.browser.new_context(viewport=browser.DESKTOP)
    page = context.new_page()
    watcher = browser.watch(page)
    try:
        answered = None
        for _ in range(settings.AXES_FAILURE_LIMIT + 1):
            page.goto(site.base + reverse("login"))
            page.fill("#id_username", "nobody-in-particular")
            page.fill("#id_password", "not the password")
            with page.expect_navigation() as navigation:
                page.click("button[type=submit]")
            answered = navigation.value
        assert answered is not None and answered.status == 429
        assert "Too many attempts" in page.inner_text("main")
        problems = _check_all(page, watcher, "login lockout")
        assert not problems, "the login lockout page:\n" + "\n".join(problems)
    finally:
        context.close()

"""The room page's scripts say what went wrong, and what to do, in headless Chromium: a
signed-out owner, a stale page, a proxy's HTML error page, no answer at all, or an answer
that cannot be read never show an HTTP code or a parser's message (devicekeys.js ``api``,
which room.js, grants.js and flares.js share); and a decision on a request is worded from
what the server says happened (its status and rule), not from the status alone (grants.js).

Served by Django's threaded live server (WSGI), as tests/artifacts/test_room_section_browser.py
is: the page's socket is not needed, and answers the server should not give are stubbed with
Playwright's routes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any
from uuid import uuid4

import pytest
from django.conf import settings
from django.contrib.sessions.models import Session
from django.test import Client
from playwright.sync_api import Route, expect

from rooms.models import Whisper
from tests.frontend.browser import codes_in

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SIGNED_OUT = "You are signed out: sign in again, then try again."


@pytest.fixture
def setup(make_open_room: Callable[..., Any]) -> Any:
    """Made before the browser starts: the room's state announcements use async_to_sync,
    which cannot run on the thread Playwright's event loop owns."""
    return make_open_room()


def _grant(kind: str) -> dict[str, Any]:
    """A request as GET /api/rooms/{id}/grants lists it (only what the page reads)."""
    grant_id = str(uuid4())
    return {
        "grant_id": grant_id,
        "kind": kind,
        "status": "pending",
        "expires_at": "2030-01-01T12:00:00+00:00",
        "derived_from_peer": False,
        "reason": "Your permission slip says to ask each time, so the room asked you first.",
        "summary": "Let the other owner's agent see your allergies, once."
        if kind != "action"
        else "",
        "snapshot": [{"label": "Action", "value": "Book a table"}] if kind == "action" else [],
        "payload": {"decision": "approve", "grant_id": grant_id, "kind": kind},
    }


def _json(route: Route, status: int, body: object) -> None:
    route.fulfill(status=status, content_type="application/json", body=json.dumps(body))


def test_failures_and_decisions_read_in_words(
    setup: Any, live_server: Any, browser_page: Any
) -> None:
    page = browser_page
    client = Client()
    client.force_login(setup.a.owner)
    page.context.add_cookies(
        [
            {
                "name": settings.SESSION_COOKIE_NAME,
                "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                "url": live_server.url,
            }
        ]
    )
    expired, unchecked, signed_out = _grant("action"), _grant("disclosure"), _grant("action")
    # What the server answers each decision (rooms.forks.grant_decide): an action approved
    # after its deadline ends "denied" by rule grant_expired; a disclosure whose slip could not
    # be checked stays "pending" by rule grant_check_failed.
    decisions: dict[str, Callable[[Route], None]] = {
        expired["grant_id"]: lambda r: _json(
            r, 200, {"action_id": None, "status": "denied", "rule": "grant_expired"}
        ),
        unchecked["grant_id"]: lambda r: _json(
            r, 200, {"action_id": None, "status": "pending", "rule": "grant_check_failed"}
        ),
        signed_out["grant_id"]: lambda r: _json(r, 401, {"detail": "Unauthorized"}),
    }

    def grants(route: Route) -> None:
        if route.request.method == "GET":
            _json(route, 200, [expired, unchecked, signed_out])
        else:
            decisions[route.request.url.rsplit("/", 1)[-1]](route)

    page.route(re.compile(r"/api/rooms/[^/]+/grants(/[^/]+)?$"), grants)
    page.goto(f"{live_server.url}/rooms/{setup.room.id}/")
    page.wait_for_function("() => window.SynapsiaKeys !== undefined")

    # Whispers meet every kind of failure the API helper words.
    whisper_status = page.locator("#whisper-status")

    def whisper_answered(fulfil: Callable[[Route], None], words: str) -> None:
        page.route("**/whispers", fulfil)
        page.fill("#whisper-text", "Kanal is fine by me.")
        page.click("#whisper-form button[type=submit]")
        expect(whisper_status).to_have_text(f"Not whispered: {words}")
        page.unroute("**/whispers")

    whisper_answered(lambda r: _json(r, 401, {"detail": "Unauthorized"}), SIGNED_OUT)
    whisper_answered(
        lambda r: _json(r, 403, {"detail": "CSRF check Failed"}),
        "Your sign-in changed since this page was loaded: reload the page, then try again.",
    )
    whisper_answered(
        lambda r: r.fulfill(
            status=502, content_type="text/html", body="<html><h1>502 Bad Gateway</h1></html>"
        ),
        "The server could not answer just now: try again in a moment.",
    )
    whisper_answered(
        lambda r: r.abort("failed"),
        "Could not reach the server: check your connection, then try again.",
    )
    whisper_answered(
        lambda r: r.fulfill(status=200, content_type="text/html", body="<html>Welcome</html>"),
        "The server's answer could not be read, so this page cannot tell whether it worked: "
        "reload the page to see.",
    )
    # The real server: a whisper goes through the same helper, CSRF token and all.
    page.fill("#whisper-text", "Kanal is fine by me.")
    page.click("#whisper-form button[type=submit]")
    expect(whisper_status).to_have_text("Whispered to your agent.")
    assert Whisper.objects.filter(room_id=setup.room.id).count() == 1

    # Decisions: worded from the status and the rule the server answered.
    page.evaluate("async () => { await SynapsiaKeys.enroll('Test Chromium'); }")
    grant_status = page.locator("#grant-status")

    def decide(grant: dict[str, Any], button: str, words: str) -> None:
        item = page.locator(f'#grant-requests li[data-grant-id="{grant["grant_id"]}"]')
        item.get_by_role("button", name=button).click()
        expect(grant_status).to_have_text(words)

    decide(
        expired,
        "Approve this one action",
        "Not approved: the request had expired, so nothing was done.",
    )
    decide(
        unchecked,
        "Approve this one action",
        "Not approved yet: the server could not check your permission slip just now, so "
        "nothing was shared. The request is still waiting: try again in a moment.",
    )
    decide(signed_out, "Deny", f"Not done: {SIGNED_OUT}")

    # The session ends on the server (signed out elsewhere, or expired): django-ninja's own
    # 401 {"detail": ...} carries no sentence, and the page says what to do.
    Session.objects.all().delete()
    page.fill("#whisper-text", "Still there?")
    page.click("#whisper-form button[type=submit]")
    expect(whisper_status).to_have_text(f"Not whispered: {SIGNED_OUT}")
    shown = " ".join(page.locator(s).inner_text() for s in ("#whisper-status", "#grant-status"))
    assert "HTTP" not in shown and "Unexpected token" not in shown and codes_in(shown) == []

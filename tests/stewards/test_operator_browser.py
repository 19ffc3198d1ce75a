"""The operator's pages and the owner's exit-note page in headless Chromium: strict CSP with
nothing refused, axe 0 critical/serious on desktop and phone, no sideways scroll at 390 px, no
codes in what a person reads."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.test import Client

from rooms import flares, services
from rooms.models import FlareReason
from stewards.exit_notes import exit_note_leave_as_agent, exit_note_leave_as_owner
from stewards.reports import abuse_report_file
from tests.frontend import browser
from tests.stewards.test_reports import PROPOSE

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _cookie(user: Any, base: str) -> dict[str, str]:
    client = Client()
    client.force_login(user)
    value = client.cookies[settings.SESSION_COOKIE_NAME].value
    return {"name": settings.SESSION_COOKIE_NAME, "value": value, "url": base}


def test_operator_and_exit_note_pages_pass_the_page_standards(
    closed_room: Any,
    make_open_room: Any,
    staff: Any,
    live_daphne: str,
    browser_page: Any,
) -> None:
    rooms = [closed_room(prefix=f"b{i}-") for i in range(3)]
    for setup in rooms:
        exit_note_leave_as_owner(
            owner=setup.a.owner,
            room_id=setup.room.id,
            themes=["reached_plan", "privacy_respected"],
            text="We got there in the end.",
        )
        flares.flare_raise(
            room_id=setup.room.id,
            agent_id=setup.b.agent.id,
            reason=FlareReason.LOOP,
            raised_by="server",
        )
    first = rooms[0]
    exit_note_leave_as_agent(
        agent=first.a.agent, room_id=first.room.id, themes=["took_too_long"], text="Slow going."
    )
    services_room = make_open_room(prefix="rep-")
    # A move of the negotiation: the report shows it as the reporter's card, in words.
    services.message_say(
        room_id=services_room.room.id,
        agent_id=services_room.b.agent.id,
        client_id="m1",
        text=PROPOSE,
    )
    report = abuse_report_file(
        owner=services_room.a.owner,
        room_id=services_room.room.id,
        reason="harassment",
        text="The other agent kept insisting on a very long and unbroken address like "
        "averyveryveryveryveryveryveryveryveryverylongwordthatmustwraponaphonescreen.",
    )

    page = browser_page
    context = page.context
    for who, paths in (
        (staff, ["/operator/", "/operator/reports/", f"/operator/reports/{report.id}/"]),
        (first.a.owner, [f"/rooms/{first.room.id}/exit-note/", f"/rooms/{first.room.id}/"]),
    ):
        context.clear_cookies()
        context.add_cookies([_cookie(who, live_daphne)])
        for path in paths:
            fresh = context.new_page()
            watcher = browser.watch(fresh)
            response = fresh.goto(live_daphne + path)
            assert response is not None and response.status == 200, path
            browser.page_checks(fresh, watcher, name=f"stewards {path.strip('/')}")
            fresh.close()

"""The room page's shared-artifacts section in headless Chromium: strict CSP, axe-core clean
at desktop and phone sizes, no codes in what a person reads, the body shown as text (a
published ``<script>`` is never run or rendered), and the package downloaded by the button
verifies offline.

Served by Django's threaded live server (WSGI): the section is plain HTML and a form, and
this keeps the test independent of the room socket.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client

from ledger.signing import ledger_public_key
from ledger.verify_package import verify_package
from tests.artifacts.conftest import publish, sign_publishing
from tests.conftest import CHROMIUM_FLAGS, service_unavailable
from tests.frontend import browser

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

BODY = "# Friday\n\n<script>document.title='owned'</script> Dinner at 19:30 <b>sharp</b>."


@pytest.fixture
def page(live_server: Any) -> Iterator[Any]:
    executable = "/usr/bin/chromium"
    if not Path(executable).exists():
        service_unavailable("Chromium is not installed (apt-get install chromium)")
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # ORM calls beside Playwright's loop
    from playwright.sync_api import sync_playwright

    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
            context = chromium.new_context(viewport=browser.DESKTOP, accept_downloads=True)
            try:
                yield context
            finally:
                context.close()
                chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


def test_the_section_is_accessible_escaped_and_downloads_a_package(
    make_open_room: Any, live_server: Any, page: Any, tmp_path: Path
) -> None:
    room = make_open_room()
    sign_publishing(room, room.a, "both")
    assert publish(room, room.a, title="Friday plan", body=BODY).status == "executed"
    client = Client()
    client.force_login(room.b.owner)
    page.add_cookies(
        [
            {
                "name": settings.SESSION_COOKIE_NAME,
                "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                "url": live_server.url,
            }
        ]
    )
    tab = page.new_page()
    watcher = browser.watch(tab)
    response = tab.goto(f"{live_server.url}/rooms/{room.room.id}/")
    assert response is not None and response.status == 200
    section = tab.locator("section[aria-labelledby=artifacts-heading]")
    assert "Friday plan" in section.inner_text()
    assert "published by alice's agent" in section.inner_text()
    section.locator("summary", has_text="Read it").click()
    shown = section.locator("pre.artifact-body")
    assert shown.inner_text() == BODY  # exactly as written, as text
    assert section.locator("pre.artifact-body script, pre.artifact-body b").count() == 0
    assert tab.title() != "owned"
    browser.page_checks(tab, watcher, name="room with a shared artifact")

    with tab.expect_download() as caught:
        section.get_by_role("button", name="Download the project package").click()
    download = caught.value
    assert download.suggested_filename.startswith("synapsia-project-package-")
    path = tmp_path / download.suggested_filename
    download.save_as(str(path))
    assert verify_package(str(path), pinned_key=ledger_public_key()).startswith("package intact")

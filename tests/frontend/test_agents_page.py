"""The agents page: register, rotate and revoke with POST-redirect-GET, the token shown once
(and never readable on the server on its way to the page) with the exact command that
connects it (which the negotiator's command line accepts), times in the owner's time zone,
and no UUID anywhere a person reads."""

from __future__ import annotations

import asyncio
import re
import shlex
from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.sessions.models import Session
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents import negotiator
from frontend import reveal
from rooms import selectors, services
from rooms.models import Agent, NotificationPreference, RoomState
from tests.frontend import browser
from tests.frontend.test_dashboard import UUID_RE, visible_text

pytestmark = pytest.mark.django_db

TOKEN_RE = re.compile(r"syn_agent_[A-Za-z0-9_-]{20,}")


def client_for(owner: Any) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def test_registering_redirects_and_the_token_is_shown_once(make_owner: Any) -> None:
    client = client_for(make_owner("alice"))
    response = client.post("/agents/", {"agent-name": "Alice's agent"})
    assert response.status_code == 302 and response["Location"] == "/agents/"
    assert Agent.objects.count() == 1

    shown = client.get("/agents/").content.decode()
    [token] = set(TOKEN_RE.findall(visible_text(shown)))
    assert Agent.objects.get().token_prefix in token
    assert 'data-copy-target="issued-token"' in shown and 'id="issued-token"' in shown

    again = client.get("/agents/").content.decode()  # a reload
    assert token not in again and 'id="issued-token"' not in again
    assert "Alice&#x27;s agent" in again
    assert Agent.objects.count() == 1


def test_the_connect_command_is_what_the_negotiator_accepts(
    make_owner: Any, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "synapsia.example"]
    client = client_for(make_owner("alice"))
    client.post("/agents/", {"agent-name": "Alice's agent"})
    page = client.get("/agents/", HTTP_HOST="synapsia.example:8000").content.decode()
    command = visible_text(page.split('id="connect-command">')[1].split("</p>")[0])
    [token] = TOKEN_RE.findall(command)
    argv = shlex.split(command)
    assert argv[:3] == [".venv/bin/python", "-m", "agents.negotiator"]

    parsed: dict[str, Any] = {}

    async def joined(args: Any, run: Any) -> int:  # instead of connecting
        parsed.update(url=args.url, token=args.token)
        return 0

    monkeypatch.setattr(negotiator, "in_room", joined)
    assert asyncio.run(negotiator.main(argv[3:])) == 0
    assert parsed == {"url": "ws://synapsia.example:8000/ws/rooms/ROOM-ID/", "token": token}
    # The page says what to put in place of the room's code, and where to find it.
    assert "ROOM-ID with the room's code" in visible_text(page).replace("&#x27;", "'")


def test_a_secure_request_gets_a_wss_command(make_owner: Any) -> None:
    client = client_for(make_owner("alice"))
    client.post("/agents/", {"agent-name": "Alice's agent"})
    page = client.get("/agents/", secure=True).content.decode()
    assert "--url wss://testserver/ws/rooms/ROOM-ID/" in visible_text(page)


def test_a_name_missing_says_so_and_registers_nothing(make_owner: Any) -> None:
    client = client_for(make_owner("alice"))
    response = client.post("/agents/", {"agent-name": "   "})
    assert response.status_code == 422
    assert "Give the agent a name" in visible_text(response.content.decode())
    assert Agent.objects.count() == 0


def _session_rows_text() -> str:
    """Every session row as stored (what a database backup holds), decoded."""
    return " ".join(str(row.get_decoded()) + row.session_data for row in Session.objects.all())


@pytest.mark.parametrize("how", ["register", "rotate"])
def test_the_token_is_never_readable_on_the_server_between_post_and_page(
    make_owner: Any, how: str
) -> None:
    """Between the POST and the page that shows it, the session holds the token sealed; the
    key is this browser's alone (an HttpOnly, same-site cookie for the agents page, five
    minutes), and the page forgets both."""
    alice = make_owner("alice")
    client = client_for(alice)
    if how == "register":
        response = client.post("/agents/", {"agent-name": "Alice's agent"})
    else:
        agent = services.agent_register(owner=alice, name="Alice's agent").agent
        response = client.post(f"/agents/{agent.id}/rotate/")
    assert response.status_code == 302
    key_cookie = reveal.reveal_cookie("agent_token")
    cookie = response.cookies[key_cookie]
    assert cookie["httponly"] and cookie["samesite"] == "Strict"
    assert (cookie["path"], cookie["max-age"]) == ("/agents/", 300)
    stored = _session_rows_text()
    assert "syn_agent_" not in stored and "Alice" not in stored  # sealed, name and all

    shown = client.get("/agents/")
    [token] = set(TOKEN_RE.findall(visible_text(shown.content.decode())))
    assert selectors.agent_by_token(token=token) is not None
    assert "no-store" in shown["Cache-Control"]
    # The browser's key is dropped with the page.
    assert shown.cookies[reveal.reveal_cookie("agent_token")]["max-age"] == 0
    assert "frontend.reveal" not in str(dict(client.session.items()))
    assert token not in client.get("/agents/").content.decode()


@pytest.mark.parametrize("cookie", [None, "", "bm90IGEga2V5", "A" * 44])
def test_without_the_browsers_key_the_page_says_to_issue_a_new_token(
    make_owner: Any, cookie: str | None
) -> None:
    """Cookies refused, the five minutes past, or a key altered: the token is shown to
    nobody, and the page says what to do; the next page says nothing of it."""
    client = client_for(make_owner("alice"))
    client.post("/agents/", {"agent-name": "Alice's agent"})
    if cookie is None:
        del client.cookies[reveal.reveal_cookie("agent_token")]
    else:
        client.cookies[reveal.reveal_cookie("agent_token")] = cookie
    page = client.get("/agents/").content.decode()
    assert not TOKEN_RE.search(page)
    assert "The new token cannot be shown" in page and "Issue a new token" in page
    again = client.get("/agents/").content.decode()
    assert "cannot be shown" not in again and "Alice&#x27;s agent" in again


def test_rotating_shows_the_new_token_once_and_the_old_one_stops(make_owner: Any) -> None:
    alice = make_owner("alice")
    issued = services.agent_register(owner=alice, name="Alice's agent")
    client = client_for(alice)
    response = client.post(f"/agents/{issued.agent.id}/rotate/")
    assert response.status_code == 302 and response["Location"] == "/agents/"
    page = visible_text(client.get("/agents/").content.decode())
    [token] = set(TOKEN_RE.findall(page))
    assert token != issued.token and "New token for Alice's agent" in page
    assert selectors.agent_by_token(token=issued.token) is None
    assert selectors.agent_by_token(token=token) is not None
    assert token not in client.get("/agents/").content.decode()


def test_revoking_says_what_happened_and_offers_no_more_actions(make_owner: Any) -> None:
    alice = make_owner("alice")
    issued = services.agent_register(owner=alice, name="Alice's agent")
    client = client_for(alice)
    before = visible_text(client.get("/agents/").content.decode())
    assert "Revoking is for good" in before and "the old token stops working" in before
    response = client.post(f"/agents/{issued.agent.id}/revoke/", follow=True)
    page = visible_text(response.content.decode())
    assert "its token no longer works" in page and "Revoked" in page
    assert "Revoke Alice's agent" not in page and "New token…" not in page
    assert Agent.objects.get().revoked_at is not None


def test_another_owners_agent_cannot_be_rotated(make_owner: Any) -> None:
    issued = services.agent_register(owner=make_owner("alice"), name="Alice's agent")
    mallory = client_for(make_owner("mallory"))
    response = mallory.post(f"/agents/{issued.agent.id}/rotate/", follow=True)
    assert "No such agent." in visible_text(response.content.decode())
    assert selectors.agent_by_token(token=issued.token) is not None


def test_last_used_is_in_the_owners_time_zone(make_owner: Any) -> None:
    alice = make_owner("alice")
    issued = services.agent_register(owner=alice, name="Alice's agent")
    Agent.objects.filter(id=issued.agent.id).update(
        token_last_used_at=datetime(2026, 7, 1, 18, 30, tzinfo=UTC)
    )
    if "time_zone" in {f.name for f in NotificationPreference._meta.get_fields()}:
        # The owner's choice in Settings, which the time zone middleware activates.
        NotificationPreference.objects.update_or_create(
            owner=alice, defaults={"time_zone": "Europe/Berlin"}
        )
    with timezone.override("Europe/Berlin"):  # (where that middleware is not installed)
        page = visible_text(client_for(alice).get("/agents/").content.decode())
    assert "Last used: Wed 1 Jul 2026, 20:30" in page  # 18:30 UTC is 20:30 in Berlin in July


def test_no_uuid_in_what_a_person_reads(make_open_room: Any) -> None:
    setup = make_open_room()
    client = client_for(setup.a.owner)
    client.post("/agents/", {"agent-name": "Spare agent"})
    html = client.get("/agents/").content.decode()
    text = visible_text(html)
    assert "Bound in: Dinner for two" in text
    assert UUID_RE.search(html)  # the rotate and revoke forms post to the agent's id ...
    assert not UUID_RE.search(text)  # ... which nobody reads


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_in_a_browser_the_token_shows_once_copies_and_a_reload_registers_nothing(
    live_daphne: str, browser_page: Any, django_user_model: Any
) -> None:
    page, base = browser_page, live_daphne
    django_user_model.objects.create_user(username="alice", password="correct horse 42")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    watcher = browser.watch(page)
    page.goto(f"{base}/login/?next=/agents/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "correct horse 42")
    page.click("main button[type=submit]")
    page.wait_for_url(f"{base}/agents/")

    page.fill("#id_agent-name", "Alice's agent")
    page.click("text=Register agent")
    page.wait_for_selector("#issued-token")
    assert page.url == f"{base}/agents/"  # redirected: the POST is not what a reload repeats
    token = page.inner_text("#issued-token").strip()
    assert TOKEN_RE.fullmatch(token)
    assert f"--token {token}" in page.inner_text("#connect-command")

    # The page with the long token and command: accessible, strict, and it fits a phone.
    browser.page_checks(page, watcher, name="agents with a new token")

    page.click("button.copy-button[data-copy-target=issued-token]")
    # (The strict CSP refuses wait_for_function's eval; a selector wait is not script.)
    page.wait_for_selector("#copy-status:has-text('Copied')", state="attached")
    assert page.evaluate("navigator.clipboard.readText()") == token

    page.reload()
    assert page.locator("#issued-token").count() == 0
    assert token not in page.content()
    assert Agent.objects.filter(owner__username="alice").count() == 1
    assert page.locator(".agent-row h3").all_inner_texts() == ["Alice's agent"]

    # The rooms page with its checklist, and a room form sent empty: errors in words.
    page.goto(f"{base}/")
    page.click("#create-room button[type=submit]")
    page.wait_for_selector("#create-room-error")
    assert "Say what the room is for" in page.inner_text("#create-room")
    browser.page_checks(page, watcher, name="rooms with a form error")


def test_revoked_agents_are_folded_apart_and_closed_rooms_counted(make_owner: Any) -> None:
    alice = make_owner("alice")
    scout = services.agent_register(owner=alice, name="Scout").agent
    for n in range(3):
        room = services.room_create(owner=alice, purpose=f"Dinner {n}", charter="")
        services.room_bind_agent(owner=alice, room_id=room.id, agent_id=scout.id)
        if n:
            services.room_transition(owner=alice, room_id=room.id, to=RoomState.CLOSED)
    for n in range(2):
        old = services.agent_register(owner=alice, name=f"Old agent {n}").agent
        services.agent_revoke(owner=alice, agent_id=old.id)
    client = client_for(alice)
    html = client.get("/agents/").content.decode()
    listed, folded = html.split('<details class="revoked-agents">')
    assert "Scout" in listed and "Old agent" not in listed
    assert "Revoked agents (2)" in visible_text(folded) and "Old agent 1" in folded
    assert "Bound in: Dinner 0; and 2 closed rooms" in visible_text(listed)
    assert "Dinner 1" not in html and "Dinner 2" not in html  # closed: counted, not named

    # What the page reads does not grow with the agents and rooms an owner has had.
    with CaptureQueriesContext(connection) as few:
        client.get("/agents/")
    for n in range(10):
        old = services.agent_register(owner=alice, name=f"Older agent {n}").agent
        room = services.room_create(owner=alice, purpose=f"Lunch {n}", charter="")
        services.room_bind_agent(owner=alice, room_id=room.id, agent_id=old.id)
        services.room_transition(owner=alice, room_id=room.id, to=RoomState.CLOSED)
        services.agent_revoke(owner=alice, agent_id=old.id)
    with CaptureQueriesContext(connection) as many:
        client.get("/agents/")
    assert len(many) == len(few)
    assert "Bound in 1 closed room, none open" in visible_text(
        client.get("/agents/").content.decode()
    )


def test_with_every_agent_revoked_the_page_says_so(make_owner: Any) -> None:
    alice = make_owner("alice")
    old = services.agent_register(owner=alice, name="Old agent").agent
    services.agent_revoke(owner=alice, agent_id=old.id)
    text = visible_text(client_for(alice).get("/agents/").content.decode())
    assert "No agent is active: every one you registered is revoked." in text
    assert "Revoked agents (1)" in text and "No agents yet" not in text

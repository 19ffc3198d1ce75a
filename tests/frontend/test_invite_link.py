"""The room page's new invitation link: the POST makes one invitation and redirects; the room's
page shows the link once (never cached); a reload shows it no more and makes no other; on
its way the link is in the session only sealed (frontend/reveal.py), so a read of the
sessions table finds no live invitation; without the browser's key the page says to make
a new one."""

from __future__ import annotations

from html import unescape
from typing import Any

import pytest
from django.contrib.sessions.models import Session
from django.test import Client

from frontend import reveal
from rooms import services
from rooms.bearer import INVITE_TOKEN_PREFIX, secret_digest
from rooms.models import RoomInvite
from tests.frontend.test_dashboard import client_for

pytestmark = pytest.mark.django_db

LINK = r'id="invite-url">'


@pytest.fixture
def room_page(make_owner: Any) -> tuple[Client, str]:
    owner = make_owner("alice")
    room = services.room_create(owner=owner, purpose="Dinner", charter="")
    return client_for(owner), f"/rooms/{room.id}/"


def _link(page: str) -> str | None:
    if LINK not in page:
        return None
    return unescape(page.split(LINK, 1)[1].split("</p>", 1)[0]).strip()


def test_the_link_is_shown_once_and_a_reload_makes_no_other(
    room_page: tuple[Client, str],
) -> None:
    client, path = room_page
    made = client.post(path, {"invite": "1"})
    assert made.status_code == 302 and made["Location"] == path
    cookie = made.cookies[reveal.reveal_cookie("invite_link")]
    assert cookie["httponly"] and cookie["samesite"] == "Strict" and cookie["path"] == path
    stored = " ".join(s.session_data + str(s.get_decoded()) for s in Session.objects.all())
    assert INVITE_TOKEN_PREFIX not in stored and "/invites/" not in stored

    shown = client.get(path)
    link = _link(shown.content.decode())
    assert link is not None and link.startswith("http://testserver/invites/")
    assert "no-store" in shown["Cache-Control"]
    token = link.rstrip("/").rsplit("/", 1)[1]
    assert RoomInvite.objects.get(token_hash=secret_digest(token)).used_at is None

    again = client.get(path)  # a reload of the page the redirect led to
    assert _link(again.content.decode()) is None
    assert RoomInvite.objects.count() == 1


def test_without_the_browsers_key_the_page_says_to_make_a_new_one(
    room_page: tuple[Client, str],
) -> None:
    client, path = room_page
    client.post(path, {"invite": "1"})
    del client.cookies[reveal.reveal_cookie("invite_link")]
    page = client.get(path).content.decode()
    assert _link(page) is None
    assert "make a new invitation and send that one" in page
    assert "make a new invitation" not in client.get(path).content.decode()


def test_an_agent_token_and_an_invitation_made_together_each_reach_their_page(
    room_page: tuple[Client, str],
) -> None:
    """Each kind of secret has its own reveal: the agents page does not take the link."""
    client, path = room_page
    client.post(path, {"invite": "1"})
    client.post("/agents/", {"agent-name": "Alice's agent"})
    agents = client.get("/agents/").content.decode()
    assert "syn_agent_" in agents and "/invites/" not in agents
    assert _link(client.get(path).content.decode()) is not None

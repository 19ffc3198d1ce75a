"""At an owner's limit (``gatekeeper.owner_limits``) the pages that add say so in words where
the owner is looking, keep what was typed, answer as each page answers a refused form (422;
the vault 400) and add nothing: the rooms page, the agents page and the vault's forms (an
item, a busy time). The webhooks page has its own test
(tests/frontend/test_webhooks_page.py)."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

import pytest
from django.test import Client

from rooms import services
from rooms.models import Agent, Room, RoomInvite
from slips.models import VaultItem
from slips.vault import vault_item_create
from tests.frontend.test_dashboard import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(make_owner: Any) -> Any:
    return make_owner("alice")


@pytest.fixture
def client(owner: Any) -> Client:
    return client_for(owner)


def _alerts(page: str) -> list[str]:
    """The words of each alert on the page."""
    found = re.findall(r'role="alert"[^>]*>(.*?)</(?:p|div)>', page, flags=re.S)
    return [" ".join(unescape(re.sub(r"<[^>]+>", " ", f)).split()) for f in found]


def test_the_rooms_page(client: Client, owner: Any, owner_limit: Any) -> None:
    owner_limit("rooms", 1)
    services.room_create(owner=owner, purpose="Lunch", charter="")
    response = client.post("/", {"room-purpose": "Dinner on Friday", "terms-party_size": "2"})
    page = response.content.decode()
    assert response.status_code == 422
    assert _alerts(page) == [
        "The room was not created: You have 1 room that is not closed, the most one owner may "
        "have. Close or delete one you no longer need before creating another."
    ]
    assert 'value="Dinner on Friday"' in page  # what was typed is kept
    assert Room.objects.count() == 1


def test_the_agents_page(client: Client, owner: Any, owner_limit: Any) -> None:
    owner_limit("agents", 1)
    services.agent_register(owner=owner, name="First")
    response = client.post("/agents/", {"agent-name": "Second"})
    page = response.content.decode()
    assert response.status_code == 422
    assert _alerts(page) == [
        "You have 1 agent that is not revoked, the most one owner may have. Revoke one you no "
        "longer use before registering another."
    ]
    assert 'value="Second"' in page
    assert list(Agent.objects.values_list("name", flat=True)) == ["First"]


@pytest.mark.parametrize(
    "form",
    [
        {"kind": "note", "note-text": "Window seat"},
        {"action": "busy", "busy-start": "2030-01-07T18:00", "busy-end": "2030-01-07T20:00"},
    ],
    ids=["an item", "a busy time"],
)
def test_the_vault_page(client: Client, owner: Any, owner_limit: Any, form: dict[str, str]) -> None:
    owner_limit("vault_items", 1)
    vault_item_create(owner=owner, content={"kind": "note", "text": "Quiet table"})
    response = client.post("/vault/", form)
    assert response.status_code == 400
    assert (
        "You have 1 item in your vault, the most one owner may have. Delete some you no longer "
        "need before adding more." in _alerts(response.content.decode())
    )
    assert VaultItem.objects.count() == 1


def test_the_room_page_invitation(client: Client, owner: Any, owner_limit: Any) -> None:
    owner_limit("invites", 1)
    room = services.room_create(owner=owner, purpose="Dinner", charter="")
    services.invite_create(owner=owner, room_id=room.id)
    response = client.post(f"/rooms/{room.id}/", {"invite": "1"})
    assert "/invites/" not in response.content.decode()  # no new link
    assert _alerts(response.content.decode()) == [
        "You have 1 invitation waiting to be used, the most one owner may have. Wait until one "
        "you made is used or expires (each works for a few days) before making another."
    ]
    assert RoomInvite.objects.count() == 1

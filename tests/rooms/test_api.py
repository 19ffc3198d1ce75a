"""The owners' REST API: agents, rooms, invites, binding and state, with clear errors."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from rooms.bearer import secret_digest
from rooms.models import Agent, RoomInvite

pytestmark = pytest.mark.django_db


def _client_for(owner: object) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def test_api_requires_a_session() -> None:
    assert Client().get("/api/rooms").status_code == 401


def test_agent_token_is_shown_once_and_stored_only_as_hash(make_owner) -> None:
    client = _client_for(make_owner("alice"))
    created = client.post("/api/agents", {"name": "Scout"}, content_type="application/json")
    assert created.status_code == 201
    token = created.json()["token"]
    agent = Agent.objects.get(name="Scout")
    assert agent.token_hash == secret_digest(token)
    assert token not in str(Agent.objects.filter(id=agent.id).values().first())
    listed = client.get("/api/agents").json()
    assert "token" not in listed[0]
    assert listed[0]["token_prefix"] == token[: len(listed[0]["token_prefix"])]


def test_full_room_setup_through_the_api(make_owner) -> None:
    alice, bob = _client_for(make_owner("alice")), _client_for(make_owner("bob"))
    agent_a = alice.post("/api/agents", {"name": "A"}, content_type="application/json").json()
    agent_b = bob.post("/api/agents", {"name": "B"}, content_type="application/json").json()
    room = alice.post(
        "/api/rooms", {"purpose": "Dinner", "charter": "Friday"}, content_type="application/json"
    ).json()
    assert room["state"] == "draft"
    early = alice.post(
        f"/api/rooms/{room['id']}/state", {"to": "open"}, content_type="application/json"
    )
    assert early.status_code == 409
    assert "Invite the second owner" in early.json()["message"]

    invite = alice.post(f"/api/rooms/{room['id']}/invites").json()
    joined = bob.post(
        "/api/invites/accept", {"token": invite["token"]}, content_type="application/json"
    )
    assert joined.status_code == 200
    again = bob.post(
        "/api/invites/accept", {"token": invite["token"]}, content_type="application/json"
    )
    assert again.status_code == 410

    for client, agent in ((alice, agent_a), (bob, agent_b)):
        bound = client.post(
            f"/api/rooms/{room['id']}/agent",
            {"agent_id": agent["agent"]["id"]},
            content_type="application/json",
        )
        assert bound.status_code == 200
    opened = bob.post(
        f"/api/rooms/{room['id']}/state", {"to": "open"}, content_type="application/json"
    )
    assert opened.json()["state"] == "open"
    assert [s["agent_name"] for s in opened.json()["seats"]] == ["A", "B"]


def test_strangers_cannot_see_or_touch_a_room(make_open_room, make_owner) -> None:
    room = make_open_room().room
    mallory = _client_for(make_owner("mallory"))
    assert mallory.get(f"/api/rooms/{room.id}").status_code == 404
    assert mallory.get(f"/api/rooms/{room.id}/messages").status_code == 404
    hit = mallory.post(
        f"/api/rooms/{room.id}/state", {"to": "closed"}, content_type="application/json"
    )
    assert hit.status_code == 404
    room.refresh_from_db()
    assert room.state == "open"


def test_binding_someone_elses_agent_is_refused(make_owner) -> None:
    alice, bob = make_owner("alice"), make_owner("bob")
    bobs_agent = _client_for(bob).post(
        "/api/agents", {"name": "B"}, content_type="application/json"
    )
    client = _client_for(alice)
    room = client.post("/api/rooms", {"purpose": "Trip"}, content_type="application/json").json()
    refused = client.post(
        f"/api/rooms/{room['id']}/agent",
        {"agent_id": bobs_agent.json()["agent"]["id"]},
        content_type="application/json",
    )
    assert refused.status_code == 404


def test_expired_invite_is_refused_and_leaves_no_seat(make_owner) -> None:
    alice = _client_for(make_owner("alice"))
    bob_owner = make_owner("bob")
    room = alice.post("/api/rooms", {"purpose": "Trip"}, content_type="application/json").json()
    invite = alice.post(f"/api/rooms/{room['id']}/invites").json()
    RoomInvite.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    refused = _client_for(bob_owner).post(
        "/api/invites/accept", {"token": invite["token"]}, content_type="application/json"
    )
    assert refused.status_code == 410
    assert "expired" in refused.json()["message"]
    assert len(alice.get(f"/api/rooms/{room['id']}").json()["seats"]) == 1


@pytest.mark.parametrize(
    ("payload", "status"),
    [
        ({"purpose": ""}, 422),
        ({"purpose": "x" * 201}, 422),
        ({"purpose": "ok", "charter": "c" * 4001}, 422),
        ({}, 422),
    ],
)
def test_bad_room_input_gets_a_clear_error_and_nothing_is_created(
    make_owner, payload, status
) -> None:
    client = _client_for(make_owner("alice"))
    response = client.post("/api/rooms", payload, content_type="application/json")
    assert response.status_code == status
    assert client.get("/api/rooms").json() == []


def test_revoked_agent_cannot_be_rotated_and_openapi_is_published(make_owner) -> None:
    client = _client_for(make_owner("alice"))
    agent = client.post("/api/agents", {"name": "A"}, content_type="application/json").json()[
        "agent"
    ]
    assert client.post(f"/api/agents/{agent['id']}/revoke").json()["revoked_at"] is not None
    assert client.post(f"/api/agents/{agent['id']}/token").status_code == 409
    schema = Client().get("/api/openapi.json").json()
    assert "/api/rooms/{room_id}/state" in schema["paths"]


@pytest.mark.parametrize(
    ("payload", "accepted"),
    [
        ({"name": "Adviser", "advisor_only": True, "declared_tools": ["propose_time"]}, True),
        ({"name": "Adviser", "advisor_only": True, "declared_tools": ["book_table"]}, False),
        ({"name": "Booker", "declared_tools": ["book_table", "no_such_tool"]}, False),
        ({"name": "Booker", "declared_tools": ["book_table", "spend"]}, True),
    ],
)
def test_agent_tool_hints_are_checked_at_registration(make_owner, payload, accepted) -> None:
    client = _client_for(make_owner("alice"))
    response = client.post("/api/agents", payload, content_type="application/json")
    assert response.status_code == (201 if accepted else 422), response.content
    assert Agent.objects.count() == (1 if accepted else 0)

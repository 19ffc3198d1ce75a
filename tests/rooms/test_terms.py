"""A room's dinner terms: defaults for new rooms, chosen on the API and the dashboard with
errors in words, and delivered to agents in the welcome and every context."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from dining import terms_default
from rooms import context, services
from rooms.errors import Invalid
from rooms.models import Room
from tests.socket_frames import next_frame_of

DEFAULT = {
    "catalogue": "berlin-dining",
    "time_zone": "Europe/Berlin",
    "horizon_days": 14,
    "dinner_minutes": 90,
    "first_start": "17:00",
    "last_start": "21:30",
    "start_step_minutes": 30,
    "party_size": 2,
    "travel_limit_minutes": 45,
}


def _client(owner: Any) -> Client:
    client = Client()
    client.force_login(owner)
    return client


@pytest.mark.django_db
def test_a_new_room_is_a_dinner_with_the_default_terms(make_owner: Any) -> None:
    alice = make_owner("alice")
    room = services.room_create(owner=alice, purpose="Dinner", charter="")
    assert room.terms == DEFAULT == terms_default().as_json()
    other = services.room_create(
        owner=alice, purpose="Dinner", charter="", terms={"party_size": 4, "horizon_days": 7}
    )
    assert other.terms == {**DEFAULT, "party_size": 4, "horizon_days": 7}
    plain = services.room_create(owner=alice, purpose="Review", charter="", dinner=False)
    assert Room.objects.get(id=plain.id).terms is None


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("terms", "words"),
    [
        ({"catalogue": "paris-dining"}, "No venue catalogue called 'paris-dining' is offered"),
        ({"time_zone": "Mars/Olympus"}, "Time zone: 'Mars/Olympus' is not an IANA time zone"),
        ({"horizon_days": 0}, "Horizon (days): must be at least 1."),
        ({"dinner_minutes": 1000}, "Dinner length (minutes): must be at most 300."),
        ({"party_size": "two"}, "Party size: must be a whole number."),
        ({"first_start": "7pm"}, 'First start time: must be a time "HH:MM"'),
        ({"first_start": "22:00"}, "The last start time (21:30) is before the first (22:00)."),
        ({"budget": 80}, "budget: is not one of the terms."),
    ],
)
def test_terms_that_cannot_be_used_are_refused_in_words(
    make_owner: Any, terms: dict[str, Any], words: str
) -> None:
    with pytest.raises(Invalid) as refused:
        services.room_create(owner=make_owner("alice"), purpose="Dinner", charter="", terms=terms)
    assert words in refused.value.message
    assert not Room.objects.exists()


@pytest.mark.django_db
def test_the_api_creates_a_room_with_terms_and_says_what_is_wrong(make_owner: Any) -> None:
    client = _client(make_owner("alice"))
    created = client.post(
        "/api/rooms",
        {"purpose": "Dinner", "terms": {"time_zone": "Europe/London", "dinner_minutes": 120}},
        content_type="application/json",
    )
    assert created.status_code == 201
    assert created.json()["terms"] == {
        **DEFAULT,
        "time_zone": "Europe/London",
        "dinner_minutes": 120,
    }
    refused = client.post(
        "/api/rooms",
        {"purpose": "Dinner", "terms": {"travel_limit_minutes": -5}},
        content_type="application/json",
    )
    assert refused.status_code == 422
    assert "Travel limit (minutes): must be at least 0." in refused.json()["message"]
    plain = client.post(
        "/api/rooms", {"purpose": "Review", "dinner": False}, content_type="application/json"
    )
    assert plain.json()["terms"] is None


@pytest.mark.django_db
def test_the_dashboard_form_offers_the_catalogues_and_keeps_what_was_chosen(
    make_owner: Any,
) -> None:
    client = _client(make_owner("alice"))
    page = client.get("/").content.decode()
    assert "Berlin dining (Berlin)" in page and "Travel limit" in page
    client.post(
        "/",
        {
            "room-purpose": "Dinner with Bob",
            "terms-catalogue": "berlin-dining",
            "terms-party_size": "3",
            "terms-time_zone": "",
        },
    )
    room = Room.objects.get()
    assert room.terms == {**DEFAULT, "party_size": 3}
    refused = client.post(
        "/", {"room-purpose": "Dinner again", "terms-time_zone": "Berlin"}, follow=True
    )
    assert "&#x27;Berlin&#x27; is not an IANA time zone" in refused.content.decode()
    assert Room.objects.count() == 1


@pytest.mark.django_db
def test_the_context_carries_the_terms(make_open_room: Any) -> None:
    setup = make_open_room()
    turn = context.context_for_agent(room_id=setup.room.id, agent_id=setup.a.agent.id)
    assert turn.terms == DEFAULT


@pytest.mark.django_db(transaction=True)
async def test_the_welcome_carries_the_terms_and_the_sdk_exposes_them(make_open_room: Any) -> None:
    from channels.db import database_sync_to_async
    from channels.testing import WebsocketCommunicator

    from agents.context import TurnContext
    from synapsia.asgi import application

    setup = await database_sync_to_async(make_open_room)()
    socket = WebsocketCommunicator(
        application,
        f"/ws/rooms/{setup.room.id}/",
        headers=[(b"authorization", f"Bearer {setup.a.token}".encode())],
    )
    assert (await socket.connect())[0]
    try:
        welcome = await socket.receive_json_from(timeout=5)
        assert welcome["type"] == "welcome"
        assert welcome["body"]["room"]["terms"] == DEFAULT
        await socket.send_json_to({"v": 1, "type": "context_request", "id": "c1", "body": {}})
        answer = await next_frame_of(socket, "context")
        assert TurnContext.from_body(answer["body"]).terms == DEFAULT
    finally:
        await socket.disconnect()

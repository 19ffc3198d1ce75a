"""Signal Flares: an agent (or the server, after repeated denials) stops and asks its owner,
who resets and resumes, mutes or blocks it, or steps in and speaks in person."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from ledger.models import LedgerEvent
from rooms.models import Flare, Room
from rooms.protocol import CloseCode
from synapsia.asgi import application
from tests.socket_frames import frame, join, next_frame_of

pytestmark = pytest.mark.django_db(transaction=True)


def owner_client(owner: object) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def kinds(room_id: object) -> list[str]:
    return list(
        LedgerEvent.objects.filter(room_id=room_id).order_by("seq").values_list("kind", flat=True)
    )


async def raise_flare(setup: Any) -> tuple[WebsocketCommunicator, WebsocketCommunicator, str]:
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    await a.send_json_to(frame("flare", {"reason": "loop"}, "f1"))
    for socket in (a, b):
        state = await socket.receive_json_from(timeout=5)
        assert (state["type"], state["body"]["state"]) == ("room_state", "paused")
    flare = await database_sync_to_async(Flare.objects.get)()
    return a, b, str(flare.id)


def answer(owner: object, room_id: object, flare_id: str, choice: str) -> Any:
    return owner_client(owner).post(
        f"/api/rooms/{room_id}/flares/{flare_id}",
        {"choice": choice},
        content_type="application/json",
    )


async def test_an_agent_flare_pauses_and_reset_resumes(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a, b, flare_id = await raise_flare(setup)
    assert (await database_sync_to_async(kinds)(setup.room.id))[-2:] == [
        "flare_raised",
        "room_paused",
    ]
    listed = await database_sync_to_async(
        lambda: owner_client(setup.b.owner).get(f"/api/rooms/{setup.room.id}/flares").json()
    )()
    assert [(f["reason"], f["raised_by"], f["resolved"]) for f in listed] == [
        ("loop", "agent", False)
    ]
    # Only the flaring agent's own owner answers.
    refused = await database_sync_to_async(answer)(
        setup.b.owner, setup.room.id, flare_id, "reset_resume"
    )
    assert refused.status_code == 404
    done = await database_sync_to_async(answer)(
        setup.a.owner, setup.room.id, flare_id, "reset_resume"
    )
    assert done.json()["choice"] == "reset_resume"
    assert (await a.receive_json_from(timeout=5))["body"]["state"] == "open"
    again = await database_sync_to_async(answer)(setup.a.owner, setup.room.id, flare_id, "mute")
    assert again.status_code == 409
    await a.send_json_to(frame("say", {"text": "back on track"}, "s1"))
    assert (await a.receive_json_from(timeout=5))["type"] == "sent"
    events = await database_sync_to_async(kinds)(setup.room.id)
    assert events.index("fork_resolved") < events.index("room_resumed")
    await a.disconnect()
    await b.disconnect()


async def test_muted_agent_cannot_speak_or_act_but_the_room_goes_on(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a, b, flare_id = await raise_flare(setup)
    await database_sync_to_async(answer)(setup.a.owner, setup.room.id, flare_id, "mute")
    for socket in (a, b):
        assert (await socket.receive_json_from(timeout=5))["body"]["state"] == "open"
    await a.send_json_to(frame("say", {"text": "let me talk"}, "s1"))
    error = await a.receive_json_from(timeout=5)
    assert (error["type"], error["body"]["code"]) == ("error", "withdrawn")
    await a.send_json_to(
        frame(
            "act",
            {
                "tool": "propose_time",
                "arguments": {"start": "2026-12-04T19:00:00+00:00", "duration_minutes": 90},
            },
            "a1",
        )
    )
    result = await a.receive_json_from(timeout=5)
    assert (result["body"]["status"], result["body"]["rule"]) == ("denied", "agent_withdrawn")
    assert (await database_sync_to_async(Room.objects.get)(id=setup.room.id)).state == "open"
    await b.send_json_to(frame("say", {"text": "still here"}, "b1"))
    assert (await b.receive_json_from(timeout=5))["type"] == "sent"
    await a.disconnect()
    await b.disconnect()


async def test_blocked_agent_is_disconnected_and_kept_out(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a, b, flare_id = await raise_flare(setup)
    await database_sync_to_async(answer)(setup.a.owner, setup.room.id, flare_id, "block")
    assert await a.receive_output(timeout=5) == {
        "type": "websocket.close",
        "code": CloseCode.FORBIDDEN,
    }
    again = WebsocketCommunicator(
        application,
        f"/ws/rooms/{setup.room.id}/",
        headers=[(b"authorization", f"Bearer {setup.a.token}".encode())],
    )
    assert (await again.connect())[0]
    assert await again.receive_output(timeout=5) == {
        "type": "websocket.close",
        "code": CloseCode.FORBIDDEN,
    }
    assert (await database_sync_to_async(Room.objects.get)(id=setup.room.id)).state == "paused"
    await b.disconnect()


async def test_an_owner_who_steps_in_speaks_in_person(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a, b, flare_id = await raise_flare(setup)
    client = await database_sync_to_async(owner_client)(setup.a.owner)
    path = f"/api/rooms/{setup.room.id}/in-person"
    body = {"client_id": "alice-1", "text": "Alice here, in person: Friday works."}
    early = await database_sync_to_async(client.post)(path, body, content_type="application/json")
    assert early.status_code == 409  # not stepped in yet
    await database_sync_to_async(answer)(setup.a.owner, setup.room.id, flare_id, "step_in")
    assert (await b.receive_json_from(timeout=5))["body"]["state"] == "open"
    said = await database_sync_to_async(client.post)(path, body, content_type="application/json")
    assert said.status_code == 201
    heard = await b.receive_json_from(timeout=5)
    assert heard["type"] == "message"
    assert heard["body"]["author"] == "owner"
    assert "Friday works" in heard["body"]["fenced"]  # still untrusted data to the peer agent
    await a.send_json_to(frame("say", {"text": "me again"}, "s1"))
    reply = await next_frame_of(a, "error")
    assert reply["body"]["code"] == "withdrawn"
    await a.disconnect()
    await b.disconnect()


async def test_repeated_denials_raise_a_flare_for_the_agent(make_open_room, settings) -> None:
    settings.SYNAPSIA = {**settings.SYNAPSIA, "TOOL_POLICY_DEFAULT": "deny_all"}
    setup = await database_sync_to_async(make_open_room)()
    a = await join(setup.room.id, setup.a.token)
    arguments = {"start": "2026-12-04T19:00:00+00:00", "duration_minutes": 90}
    for n in range(3):
        await a.send_json_to(
            frame("act", {"tool": "propose_time", "arguments": arguments}, f"a{n}")
        )
        reply = await next_frame_of(a, "action_result")
        assert reply["body"]["status"] == "denied"
    flare = await database_sync_to_async(Flare.objects.get)()
    assert (flare.reason, flare.raised_by) == ("repeated_denials", "server")
    assert "flare_raised" in await database_sync_to_async(kinds)(setup.room.id)
    await a.disconnect()


async def test_an_agent_repeating_itself_gets_a_flare_from_the_server(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a = await join(setup.room.id, setup.a.token)
    for n, text in enumerate(["Friday at 7?", "friday at   7?", "FRIDAY AT 7?"]):
        await a.send_json_to(frame("say", {"text": text}, f"s{n}"))
        assert (await a.receive_json_from(timeout=5))["type"] == "sent"
    state = await a.receive_json_from(timeout=5)
    assert (state["type"], state["body"]["state"]) == ("room_state", "paused")
    flare = await database_sync_to_async(Flare.objects.get)()
    assert (flare.reason, flare.raised_by) == ("loop", "server")
    await a.disconnect()


def test_saying_different_things_is_not_a_loop() -> None:
    from rooms.flares import RepetitionWatch

    watch = RepetitionWatch()
    said = ["a", "a", "b", "a", "a", "a", "a"]
    assert [watch.looping(text) for text in said] == [
        False,
        False,
        False,
        False,
        False,
        True,
        False,
    ]


def _stepped_in(setup: Any) -> str:
    """Alice's agent flares and she steps in: the room runs again and she may speak herself."""
    from rooms import flares
    from rooms.models import FlareChoice, FlareReason

    flare = flares.flare_raise(
        room_id=setup.room.id, agent_id=setup.a.agent.id, reason=FlareReason.LOOP, raised_by="agent"
    )
    flares.flare_resolve(
        owner=setup.a.owner, room_id=setup.room.id, flare_id=flare.id, choice=FlareChoice.STEP_IN
    )
    return f"/api/rooms/{setup.room.id}/in-person"


def test_words_said_in_person_that_cannot_be_recorded_say_why_and_what_to_do(
    make_open_room,
) -> None:
    from rooms import services
    from rooms.models import RoomState
    from tests.frontend.browser import codes_in

    setup = make_open_room()
    path = _stepped_in(setup)
    client = owner_client(setup.a.owner)
    body = {"client_id": "alice-1", "text": "Alice here, in person."}
    services.room_transition(owner=setup.b.owner, room_id=setup.room.id, to=RoomState.PAUSED)
    paused = client.post(path, body, content_type="application/json")
    assert paused.status_code == 409
    assert paused.json()["message"] == (
        "The room is paused: wait until it is resumed, then say it again."
    )
    services.room_transition(owner=setup.b.owner, room_id=setup.room.id, to=RoomState.CLOSED)
    closed = client.post(path, body, content_type="application/json")
    assert closed.json()["message"] == "The room is closed, so nothing more can be said in it."
    assert codes_in(paused.json()["message"] + " " + closed.json()["message"]) == []


@pytest.mark.parametrize(
    ("reason", "words"),
    [
        ("withdrawn", "You are no longer stepped in for your agent: reload the page"),
        ("not_member", "Your agent no longer has a seat in this room"),
        ("revoked", "Your agent's access has been revoked"),
        ("ledger_unavailable", "could not record your words just now: try again in a moment."),
        ("something_new", "could not record your words: reload the page, then try again."),
    ],
)
def test_every_refusal_of_words_said_in_person_is_a_sentence_without_its_code(
    make_open_room, monkeypatch, reason: str, words: str
) -> None:
    from rooms import flares
    from rooms.services import SpeakRefused
    from tests.frontend.browser import codes_in

    setup = make_open_room()
    path = _stepped_in(setup)

    def refused(**_: Any) -> Any:
        raise SpeakRefused(reason)

    monkeypatch.setattr(flares, "message_say", refused)
    answer = owner_client(setup.a.owner).post(
        path, {"client_id": "alice-1", "text": "Hello."}, content_type="application/json"
    )
    assert answer.status_code == 409
    message = answer.json()["message"]
    assert words in message and codes_in(message) == []  # "not_member" is never shown

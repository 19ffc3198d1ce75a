"""An add sent twice makes one thing (``gatekeeper.add_keys``): the REST API's optional
``Idempotency-Key`` on registering an agent, creating a room, making an invitation, adding a
vault item and whispering to one's agent. A repeat makes nothing and is answered 409 with what
the first made, never its secret; the key with another request, or a malformed key, is refused
422 with nothing made; a refused add remembers nothing; keys are per owner, kept a day and then
purged; what is kept are keyed digests; and the same add sent twice at once (two connections)
makes one."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from gatekeeper import add_keys
from gatekeeper.add_keys import AlreadyAdded, add_once, add_request
from gatekeeper.models import AddKey
from rooms import services as rooms
from rooms.models import Agent, Room, RoomInvite, RoomState, Whisper
from rooms.retention import retention_purge_all, retention_row
from slips.models import VaultItem

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "retry-7f3a9c2e1b4d"
BUDGET = {"kind": "budget", "currency": "EUR", "minimum": 20, "maximum": 60}


def _client(owner: Any) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def _post(client: Client, path: str, body: Any = None, key: str | None = KEY) -> Any:
    headers = {"Idempotency-Key": key} if key is not None else {}
    return client.post(path, body or {}, content_type="application/json", headers=headers)


# Each add: its path (an invitation's names a new room of the owner's), its body, and how many
# the owner has of what it makes.
ADDS: dict[str, tuple[str, dict[str, Any], Callable[[Any], int]]] = {
    "agent": ("/api/agents", {"name": "Scout"}, lambda o: Agent.objects.filter(owner=o).count()),
    "room": (
        "/api/rooms",
        {"purpose": "Dinner on Friday", "dinner": False},
        lambda o: Room.objects.filter(members__owner=o).count(),
    ),
    "invite": (
        "/api/rooms/{room}/invites",
        {},
        lambda o: RoomInvite.objects.filter(room__members__owner=o).count(),
    ),
    "vault_item": (
        "/api/vault",
        {"content": BUDGET},
        lambda o: VaultItem.objects.filter(owner=o).count(),
    ),
    "whisper": (
        "/api/rooms/{room}/whispers",
        {"text": "Keep it under 60 a head."},
        lambda o: Whisper.objects.filter(owner=o).count(),
    ),
}


def _path(what: str, owner: Any) -> str:
    path = ADDS[what][0]
    if "{room}" in path:
        room = rooms.room_create(owner=owner, purpose="A new room", dinner=False, charter="")
        if what == "whisper":  # to the owner's agent, bound in the room
            agent = rooms.agent_register(owner=owner, name="Scout").agent
            rooms.room_bind_agent(owner=owner, room_id=room.id, agent_id=agent.id)
        path = path.format(room=room.id)
    return path


@pytest.mark.parametrize("what", sorted(ADDS))
def test_the_same_add_sent_again_makes_nothing_and_names_what_the_first_made(
    make_owner: Callable[[str], Any], what: str
) -> None:
    owner = make_owner("alice")
    client = _client(owner)
    path, body, made = _path(what, owner), ADDS[what][1], ADDS[what][2]
    first = _post(client, path, body)
    assert first.status_code == 201, first.content
    count = made(owner)

    again = _post(client, path, body)
    assert again.status_code == 409, again.content
    said = again.json()
    assert said["code"] == f"{what}_already_added"
    assert "was made already" in said["message"]
    assert made(owner) == count
    if what == "invite":
        # Known by its link only, which the repeat never shows again.
        assert "id" not in said and first.json()["token"] not in again.content.decode()
        assert "make a new invitation" in said["message"]
    else:
        first_id = first.json()["agent"]["id"] if what == "agent" else first.json()["id"]
        assert said["id"] == first_id
    if what == "agent":
        assert first.json()["token"] not in again.content.decode()
        assert "rotate it" in said["message"]

    # Without a key, or with a new one, an add is a new add.
    assert _post(client, path, body, key=None).status_code == 201
    assert _post(client, path, body, key=KEY + "-2").status_code == 201
    assert made(owner) == count + 2


@pytest.mark.parametrize("what", ["agent", "room", "vault_item"])
def test_the_key_with_another_request_is_refused_and_makes_nothing(
    make_owner: Callable[[str], Any], what: str
) -> None:
    owner = make_owner("alice")
    client = _client(owner)
    path, body, made = ADDS[what]
    assert _post(client, path, body).status_code == 201
    count = made(owner)
    other = {
        "agent": {"name": "Scout", "advisor_only": True},
        "room": {"purpose": "Lunch on Saturday", "dinner": False},
        "vault_item": {"content": {**BUDGET, "maximum": 61}},
    }[what]
    refused = _post(client, path, other)
    assert refused.status_code == 422, refused.content
    assert refused.json()["code"] == "idempotency_key_reused"
    assert "Use a new key for each add" in refused.json()["message"]
    assert made(owner) == count
    # Nor on another kind of add.
    room_body = ADDS["room"][1]
    if what != "room":
        assert _post(client, "/api/rooms", room_body).json()["code"] == "idempotency_key_reused"


def test_the_same_key_on_another_rooms_invitation_is_another_request(
    make_owner: Callable[[str], Any],
) -> None:
    owner = make_owner("alice")
    client = _client(owner)
    first, second = _path("invite", owner), _path("invite", owner)
    assert _post(client, first).status_code == 201
    refused = _post(client, second)
    assert refused.status_code == 422 and refused.json()["code"] == "idempotency_key_reused"


@pytest.mark.parametrize(
    "key",
    ["short-key", "x" * 65, "has a space in it!", "naïve-unicode-key-é", "semi;colon;key;here"],
)
def test_a_malformed_key_is_refused_and_nothing_is_made(
    make_owner: Callable[[str], Any], key: str
) -> None:
    owner = make_owner("alice")
    refused = _post(_client(owner), "/api/agents", {"name": "Scout"}, key=key)
    assert refused.status_code == 422, refused.content
    assert refused.json()["code"] == "idempotency_key_invalid"
    assert "16 to 64" in refused.json()["message"]
    assert not Agent.objects.filter(owner=owner).exists()
    assert not AddKey.objects.exists()


def test_a_refused_add_remembers_nothing_so_its_retry_makes_it(
    make_owner: Callable[[str], Any], owner_limit: Any
) -> None:
    owner_limit("rooms", 1)
    owner = make_owner("alice")
    client = _client(owner)
    held = rooms.room_create(owner=owner, purpose="The one room allowed", dinner=False, charter="")
    body = ADDS["room"][1]
    refused = _post(client, "/api/rooms", body)
    assert refused.status_code == 409 and refused.json()["code"] == "rooms_limit_reached"
    assert not AddKey.objects.exists()
    rooms.room_transition(owner=owner, room_id=held.id, to=RoomState.CLOSED)
    assert _post(client, "/api/rooms", body).status_code == 201


def test_keys_are_each_owners_own(make_owner: Callable[[str], Any]) -> None:
    alice, bob = make_owner("alice"), make_owner("bob")
    body = ADDS["vault_item"][1]
    assert _post(_client(alice), "/api/vault", body).status_code == 201
    assert _post(_client(bob), "/api/vault", body).status_code == 201
    assert VaultItem.objects.filter(owner=bob).count() == 1


def test_a_key_is_kept_a_day_then_purged_and_then_is_a_new_add(
    make_owner: Callable[[str], Any],
) -> None:
    owner = make_owner("alice")
    client = _client(owner)
    path, body, made = ADDS["agent"]
    assert _post(client, path, body).status_code == 201
    row = retention_row("add_keys")
    assert row.days == 1 and not row.in_rooms
    # The owner's settings page lists it with the schedule, in words.
    page = client.get("/settings/").content.decode()
    assert "Keys your API client sent to make an add once" in page
    assert "1 day (the default)" in page and "1 days" not in page
    # A day and a minute on, the key no longer counts, even before the purge has run.
    AddKey.objects.update(created_at=timezone.now() - timedelta(days=1, minutes=1))
    assert _post(client, path, body).status_code == 201
    assert made(owner) == 2 and AddKey.objects.count() == 1  # the old row gave way
    # The schedule's purge deletes keys past their day, and only those.
    AddKey.objects.create(
        owner=owner,
        key_digest="0" * 64,
        what="agent",
        request_digest="0" * 64,
        made_id=None,
        created_at=timezone.now() - timedelta(days=2),
    )
    purged = {p.key: p for p in retention_purge_all()}
    assert purged["add_keys"].rows == 1
    assert AddKey.objects.count() == 1


def test_what_is_kept_is_keyed_digests_not_the_key_or_the_request(
    make_owner: Callable[[str], Any],
) -> None:
    owner = make_owner("alice")
    assert _post(_client(owner), "/api/vault", ADDS["vault_item"][1]).status_code == 201
    kept = AddKey.objects.get()
    plain = add_request("/api/vault", BUDGET)  # the request as add_once was given it
    assert kept.what == "vault_item"
    assert KEY not in kept.key_digest
    assert kept.key_digest != hashlib.sha256(KEY.encode()).hexdigest()
    for guess in (plain, f"vault_item\n{plain}"):
        assert kept.request_digest != hashlib.sha256(guess.encode()).hexdigest()
    assert len(kept.key_digest) == len(kept.request_digest) == 64


def test_the_same_add_sent_twice_at_once_makes_one(
    make_owner: Callable[[str], Any], monkeypatch: Any
) -> None:
    owner = make_owner("alice")
    original = rooms.room_create

    def slow_create(**kwargs: Any) -> Any:
        time.sleep(0.3)  # between the key's look-up and its insert
        return original(**kwargs)

    start = threading.Barrier(2)
    ended: list[str] = []

    def send() -> None:
        try:
            start.wait()
            add_once(
                owner=owner,
                what="room",
                key=KEY,
                request=add_request("/rooms", {"purpose": "Dinner"}),
                make=lambda: slow_create(owner=owner, purpose="Dinner", dinner=False, charter=""),
                made_id=lambda room: room.id,
            )
            ended.append("added")
        except AlreadyAdded as repeat:
            ended.append(repeat.code)
        except Exception as failed:  # what the race ended with is the result
            ended.append(type(failed).__name__)
        finally:
            connection.close()  # the thread's own connection

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(ended) == ["added", "room_already_added"]
    assert Room.objects.filter(members__owner=owner).count() == 1
    assert add_keys.AddKey.objects.count() == 1

"""How much one owner may hold at once (``gatekeeper.owner_limits``): at the limit an add is
refused in words and writes nothing, freeing one (revoke, close, delete, switch off) lets the
next add through, another owner's count is their own, the API answers 409 with the words,
and two adds racing on their own connections (in the services pass, two real connections to
PostgreSQL; on SQLite its IMMEDIATE transactions) cannot both pass the limit. In the races
the time between the count and the insert is widened, so without the owner's row lock both
adds would count the same and both be saved (checked by removing the lock)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from gatekeeper import webhooks
from gatekeeper.errors import WebhookAlreadyAdded
from gatekeeper.models import WebhookEndpoint
from gatekeeper.owner_limits import OwnerLimitReached
from rooms import services as rooms
from rooms.models import Agent, Room, RoomInvite, RoomState
from slips import services as slips
from slips import vault
from slips.models import DeviceKey, VaultItem
from tests.slips.conftest import Device, enroll

pytestmark = pytest.mark.django_db(transaction=True)

NOTE = {"kind": "note", "text": "Prefers a quiet table."}


def _agent(owner: Any) -> Callable[[], Any]:
    return lambda: rooms.agent_register(owner=owner, name="An agent").agent


def _room(owner: Any) -> Callable[[], Any]:
    return lambda: rooms.room_create(owner=owner, purpose="Dinner", charter="")


def _item(owner: Any) -> Callable[[], Any]:
    return lambda: vault.vault_item_create(owner=owner, content=NOTE)


def _key(owner: Any) -> Callable[[], Any]:
    return lambda: enroll(owner)[0]


def _invite(owner: Any) -> Callable[[], Any]:
    room = rooms.room_create(owner=owner, purpose="Dinner", charter="")
    return lambda: rooms.invite_create(owner=owner, room_id=room.id).invite


def _webhook(owner: Any) -> Callable[[], Any]:
    return lambda: (
        webhooks.webhook_endpoint_create(owner=owner, url="https://hooks.example.com/h").endpoint
    )


# held: (add one, free that one, the rows an add writes)
KINDS: dict[str, tuple[Callable[[Any], Callable[[], Any]], Callable[[Any, Any], Any], Any]] = {
    "agents": (_agent, lambda o, a: rooms.agent_revoke(owner=o, agent_id=a.id), Agent),
    "rooms": (
        _room,
        lambda o, r: rooms.room_transition(owner=o, room_id=r.id, to=RoomState.CLOSED),
        Room,
    ),
    "vault_items": (
        _item,
        lambda o, i: vault.vault_item_delete(owner=o, item_id=i.id),
        VaultItem,
    ),
    "device_keys": (_key, lambda o, k: slips.key_revoke(owner=o, key_id=k.id), DeviceKey),
    "invites": (
        _invite,
        # Expired, it no longer waits (a used one neither).
        lambda o, i: RoomInvite.objects.filter(id=i.id).update(expires_at=timezone.now()),
        RoomInvite,
    ),
    "webhooks": (
        _webhook,
        lambda o, w: webhooks.webhook_endpoint_deactivate(owner=o, endpoint_id=w.id),
        WebhookEndpoint,
    ),
}

WORDS = {
    "agents": "You have 2 agents that are not revoked, the most one owner may have. Revoke one "
    "you no longer use before registering another.",
    "rooms": "You have 2 rooms that are not closed, the most one owner may have. Close or "
    "delete one you no longer need before creating another.",
    "vault_items": "You have 2 items in your vault, the most one owner may have. Delete some "
    "you no longer need before adding more.",
    "device_keys": "You have 2 device keys in use, the most one owner may have. Revoke one you "
    "no longer use (a lost or old device's) before enrolling another.",
    "invites": "You have 2 invitations waiting to be used, the most one owner may have. Wait "
    "until one you made is used or expires (each works for a few days) before making another.",
    "webhooks": "You have 2 webhooks on, the most one owner may have. Switch one off before "
    "adding another.",
}


@pytest.mark.parametrize("held", list(KINDS))
def test_at_the_limit_nothing_is_added_until_one_is_freed(
    held: str, make_owner: Callable[[str], Any], owner_limit: Any
) -> None:
    owner_limit(held, 2)
    make, free, model = KINDS[held]
    owner, other = make_owner("holder"), make_owner("other")
    first, _second = make(owner)(), make(owner)()
    written = model.objects.count()
    with pytest.raises(OwnerLimitReached) as refused:
        make(owner)()
    assert (refused.value.code, refused.value.message) == (f"{held}_limit_reached", WORDS[held])
    assert model.objects.count() == written  # nothing half-written
    make(other)()  # another owner's count is their own
    free(owner, first)
    make(owner)()  # one freed: the next add goes through


def test_one_is_said_as_one(make_owner: Callable[[str], Any], owner_limit: Any) -> None:
    owner_limit("agents", 1)
    owner = make_owner("holder")
    _agent(owner)()
    with pytest.raises(OwnerLimitReached, match=r"^You have 1 agent that is not revoked, "):
        _agent(owner)()


@pytest.mark.parametrize(
    ("path", "body", "held"),
    [
        ("/api/webhooks", {"url": "https://hooks.example.com/h"}, "webhooks"),
        ("/api/agents", {"name": "An agent"}, "agents"),
        ("/api/vault", {"content": NOTE}, "vault_items"),
    ],
)
def test_the_api_answers_409_with_the_words(
    path: str, body: dict[str, Any], held: str, make_owner: Callable[[str], Any], owner_limit: Any
) -> None:
    owner_limit(held, 2)
    client = Client()
    client.force_login(make_owner("holder"))
    for _ in range(2):
        assert client.post(path, body, content_type="application/json").status_code == 201
    refused = client.post(path, body, content_type="application/json")
    assert refused.status_code == 409
    assert refused.json() == {"code": f"{held}_limit_reached", "message": WORDS[held]}


def _race(adds: list[Callable[[], Any]]) -> list[str]:
    """Each add in a thread of its own, started together; what each ended with."""
    start = threading.Barrier(len(adds))
    ended: list[str] = []

    def add(one: Callable[[], Any]) -> None:
        try:
            start.wait()
            one()
            ended.append("added")
        except (OwnerLimitReached, WebhookAlreadyAdded) as refused:
            ended.append(refused.code)
        finally:
            connection.close()  # the thread's own connection

    threads = [threading.Thread(target=add, args=(one,)) for one in adds]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return sorted(ended)


def _slowed(monkeypatch: Any, module: Any, name: str) -> None:
    """``module.name`` waits before it runs: it is called after the count, before the insert."""
    original = getattr(module, name)

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.3)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, slow)


def test_two_webhooks_added_at_once_stay_within_the_limit(
    make_owner: Callable[[str], Any], owner_limit: Any, monkeypatch: Any
) -> None:
    owner_limit("webhooks", 2)
    owner = make_owner("holder")
    _webhook(owner)()
    _slowed(monkeypatch, webhooks, "webhook_secret_seal")
    assert _race([_webhook(owner), _webhook(owner)]) == ["added", "webhooks_limit_reached"]
    assert WebhookEndpoint.objects.filter(owner=owner, active=True).count() == 2


def test_two_agents_registered_at_once_stay_within_the_limit(
    make_owner: Callable[[str], Any], owner_limit: Any, monkeypatch: Any
) -> None:
    owner_limit("agents", 1)
    owner = make_owner("holder")
    _slowed(monkeypatch, rooms, "secret_issue")
    assert _race([_agent(owner), _agent(owner)]) == ["added", "agents_limit_reached"]
    assert Agent.objects.filter(owner=owner).count() == 1


def test_the_same_webhook_form_sent_twice_at_once_adds_one(
    make_owner: Callable[[str], Any], monkeypatch: Any
) -> None:
    owner = make_owner("holder")
    _slowed(monkeypatch, webhooks, "webhook_secret_seal")

    def send() -> Any:
        return webhooks.webhook_endpoint_create(
            owner=owner, url="https://hooks.example.com/h", add_key="a-key-from-the-page"
        )

    assert _race([send, send]) == ["added", "webhook_already_added"]
    assert WebhookEndpoint.objects.filter(owner=owner).count() == 1


def test_a_key_rotation_at_the_limit_replaces_and_is_not_refused(
    make_owner: Callable[[str], Any], owner_limit: Any
) -> None:
    owner_limit("device_keys", 1)
    owner = make_owner("holder")
    old, _ = enroll(owner)
    device = Device()
    challenge = slips.key_challenge_issue(owner=owner, purpose="rotate").value
    new = slips.key_rotate(
        owner=owner,
        old_key_id=old.id,
        challenge=challenge,
        public_key=device.public_key,
        label="new laptop",
        proof=device.proof(owner=owner, challenge=challenge, label="new laptop", purpose="rotate"),
    )
    usable = DeviceKey.objects.filter(owner=owner, revoked_at=None, retired_at=None)
    assert list(usable.values_list("id", flat=True)) == [new.id]

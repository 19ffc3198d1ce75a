"""The first-run checklist: each step is ticked by the real thing happening (through the
services), in order, and the rooms page stops showing it once all are done."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from frontend.onboarding import onboarding_complete, onboarding_steps
from rooms import services
from rooms.models import RoomState
from slips import services as slip_services
from slips.vault import vault_item_create
from tests.slips.conftest import canonical_text, enroll, slip_payload

pytestmark = pytest.mark.django_db


def _done(owner: Any) -> dict[str, bool]:
    return {step.key: step.done for step in onboarding_steps(owner=owner)}


def test_a_new_owner_has_every_step_to_do_in_order(make_owner: Any) -> None:
    steps = onboarding_steps(owner=make_owner("alice"))
    assert [s.key for s in steps] == ["key", "vault", "agent", "room", "slip", "open"]
    assert not any(s.done for s in steps)
    assert not onboarding_complete(steps)
    assert all(s.why.endswith(".") and s.url.startswith("/") for s in steps)


def test_each_step_flips_when_the_real_thing_happens(make_owner: Any) -> None:
    alice, bob = make_owner("alice"), make_owner("bob")
    assert _done(alice) == dict.fromkeys(["key", "vault", "agent", "room", "slip", "open"], False)

    key, device = enroll(alice)
    assert _done(alice)["key"] and not _done(alice)["vault"]

    vault_item_create(owner=alice, content={"kind": "note", "text": "I like quiet places."})
    assert _done(alice)["vault"] and not _done(alice)["agent"]

    agent = services.agent_register(owner=alice, name="Alice's agent").agent
    assert _done(alice)["agent"] and not _done(alice)["room"]

    room = services.room_create(owner=alice, purpose="Dinner on Friday", charter="")
    assert _done(alice)["room"] and not _done(alice)["slip"]
    slip_step = next(s for s in onboarding_steps(owner=alice) if s.key == "slip")
    assert slip_step.url == f"/rooms/{room.id}/slip/"

    services.room_bind_agent(owner=alice, room_id=room.id, agent_id=agent.id)
    text = canonical_text(slip_payload(owner=alice, room_id=room.id, agent_id=agent.id, key=key))
    slip_services.slip_submit(
        owner=alice,
        room_id=room.id,
        seated_agent_id=agent.id,
        payload=text,
        signature=device.sign(text),
    )
    assert _done(alice)["slip"] and not _done(alice)["open"]

    invite = services.invite_create(owner=alice, room_id=room.id)
    services.invite_accept(owner=bob, token=invite.token)
    bob_agent = services.agent_register(owner=bob, name="Bob's agent").agent
    services.room_bind_agent(owner=bob, room_id=room.id, agent_id=bob_agent.id)
    assert not _done(alice)["open"]
    services.room_transition(owner=alice, room_id=room.id, to=RoomState.OPEN)
    assert onboarding_complete(onboarding_steps(owner=alice))
    # Bob joined a room that is now open, but has no key, vault or slip of his own.
    assert _done(bob) == {
        "key": False,
        "vault": False,
        "agent": True,
        "room": True,
        "slip": False,
        "open": True,
    }


def test_a_revoked_key_or_agent_no_longer_counts(make_owner: Any) -> None:
    alice = make_owner("alice")
    key, _ = enroll(alice)
    agent = services.agent_register(owner=alice, name="Alice's agent").agent
    assert _done(alice)["key"] and _done(alice)["agent"]
    slip_services.key_revoke(owner=alice, key_id=key.id)
    services.agent_revoke(owner=alice, agent_id=agent.id)
    assert not _done(alice)["key"] and not _done(alice)["agent"]


def test_the_rooms_page_shows_the_checklist_until_it_is_complete(make_open_room: Any) -> None:
    setup = make_open_room()
    client = Client()
    client.force_login(setup.a.owner)
    page = client.get("/").content.decode()
    assert 'id="onboarding"' in page
    assert 'data-step="agent" data-done="true"' in page
    assert 'data-step="key" data-done="false"' in page
    assert 'href="/keys/"' in page

    key, device = enroll(setup.a.owner)
    vault_item_create(owner=setup.a.owner, content={"kind": "note", "text": "No fish."})
    text = canonical_text(
        slip_payload(owner=setup.a.owner, room_id=setup.room.id, agent_id=setup.a.agent.id, key=key)
    )
    slip_services.slip_submit(
        owner=setup.a.owner,
        room_id=setup.room.id,
        seated_agent_id=setup.a.agent.id,
        payload=text,
        signature=device.sign(text),
    )
    assert 'id="onboarding"' not in client.get("/").content.decode()

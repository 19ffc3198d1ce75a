"""Owners hear about rooms at the volume they chose: flares urgent, forks as a badge, and an
opt-in digest built from ledger metadata only."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from rooms import flares, forks
from rooms.models import FlareReason

pytestmark = pytest.mark.django_db

CANARY = "zq7digest"


def client_for(owner: object) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def test_flares_are_urgent_forks_are_a_badge_and_the_digest_is_opt_in(
    make_open_room, settings
) -> None:
    settings.SYNAPSIA = {**settings.SYNAPSIA, "TOOL_POLICY_DEFAULT": "allow_all"}
    setup = make_open_room(purpose="Dinner")
    alice = client_for(setup.a.owner)
    assert alice.get("/api/notifications").json() == {
        "urgent_flares": 0,
        "forks_waiting": 0,
        "digest_enabled": False,
        "digest": [],
    }
    # Alice's agent asks for something no slip clears: a fork waits for her.
    forks.action_for_agent(
        room_id=setup.room.id,
        agent_id=setup.a.agent.id,
        client_id="spend-1",
        tool="spend",
        arguments={"amount_cents": 100, "currency": "EUR", "payee_id": "nopa", "purpose": CANARY},
    )
    flares.flare_raise(
        room_id=setup.room.id,
        agent_id=setup.a.agent.id,
        reason=FlareReason.DISTRESS,
        raised_by="agent",
    )
    found = alice.get("/api/notifications").json()
    assert (found["urgent_flares"], found["forks_waiting"]) == (1, 1)
    # Bob's agent raised nothing and nothing waits for him.
    bob = client_for(setup.b.owner).get("/api/notifications").json()
    assert (bob["urgent_flares"], bob["forks_waiting"]) == (0, 0)

    opted = alice.put(
        "/api/notifications/preferences", {"digest": True}, content_type="application/json"
    )
    digest = opted.json()["digest"]
    assert [d["purpose"] for d in digest] == ["Dinner"]
    counts = digest[0]["counts"]
    assert counts["flare_raised"] == 1 and counts["grant_requested"] == 1 and counts["join"] == 2
    assert CANARY not in json.dumps(opted.json())

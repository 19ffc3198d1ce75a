"""Grant deadlines: the beat task ``gatekeeper.grants_expire`` ends every pending grant past
its deadline as a denial; the room stays paused at its fork and nothing runs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from gatekeeper import tasks
from gatekeeper.actions import action_request
from gatekeeper.adapters.sandbox import SandboxEffect
from gatekeeper.decision import AgentFacts, RoomFacts
from gatekeeper.records import ActionRecord, ActionStatus, Grant, GrantStatus
from ledger.models import LedgerEvent
from ledger.verification import ledger_verify_room
from rooms import forks
from rooms.errors import InvalidState
from rooms.models import Room, RoomState
from synapsia.celery import app
from tests.bookings import OVER, booking
from tests.gatekeeper.conftest import Negotiation
from tests.socket_frames import join, next_frame_of

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _allow_tools_by_default(settings: Any) -> None:
    # The production default is deny-all; these tests are about grant deadlines, not policy.
    settings.SYNAPSIA = {**settings.SYNAPSIA, "TOOL_POLICY_DEFAULT": "allow_all"}


def _kinds(n: Negotiation) -> list[str]:
    return list(
        LedgerEvent.objects.filter(room_id=n.room.id).order_by("seq").values_list("kind", flat=True)
    )


def test_beat_runs_the_expiry_task_every_minute() -> None:
    entries = [
        e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == "gatekeeper.grants_expire"
    ]
    assert entries == [{"task": "gatekeeper.grants_expire", "schedule": 60.0}]
    app.loader.import_default_modules()  # what a worker does at start-up
    assert app.tasks["gatekeeper.grants_expire"] is tasks.grants_expire._get_current_object()


def test_a_pending_grant_past_its_deadline_ends_as_a_denial(negotiation) -> None:
    late = forks.action_for_agent(
        room_id=negotiation.room.id,
        agent_id=negotiation.setup.a.agent.id,
        client_id="late",
        tool="book_table",
        arguments=booking(OVER),
    )
    assert late.status == ActionStatus.AWAITING_GRANT
    assert Room.objects.get(id=negotiation.room.id).state == RoomState.PAUSED
    # A second request, still within its deadline (recorded by the gatekeeper directly: the
    # room is already paused for the first).
    agent = negotiation.setup.a.agent
    waiting = action_request(
        room=RoomFacts(room_id=negotiation.room.id, state="open"),
        agent=AgentFacts(
            agent_id=agent.id,
            owner_id=negotiation.setup.a.owner.pk,
            advisor_only=False,
            declared_tools=None,
            revoked=False,
        ),
        tool="spend",
        arguments={"amount_cents": 100, "currency": "EUR", "payee_id": "nopa", "purpose": "tip"},
        idempotency_key="waiting",
    )
    assert waiting.status == ActionStatus.AWAITING_GRANT
    # The first deadline passes unanswered.
    Grant.objects.filter(id=late.grant_id).update(expires_at=timezone.now() - timedelta(seconds=1))
    expired_grant = Grant.objects.select_related("action").get(id=late.grant_id)

    ran = tasks.grants_expire.apply()  # the task as a worker runs it, in this process
    assert ran.successful() and ran.result == 1

    assert Grant.objects.get(id=late.grant_id).status == GrantStatus.EXPIRED
    record = ActionRecord.objects.get(id=late.action_id)
    assert (record.status, record.rule) == (ActionStatus.DENIED, "grant_expired")
    # The other grant is untouched: it still has time.
    assert Grant.objects.get(id=waiting.grant_id).status == GrantStatus.PENDING
    assert ActionRecord.objects.get(id=waiting.action_id).status == ActionStatus.AWAITING_GRANT
    # The default at a fork is to stay paused; nothing ran.
    assert Room.objects.get(id=negotiation.room.id).state == RoomState.PAUSED
    assert SandboxEffect.objects.count() == 0
    expired_events = LedgerEvent.objects.filter(room_id=negotiation.room.id, kind="grant_expired")
    assert expired_events.count() == 1
    assert _kinds(negotiation)[-2:] == ["grant_expired", "fork_resolved"]
    assert ledger_verify_room(room_id=negotiation.room.id).ok

    # Running again ends nothing twice.
    assert tasks.grants_expire.apply().result == 0
    assert expired_events.count() == 1
    # The owner's signature, arriving late, is refused; the agent's retry reads the denial.
    with pytest.raises(InvalidState) as refused:
        negotiation.approve(expired_grant)
    assert refused.value.message == (
        "This request has already ended unanswered (it expired, or what it was asked under "
        "changed), so nothing was done. Nothing more to do."
    )
    retry = forks.action_for_agent(
        room_id=negotiation.room.id,
        agent_id=agent.id,
        client_id="late",
        tool="book_table",
        arguments=booking(OVER),
    )
    assert retry.replay and (retry.status, retry.rule) == (ActionStatus.DENIED, "grant_expired")
    assert SandboxEffect.objects.count() == 0
    assert Room.objects.get(id=negotiation.room.id).state == RoomState.PAUSED


def test_approving_after_the_deadline_answers_why_for_the_page_to_say(negotiation) -> None:
    """The room page words a decision from the answer's status and rule (grants.js): an
    approval that came too late is "denied" with rule ``grant_expired``, not a plain denial;
    a second try is refused in words."""
    from django.test import Client

    late = negotiation.act(OVER, ref="late")
    Grant.objects.filter(id=late.grant_id).update(expires_at=timezone.now() - timedelta(seconds=1))
    grant = Grant.objects.select_related("action").get(id=late.grant_id)
    client = Client()
    client.force_login(negotiation.setup.a.owner)
    url = f"/api/rooms/{negotiation.room.id}/grants/{grant.id}"
    body = {
        "decision": "approve",
        "key_id": str(negotiation.key.id),
        "signature": negotiation.device.sign_grant(grant),
    }
    answer = client.post(url, body, content_type="application/json")
    assert answer.status_code == 200
    assert (answer.json()["status"], answer.json()["rule"]) == ("denied", "grant_expired")
    again = client.post(url, body, content_type="application/json")
    assert again.status_code == 409
    assert again.json()["message"].startswith("This request has already ended unanswered")
    assert SandboxEffect.objects.count() == 0


def test_answering_a_request_already_answered_says_what_became_of_it(negotiation) -> None:
    denied = negotiation.act(OVER, ref="denied")
    forks.grant_decide(
        owner=negotiation.setup.a.owner,
        room_id=negotiation.room.id,
        grant_id=denied.grant_id,
        approve=False,
    )
    with pytest.raises(InvalidState) as refused:
        negotiation.approve(Grant.objects.get(id=denied.grant_id))
    assert refused.value.message == (
        "This request was already answered: denied, so nothing was done. Nothing more to do."
    )


@pytest.mark.django_db(transaction=True)
async def test_the_agent_is_told_when_its_grant_expires(negotiation) -> None:
    from channels.db import database_sync_to_async

    from gatekeeper.grants import grants_expire

    agent = await join(negotiation.room.id, negotiation.setup.a.token)
    big = {"tool": "book_table", "arguments": booking(OVER)}
    await agent.send_json_to({"v": 1, "type": "act", "id": "big-booking", "body": big})
    asked = await next_frame_of(agent, "action_result")  # the room's pause may come first
    assert asked["body"]["status"] == "awaiting_grant"
    later = timezone.now() + timedelta(seconds=settings.SYNAPSIA["GRANT_TTL_SECONDS"] + 1)
    assert await database_sync_to_async(grants_expire)(now=later) == 1
    while (told := await agent.receive_json_from(timeout=5))["type"] != "action_result":
        assert told["type"] == "room_state"  # the pause, if it came after the first answer
    assert (told["body"]["ref"], told["body"]["status"], told["body"]["rule"]) == (
        "big-booking",
        "denied",
        "grant_expired",
    )
    await agent.disconnect()

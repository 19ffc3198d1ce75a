"""An owner who configured a webhook has their allowed actions delivered there (signed,
once), not to the sandbox; a delivery still being retried is reported as pending until it
settles, the agent's socket is told when it does, and asking again never delivers twice."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from gatekeeper.adapters.sandbox import SandboxEffect
from gatekeeper.webhooks import webhook_endpoint_create
from ledger.models import LedgerEvent
from rooms import forks
from tests.gatekeeper.conftest import BOOK
from tests.socket_frames import join, next_frame_of

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _allow_tools(settings: Any) -> None:
    settings.SYNAPSIA = {**settings.SYNAPSIA, "TOOL_POLICY_DEFAULT": "allow_all"}


def book(n: Any) -> Any:
    return forks.action_for_agent(
        room_id=n.room.id,
        agent_id=n.setup.a.agent.id,
        client_id="book-webhook-1",
        tool="book_table",
        arguments=BOOK,
    )


def test_allowed_actions_go_to_the_owners_webhook_once(
    negotiation,
    receiver,
    webhook_settings,
    celery_worker,
) -> None:
    webhook_endpoint_create(owner=negotiation.setup.a.owner, url=receiver.url("/hook"))
    result = book(negotiation)
    deadline = time.monotonic() + 60
    while result.status == "pending":  # with a real worker the first answer is pending
        assert time.monotonic() < deadline, "webhook delivery did not settle"
        time.sleep(0.1)
        result = book(negotiation)  # same idempotency key: reports, never re-delivers
    assert (result.status, result.rule) == ("executed", "cleared")
    deliveries = receiver.seen("/hook")
    assert len(deliveries) == 1
    body = json.loads(deliveries[0].body)
    assert body["tool"] == "book_table"
    assert deliveries[0].headers["X-Synapsia-Signature"].startswith("sha256=")
    assert SandboxEffect.objects.count() == 0
    executed = LedgerEvent.objects.filter(room_id=negotiation.room.id, kind="action_executed")
    assert executed.count() == 1
    assert book(negotiation).replay
    assert len(receiver.seen("/hook")) == 1


def test_a_pending_action_is_recorded_once_its_delivery_settles_though_nobody_asks(
    negotiation, receiver, webhook_settings, celery_worker
) -> None:
    """The record, the ledger and the room's outcome follow the delivery, not the agent: an
    agent that never resends its act (gone, crashed, or told by its socket) still leaves an
    executed action with its event, and the table it booked is the room's agreed plan."""
    from gatekeeper.records import ActionRecord
    from rooms.models import RoomOutcome

    webhook_endpoint_create(owner=negotiation.setup.a.owner, url=receiver.url("/hook"))
    first = book(negotiation)
    assert first.status == ("pending" if celery_worker else "executed")
    deadline = time.monotonic() + 30
    while (record := ActionRecord.objects.get(id=first.action_id)).status == "pending":
        assert time.monotonic() < deadline, "the settled delivery did not settle its action"
        time.sleep(0.1)  # only reading: nobody asks the room again
    assert (record.status, record.rule) == ("executed", "cleared")
    executed = LedgerEvent.objects.filter(room_id=negotiation.room.id, kind="action_executed")
    assert [e.data["action_id"] for e in executed] == [str(first.action_id)]
    (plan,) = RoomOutcome.objects.filter(room_id=negotiation.room.id)
    assert (plan.kind, plan.action_id) == ("agreed", first.action_id)
    recorded = LedgerEvent.objects.filter(room_id=negotiation.room.id, kind="outcome_recorded")
    assert [e.data["action_id"] for e in recorded] == [str(first.action_id)]
    again = book(negotiation)  # the agent's resend now only reports it
    assert (again.status, again.replay) == ("executed", True)
    assert len(receiver.seen("/hook")) == 1
    assert executed.count() == 1 and recorded.count() == 1


async def test_the_agent_hears_its_webhook_action_settle_without_asking_again(
    negotiation, receiver, webhook_settings, celery_worker
) -> None:
    """With a real worker the act is answered "pending" and the socket is told the outcome
    once the delivery settles (the agent sends nothing more); run eagerly, the act's own
    answer is final and nothing is told twice."""
    from channels.db import database_sync_to_async

    await database_sync_to_async(webhook_endpoint_create)(
        owner=negotiation.setup.a.owner, url=receiver.url("/hook")
    )
    agent = await join(negotiation.room.id, negotiation.setup.a.token)
    act = {"tool": "book_table", "arguments": BOOK}
    await agent.send_json_to({"v": 1, "type": "act", "id": "book-hook", "body": act})
    first = await next_frame_of(agent, "action_result", timeout=10)
    assert first["body"]["ref"] == "book-hook"
    if celery_worker:
        assert first["body"]["status"] == "pending"
        told = await next_frame_of(agent, "action_result", timeout=30)
        assert told["body"]["ref"] == "book-hook"
        assert (told["body"]["status"], told["body"]["rule"]) == ("executed", "cleared")
    else:
        assert first["body"]["status"] == "executed"
        assert await agent.receive_nothing(timeout=1)  # no second word of the same action
    assert len(receiver.seen("/hook")) == 1  # delivered once, however it was settled
    executed = LedgerEvent.objects.filter(room_id=negotiation.room.id, kind="action_executed")
    assert await database_sync_to_async(executed.count)() == 1
    await agent.disconnect()


@pytest.fixture
def held_deliveries(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """No worker takes a delivery until the test calls what this returns: the worker's one
    attempt at the only delivery (its final status, the settlement signal with it)."""
    from gatekeeper.adapters.webhook import WebhookAdapter
    from gatekeeper.models import WebhookDelivery
    from gatekeeper.webhooks import webhook_delivery_attempt

    monkeypatch.setattr(WebhookAdapter, "_dispatch", staticmethod(lambda delivery: None))

    def attempt() -> None:
        (delivery,) = WebhookDelivery.objects.all()
        webhook_delivery_attempt(delivery_id=delivery.id, last_attempt=True)

    return attempt


@pytest.mark.parametrize("change", ["switched_off", "replaced"])
def test_a_pending_act_resent_after_its_owner_changes_webhooks_waits_for_its_own_delivery(
    negotiation, receiver, webhook_settings, held_deliveries, change: str
) -> None:
    """The act went to the webhook of its time, and only that delivery's answer settles it:
    a resend while it is still queued is told "pending" again, never run in the sandbox (the
    owner switched the webhook off) nor refused as another webhook's key (the owner
    configured a new one); then the delivery's own outcome settles it."""
    from gatekeeper.records import ActionRecord
    from gatekeeper.webhooks import webhook_endpoint_deactivate

    owner = negotiation.setup.a.owner
    hook = webhook_endpoint_create(owner=owner, url=receiver.url("/hook")).endpoint
    first = book(negotiation)
    assert first.status == "pending"
    if change == "switched_off":
        assert webhook_endpoint_deactivate(owner=owner, endpoint_id=hook.id)
    else:
        webhook_endpoint_create(owner=owner, url=receiver.url("/new-hook"))
    again = book(negotiation)
    assert (again.action_id, again.status, again.replay) == (first.action_id, "pending", True)
    assert SandboxEffect.objects.count() == 0
    executed = LedgerEvent.objects.filter(room_id=negotiation.room.id, kind="action_executed")
    assert executed.count() == 0

    held_deliveries()
    settled = book(negotiation)
    record = ActionRecord.objects.get(id=first.action_id)
    if change == "switched_off":  # switched off before it went out: it never reached anyone
        assert (settled.status, record.outcome["reason_code"]) == (
            "failed",
            "webhook_endpoint_inactive",
        )
        assert receiver.seen("/hook") == []
    else:  # the webhook it was sent to still answers for it
        assert settled.status == "executed"
        assert len(receiver.seen("/hook")) == 1
    assert settled.replay and receiver.seen("/new-hook") == []
    assert SandboxEffect.objects.count() == 0 and executed.count() == 1


def test_a_settlement_the_ledger_cannot_record_pauses_the_room_and_waits(
    negotiation, receiver, webhook_settings, held_deliveries, monkeypatch
) -> None:
    """The webhook answered but its outcome cannot be recorded: nothing is settled (the
    action stays pending, no event, no plan), the room pauses as for an act, and the
    agent's resend settles it once the ledger records again."""
    from gatekeeper import actions
    from gatekeeper.records import ActionRecord
    from ledger.services import LedgerAppendError
    from rooms.models import Room, RoomOutcome, RoomState

    webhook_endpoint_create(owner=negotiation.setup.a.owner, url=receiver.url("/hook"))
    first = book(negotiation)
    assert first.status == "pending"

    def ledger_down(**_: Any) -> None:
        raise LedgerAppendError("ledger append failed: injected")

    with monkeypatch.context() as down:
        down.setattr(actions, "ledger_append", ledger_down)
        held_deliveries()  # delivered: the webhook answered 200
    assert len(receiver.seen("/hook")) == 1
    assert ActionRecord.objects.get(id=first.action_id).status == "pending"
    events = LedgerEvent.objects.filter(room_id=negotiation.room.id)
    assert not events.filter(kind__in=["action_executed", "outcome_recorded"]).exists()
    assert not RoomOutcome.objects.filter(room_id=negotiation.room.id).exists()
    assert Room.objects.get(id=negotiation.room.id).state == RoomState.PAUSED
    assert events.filter(kind="room_paused").last().data["reason_rule"] == "ledger_unavailable"

    again = book(negotiation)  # the ledger records again
    assert (again.status, again.replay) == ("executed", True)
    assert events.filter(kind="action_executed").count() == 1
    assert len(receiver.seen("/hook")) == 1


def test_a_settlement_whose_signal_was_lost_is_made_by_the_beat(
    negotiation, receiver, webhook_settings, held_deliveries
) -> None:
    """The worker stopped after the delivery's final status committed, before its signal:
    the beat's sweep (``rooms.actions_settle``) settles the action from the delivery all
    the same, once, with its event and the room's plan; a delivery not final is left be."""
    from django.conf import settings

    from gatekeeper.records import ActionRecord
    from gatekeeper.signals import webhook_delivery_settled
    from rooms.models import RoomOutcome
    from rooms.tasks import actions_settle

    assert settings.CELERY_BEAT_SCHEDULE["rooms-actions-settle"]["task"] == actions_settle.name
    webhook_endpoint_create(owner=negotiation.setup.a.owner, url=receiver.url("/hook"))
    first = book(negotiation)
    assert first.status == "pending"
    assert actions_settle() == 0  # still queued: nothing to settle yet
    uid = "rooms.webhook_delivery_settled"
    assert webhook_delivery_settled.disconnect(dispatch_uid=uid)  # the signal is lost
    try:
        held_deliveries()
    finally:
        webhook_delivery_settled.connect(forks.action_pending_settled, dispatch_uid=uid)
    assert len(receiver.seen("/hook")) == 1
    assert ActionRecord.objects.get(id=first.action_id).status == "pending"

    assert actions_settle() == 1
    assert ActionRecord.objects.get(id=first.action_id).status == "executed"
    (plan,) = RoomOutcome.objects.filter(room_id=negotiation.room.id)
    assert (plan.kind, plan.action_id) == ("agreed", first.action_id)
    assert actions_settle() == 0  # settled once
    executed = LedgerEvent.objects.filter(room_id=negotiation.room.id, kind="action_executed")
    assert executed.count() == 1 and len(receiver.seen("/hook")) == 1


def test_a_delivery_whose_task_was_lost_is_queued_again_and_its_action_settles(
    negotiation, receiver, webhook_settings, celery_worker, held_deliveries
) -> None:
    """The act's delivery was made but its task never reached a worker (the process stopped
    between the commit and the queueing): ten minutes on, the beat queues it again
    (``gatekeeper.webhook_deliveries_requeue``), it is delivered once and its action
    settles; a delivery queued more recently, or settled, is not queued again."""
    from datetime import timedelta

    from django.conf import settings
    from django.utils import timezone

    from gatekeeper.models import WebhookDelivery
    from gatekeeper.records import ActionRecord
    from gatekeeper.tasks import webhook_deliveries_requeue

    entry = settings.CELERY_BEAT_SCHEDULE["gatekeeper-deliveries-requeue"]
    assert entry["task"] == webhook_deliveries_requeue.name
    webhook_endpoint_create(owner=negotiation.setup.a.owner, url=receiver.url("/hook"))
    first = book(negotiation)  # held: its task is lost
    assert first.status == "pending"
    assert webhook_deliveries_requeue() == 0  # queued a moment ago: not lost yet
    WebhookDelivery.objects.update(queued_at=timezone.now() - timedelta(minutes=9))
    assert webhook_deliveries_requeue() == 0
    WebhookDelivery.objects.update(queued_at=timezone.now() - timedelta(minutes=11))
    assert webhook_deliveries_requeue() == 1
    deadline = time.monotonic() + 30
    while (record := ActionRecord.objects.get(id=first.action_id)).status == "pending":
        assert time.monotonic() < deadline, "the delivery queued again did not settle"
        time.sleep(0.1)
    assert record.status == "executed" and len(receiver.seen("/hook")) == 1
    WebhookDelivery.objects.update(queued_at=timezone.now() - timedelta(minutes=11))
    assert webhook_deliveries_requeue() == 0  # settled: nothing to queue
    executed = LedgerEvent.objects.filter(room_id=negotiation.room.id, kind="action_executed")
    assert executed.count() == 1

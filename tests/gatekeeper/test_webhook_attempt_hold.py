"""One attempt at a webhook delivery at a time: two copies of its task running at once (a
redelivered task, the beat's copy of one that was only slow) post it once, and a hold left by
an attempt that never finished ends by itself. Against a real HTTP receiver on loopback;
in the services pass, two real connections to PostgreSQL race for the hold."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from gatekeeper import webhooks
from gatekeeper.models import DeliveryStatus, WebhookDelivery
from gatekeeper.webhooks import (
    WebhookTransient,
    webhook_delivery_attempt,
    webhook_endpoint_create,
)
from tests.gatekeeper.conftest import Receiver, pending_delivery

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("webhook_settings")]


def _delivery(receiver: Receiver, owner: Any, path: str) -> WebhookDelivery:
    return pending_delivery(webhook_endpoint_create(owner=owner, url=receiver.url(path)).endpoint)


def _attempt_in_thread(delivery_id: uuid.UUID, results: list[str]) -> None:
    try:
        results.append(webhook_delivery_attempt(delivery_id=delivery_id, last_attempt=True))
    finally:
        connection.close()  # the thread's own connection


def test_two_copies_at_once_post_the_delivery_once(
    receiver: Receiver, make_user: Any, settings: Any
) -> None:
    """The receiver takes its time to answer, so both copies are in flight together: before
    the hold, each posted (the receiver saw two POSTs and the attempts were counted once)."""
    settings.SYNAPSIA = {**settings.SYNAPSIA, "WEBHOOK_TIMEOUT_SECONDS": 5}
    receiver.script["/slow"] = [("sleep", 0.6)]
    delivery = _delivery(receiver, make_user("hookie"), "/slow")
    results: list[str] = []
    copies = [
        threading.Thread(target=_attempt_in_thread, args=(delivery.id, results)) for _ in range(2)
    ]
    for copy in copies:
        copy.start()
    for copy in copies:
        copy.join(timeout=30)
    assert len(receiver.seen("/slow")) == 1
    # The copy that found it held posted nothing and said so: pending (then succeeded).
    assert sorted(results) == sorted([DeliveryStatus.SUCCEEDED, DeliveryStatus.PENDING])
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.attempt_until) == (
        DeliveryStatus.SUCCEEDED,
        1,
        None,
    )


def test_a_held_delivery_is_not_posted_until_its_hold_ends(
    receiver: Receiver, make_user: Any
) -> None:
    """A worker that died mid-attempt leaves its hold: nothing is posted while it lasts, and
    the next copy (the beat's, ten minutes on) posts once it has ended."""
    delivery = _delivery(receiver, make_user("hookie"), "/ok")
    WebhookDelivery.objects.filter(id=delivery.id).update(
        attempt_until=timezone.now() + timedelta(minutes=1), attempts=1
    )
    assert webhook_delivery_attempt(delivery_id=delivery.id, last_attempt=False) == (
        DeliveryStatus.PENDING
    )
    assert receiver.seen("/ok") == []
    WebhookDelivery.objects.filter(id=delivery.id).update(
        attempt_until=timezone.now() - timedelta(seconds=1)
    )
    assert webhook_delivery_attempt(delivery_id=delivery.id, last_attempt=False) == (
        DeliveryStatus.SUCCEEDED
    )
    assert len(receiver.seen("/ok")) == 1
    delivery.refresh_from_db()
    assert (delivery.attempts, delivery.attempt_until) == (2, None)


def test_a_worker_whose_clock_runs_ahead_does_not_take_a_hold_in_force(
    receiver: Receiver, make_user: Any, monkeypatch: Any
) -> None:
    """The hold is set and compared on the database's clock: a worker's own clock five
    minutes ahead (past the hold's end by its reckoning) still finds the delivery held.
    Compared on the worker's clock, as before, this copy posted."""
    delivery = _delivery(receiver, make_user("hookie"), "/ok")
    WebhookDelivery.objects.filter(id=delivery.id).update(
        attempt_until=timezone.now() + timedelta(minutes=1), attempts=1
    )
    ahead = timezone.now() + timedelta(minutes=5)
    monkeypatch.setattr(webhooks.timezone, "now", lambda: ahead)
    assert webhook_delivery_attempt(delivery_id=delivery.id, last_attempt=False) == (
        DeliveryStatus.PENDING
    )
    assert receiver.seen("/ok") == []


def test_a_failed_attempt_lets_go_so_its_retry_posts(receiver: Receiver, make_user: Any) -> None:
    """A transient failure ends the attempt's hold: the task's retry (not a second copy) is
    the next attempt, at once if it comes at once."""
    receiver.script["/flaky"] = [503, 200]
    delivery = _delivery(receiver, make_user("hookie"), "/flaky")
    with pytest.raises(WebhookTransient):
        webhook_delivery_attempt(delivery_id=delivery.id, last_attempt=False)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.attempt_until) == (
        DeliveryStatus.PENDING,
        1,
        None,
    )
    assert webhook_delivery_attempt(delivery_id=delivery.id, last_attempt=False) == (
        DeliveryStatus.SUCCEEDED
    )
    assert len(receiver.seen("/flaky")) == 2


def test_a_final_delivery_is_left_alone(receiver: Receiver, make_user: Any) -> None:
    delivery = _delivery(receiver, make_user("hookie"), "/ok")
    assert webhook_delivery_attempt(delivery_id=delivery.id, last_attempt=True) == (
        DeliveryStatus.SUCCEEDED
    )
    assert webhook_delivery_attempt(delivery_id=delivery.id, last_attempt=True) == (
        DeliveryStatus.SUCCEEDED
    )
    assert len(receiver.seen("/ok")) == 1
    delivery.refresh_from_db()
    assert delivery.attempts == 1

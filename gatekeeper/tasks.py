"""Celery tasks of the gatekeeper. They only call services (beat: CELERY_BEAT_SCHEDULE).

``grants_expire`` runs every minute: a grant the owner has not answered by its deadline ends
as a denial (the room stays paused at its fork), so a deadline holds even if nobody looks.

``webhook_deliver`` retries transient failures (5xx, 408/425/429, timeouts, network errors)
with exponential backoff and full jitter (1s, 2s, 4s, 8s caps), at most ``MAX_RETRIES`` times
after the first attempt; the last attempt records a final ``unavailable`` instead of raising.
In the embedded profile tasks run eagerly: Celery re-applies a retried task at once, so the
whole retry sequence runs inside the caller (without the sleeps).

``webhook_deliveries_requeue`` runs every minute: a delivery still pending ten minutes after
its task was queued was lost on its way to a worker, and is queued again.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from celery import shared_task
from celery.exceptions import Retry
from django.db import transaction

from gatekeeper.grants import grants_expire as grants_expire_service
from gatekeeper.webhooks import (
    WebhookTransient,
    webhook_deliveries_lost,
    webhook_delivery_attempt,
)

MAX_RETRIES = 4


@shared_task(
    bind=True,
    name="gatekeeper.webhook_deliver",
    autoretry_for=(WebhookTransient,),
    retry_backoff=1,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=MAX_RETRIES,
)
def webhook_deliver(self: Any, delivery_id: str) -> str:
    """One attempt at a webhook delivery; Celery retries it on ``WebhookTransient``."""
    return webhook_delivery_attempt(
        delivery_id=UUID(delivery_id), last_attempt=self.request.retries >= MAX_RETRIES
    )


def webhook_delivery_queue(delivery_id: UUID) -> None:
    """Hand a delivery to a worker, after the caller's transaction commits (a worker must not
    look for the row before it exists). Run eagerly (the embedded profile): every attempt
    now, in this thread and connection, which see the uncommitted row."""
    if webhook_deliver.app.conf.task_always_eager:
        # One ``apply`` per attempt, through the task's own autoretry wrapper, which raises
        # ``Retry`` while a retry is due and lets the last attempt record the final status.
        # (Celery's own eager re-apply of a retry propagates instead of retrying when
        # task_eager_propagates is on, so the loop is ours; eager retries do not sleep.)
        for attempt in range(MAX_RETRIES + 1):
            try:
                webhook_deliver.apply(args=[str(delivery_id)], retries=attempt, throw=True)
            except Retry:
                continue
            return
    else:
        transaction.on_commit(lambda: webhook_deliver.delay(str(delivery_id)), robust=True)


@shared_task(name="gatekeeper.webhook_deliveries_requeue")
def webhook_deliveries_requeue() -> int:
    """Deliveries lost on their way to a worker, queued again (``webhook_deliveries_lost``);
    returns how many."""
    lost = webhook_deliveries_lost()
    for delivery_id in lost:
        webhook_delivery_queue(delivery_id)
    return len(lost)


@shared_task(name="gatekeeper.grants_expire")
def grants_expire() -> int:
    """End every pending grant past its deadline as a denial; returns how many ended."""
    return grants_expire_service()

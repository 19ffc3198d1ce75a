"""Celery tasks of the gatekeeper. They only call services (beat: CELERY_BEAT_SCHEDULE).

``grants_expire`` runs every minute: a grant the owner has not answered by its deadline ends
as a denial (the room stays paused at its fork), so a deadline holds even if nobody looks.

``webhook_deliver`` retries transient failures (5xx, 408/425/429, timeouts, network errors)
with exponential backoff and full jitter (1s, 2s, 4s, 8s caps), at most ``MAX_RETRIES`` times
after the first attempt; the last attempt records a final ``unavailable`` instead of raising.
In the embedded profile tasks run eagerly: Celery re-applies a retried task at once, so the
whole retry sequence runs inside the caller (without the sleeps).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from celery import shared_task

from gatekeeper.grants import grants_expire as grants_expire_service
from gatekeeper.webhooks import WebhookTransient, webhook_delivery_attempt

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


@shared_task(name="gatekeeper.grants_expire")
def grants_expire() -> int:
    """End every pending grant past its deadline as a denial; returns how many ended."""
    return grants_expire_service()

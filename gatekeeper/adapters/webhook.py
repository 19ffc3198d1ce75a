"""The adapter that leaves the process: deliver a tool call to the owner's webhook.

A call becomes one ``WebhookDelivery`` (unique per idempotency key) whose signed body never
changes; ``gatekeeper.tasks.webhook_deliver`` posts it with retries. When tasks run eagerly
(embedded profile) the outcome is final when ``execute`` returns. With a worker, ``execute``
returns ``Unavailable("delivery_pending")`` at first; asking again with the same key returns
the final outcome once the worker is done, and never posts a second time.
"""

from __future__ import annotations

import uuid
from uuid import UUID

from django.utils import timezone

from gatekeeper.adapters.calls import PreparedAdapter, PreparedCall, call_replay
from gatekeeper.adapters.outcomes import (
    AdapterOutcome,
    ExecutionContext,
    Succeeded,
    outcome_refused,
    outcome_unavailable,
)
from gatekeeper.models import DeliveryStatus, WebhookDelivery, WebhookEndpoint
from gatekeeper.webhooks import webhook_body, webhook_delivery_create

PENDING_REASON = "delivery_pending"


def webhook_delivery_outcome(*, delivery: WebhookDelivery) -> AdapterOutcome:
    """The outcome a delivery row stands for right now."""
    if delivery.status == DeliveryStatus.SUCCEEDED:
        return Succeeded(
            output={
                "delivery_id": str(delivery.id),
                "status_code": delivery.last_status_code,
                "attempts": delivery.attempts,
            }
        )
    if delivery.status == DeliveryStatus.REFUSED:
        return outcome_refused(delivery.reason_code, delivery.message)
    if delivery.status == DeliveryStatus.UNAVAILABLE:
        return outcome_unavailable(delivery.reason_code, delivery.message)
    return outcome_unavailable(
        PENDING_REASON,
        "Delivery is queued or being retried; ask again with the same idempotency key.",
    )


class WebhookAdapter(PreparedAdapter):
    """Posts tool calls to one owner-configured ``WebhookEndpoint``."""

    name = "webhook"

    def __init__(self, *, endpoint_id: UUID) -> None:
        self.endpoint_id = endpoint_id

    def _run(self, prepared: PreparedCall, context: ExecutionContext) -> AdapterOutcome:
        spec = prepared.spec
        endpoint = WebhookEndpoint.objects.filter(id=self.endpoint_id).first()
        # The same answer for "missing" and "someone else's": no probing of other owners.
        if endpoint is None or endpoint.owner_id != context.owner_id:
            return outcome_refused("webhook_endpoint_unknown", "No such webhook for this owner.")
        existing = WebhookDelivery.objects.filter(idempotency_key=prepared.idempotency_key).first()
        if existing is None:
            if not endpoint.active:
                return outcome_refused("webhook_endpoint_inactive", "The webhook is switched off.")
            delivery_id = uuid.uuid4()
            body = webhook_body(
                delivery_id=str(delivery_id),
                idempotency_key=prepared.idempotency_key,
                tool=spec.name,
                schema_version=spec.schema_version,
                arguments=prepared.arguments,
                room_id=str(context.room_id),
                agent_id=str(context.agent_id),
                created_at=timezone.now().isoformat(),
            )
            existing, created = webhook_delivery_create(
                delivery_id=delivery_id,
                endpoint=endpoint,
                idempotency_key=prepared.idempotency_key,
                tool=spec.name,
                arguments_sha256=prepared.arguments_sha256,
                body=body,
            )
            if created:
                self._dispatch(existing)
                existing.refresh_from_db()
        if existing.endpoint_id != endpoint.id:
            return outcome_refused(
                "idempotency_key_reused", "This idempotency key was used with another webhook."
            )
        return call_replay(
            prepared=prepared,
            stored_tool=existing.tool,
            stored_sha256=existing.arguments_sha256,
            stored=webhook_delivery_outcome(delivery=existing),
        )

    @staticmethod
    def _dispatch(delivery: WebhookDelivery) -> None:
        # Imported here: tasks import webhooks, which the app registry loads first.
        from gatekeeper.tasks import webhook_delivery_queue

        webhook_delivery_queue(delivery.id)

"""REST API for an owner's outgoing webhooks (session auth, CSRF).

Thin: create and deactivate call the services in ``gatekeeper.webhooks``. The signing secret
is in the create response only; listings never carry it. ``GatekeeperError``s (a refused URL,
an endpoint that is not yours) become ``{"code": ..., "message": ...}`` with the error's HTTP
status (handler in ``synapsia/api.py``) and change nothing.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from django.contrib.auth.models import User
from django.http import HttpRequest
from ninja import Header, Router, Schema, Status
from ninja.security import django_auth

from gatekeeper.errors import GatekeeperError
from gatekeeper.models import WebhookEndpoint
from gatekeeper.webhooks import webhook_endpoint_create, webhook_endpoint_deactivate

router = Router(auth=django_auth, tags=["webhooks"])


class WebhookNotFound(GatekeeperError):
    """No such endpoint, or not yours: the two are not told apart."""

    code = "not_found"
    status = 404


def _owner(request: HttpRequest) -> User:
    # django_auth has already refused anonymous requests.
    assert isinstance(request.user, User)
    return request.user


def _endpoints_of(owner: User) -> list[WebhookEndpoint]:
    """The owner's endpoints, oldest first (a read of the owner's own rows only)."""
    return list(WebhookEndpoint.objects.filter(owner=owner).order_by("created_at"))


# --- schemas ---------------------------------------------------------------------------------


class WebhookIn(Schema):
    url: str


class WebhookOut(Schema):
    id: UUID
    url: str
    active: bool
    created_at: datetime


class IssuedWebhookOut(Schema):
    endpoint: WebhookOut
    # Shown once: we keep it sealed to sign deliveries, and never return it again.
    secret: str


def _out(endpoint: WebhookEndpoint) -> WebhookOut:
    return WebhookOut(
        id=endpoint.id, url=endpoint.url, active=endpoint.active, created_at=endpoint.created_at
    )


# --- endpoints -------------------------------------------------------------------------------


@router.post("/webhooks", response={201: IssuedWebhookOut})
def webhooks_create(
    request: HttpRequest,
    payload: WebhookIn,
    idempotency_key: str = Header(
        "",
        alias="Idempotency-Key",
        description="Optional, 16 to 64 of A-Z a-z 0-9 - _: a retry of this add with the same "
        "key and address adds nothing more and is answered 409 webhook_already_added (the "
        "secret was in the first answer only).",
    ),
) -> Status[IssuedWebhookOut]:
    """Configure an outgoing webhook; the response holds its signing secret, once."""
    issued = webhook_endpoint_create(
        owner=_owner(request), url=payload.url, add_key=idempotency_key
    )
    return Status(201, IssuedWebhookOut(endpoint=_out(issued.endpoint), secret=issued.secret))


@router.get("/webhooks", response=list[WebhookOut])
def webhooks_list(request: HttpRequest) -> list[WebhookOut]:
    """The signed-in owner's webhooks, without secrets."""
    return [_out(e) for e in _endpoints_of(_owner(request))]


@router.post("/webhooks/{endpoint_id}/deactivate", response=WebhookOut)
def webhooks_deactivate(request: HttpRequest, endpoint_id: UUID) -> WebhookOut:
    """Stop delivering to an endpoint (deliveries still pending then end refused)."""
    owner = _owner(request)
    if not webhook_endpoint_deactivate(owner=owner, endpoint_id=endpoint_id):
        raise WebhookNotFound("No such webhook.")
    return _out(WebhookEndpoint.objects.get(id=endpoint_id, owner=owner))

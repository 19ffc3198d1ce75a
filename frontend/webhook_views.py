"""The owner's outgoing webhooks page (``/settings/webhooks/``): which webhooks they have, which
one their agent's actions go to, adding one (its signing secret shown once) and switching one
off. Rules live in ``gatekeeper.webhooks`` (what address is allowed) and
``gatekeeper.actions.adapter_for`` (which webhook is used); this module only shows them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit
from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.db.models import Count, IntegerField, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_http_methods

from frontend.forms import WebhookForm
from gatekeeper.actions import adapter_for
from gatekeeper.adapters.webhook import WebhookAdapter
from gatekeeper.errors import WebhookAlreadyAdded, WebhookConfigInvalid
from gatekeeper.models import DeliveryStatus, WebhookDelivery, WebhookEndpoint
from gatekeeper.owner_limits import OwnerLimitReached
from gatekeeper.webhooks import (
    IssuedWebhookEndpoint,
    webhook_endpoint_create,
    webhook_endpoint_deactivate,
)
from synapsia.owners import OwnerRequest

# Why a delivery ended without reaching the owner's system, said for a person; keys are the
# reason codes ``gatekeeper.webhooks`` records. An unknown code falls back to the status.
_REFUSED_WORDS: dict[str, str] = {
    "webhook_endpoint_inactive": "not sent: the webhook had been switched off",
    "webhook_secret_unreadable": "not sent: its signing secret can no longer be read "
    "(add the webhook again to get a new one)",
    "webhook_address_forbidden": "not sent: its address leads to a private or local network",
    "webhook_config_invalid": "not sent: its address is no longer accepted",
    "webhook_tls_invalid": "not sent: its security certificate could not be verified",
    "webhook_redirect": "not delivered: your system answered with a redirect, "
    "which Synapsia does not follow",
}


@dataclass(frozen=True)
class WebhookRow:
    """One of the owner's webhooks as the page shows it."""

    endpoint_id: UUID
    url: str
    active: bool
    in_use: bool
    created_at: datetime
    deliveries: int
    last_result: str  # the newest delivery's outcome in words; "" when there was none
    last_at: datetime | None


def _result_words(status: str | None, code: int | None, reason: str | None) -> str:
    """The newest delivery's outcome, for a person."""
    if status is None:
        return ""
    if status == DeliveryStatus.SUCCEEDED:
        return "delivered: your system accepted it"
    if status == DeliveryStatus.PENDING:
        return "still being sent: Synapsia is trying again"
    if status == DeliveryStatus.REFUSED:
        if reason in _REFUSED_WORDS:
            return _REFUSED_WORDS[reason]
        if code is not None:
            return f"not delivered: your system refused it (it answered {code})"
        return "not delivered: it was refused"
    if code is not None and code >= 500:
        return f"not delivered: your system kept failing after several tries (it answered {code})"
    return "not delivered: your system could not be reached after several tries"


def _rows(owner: User) -> list[WebhookRow]:
    """The owner's webhooks, newest first, with their deliveries counted and the newest one's
    outcome, in one query; ``in_use`` is the one ``adapter_for`` picks (its own query)."""
    deliveries = WebhookDelivery.objects.filter(endpoint=OuterRef("pk"))
    newest = deliveries.order_by("-created_at")
    counted = deliveries.order_by().values("endpoint").annotate(n=Count("pk")).values("n")
    endpoints = (
        WebhookEndpoint.objects.filter(owner=owner)
        .order_by("-created_at")
        .annotate(
            delivery_count=Coalesce(Subquery(counted), Value(0), output_field=IntegerField()),
            last_status=Subquery(newest.values("status")[:1]),
            last_code=Subquery(newest.values("last_status_code")[:1]),
            last_reason=Subquery(newest.values("reason_code")[:1]),
            last_at=Subquery(newest.values("created_at")[:1]),
        )
        .values(
            "id",
            "url",
            "active",
            "created_at",
            "delivery_count",
            "last_status",
            "last_code",
            "last_reason",
            "last_at",
        )
    )
    adapter = adapter_for(owner_id=owner.pk)
    in_use = adapter.endpoint_id if isinstance(adapter, WebhookAdapter) else None
    return [
        WebhookRow(
            endpoint_id=row["id"],
            url=row["url"],
            active=row["active"],
            in_use=row["id"] == in_use,
            created_at=row["created_at"],
            deliveries=row["delivery_count"],
            last_result=_result_words(row["last_status"], row["last_code"], row["last_reason"]),
            last_at=row["last_at"],
        )
        for row in endpoints
    ]


def _page(
    request: OwnerRequest,
    form: WebhookForm,
    *,
    issued: IssuedWebhookEndpoint | None = None,
    repeated: str = "",
    status: int = 200,
) -> HttpResponse:
    rows = _rows(request.user)
    response = render(
        request,
        "frontend/webhooks.html",
        {
            "webhooks": rows,
            "in_use": next((row for row in rows if row.in_use), None),
            "form": form,
            "issued": issued,
            "repeated": repeated,
            "owner_place": "settings",  # the header marks Settings: this page belongs to it
        },
        status=status,
    )
    # The page may hold a signing secret (the answer to an add): never kept by a cache.
    add_never_cache_headers(response)
    return response


def _switch_off(request: OwnerRequest, raw_id: str) -> HttpResponse:
    try:
        endpoint_id = UUID(raw_id)
    except ValueError:
        raise Http404("No such webhook.") from None
    # Another owner's webhook and an unknown one answer the same: nothing to probe.
    if not webhook_endpoint_deactivate(owner=request.user, endpoint_id=endpoint_id):
        raise Http404("No such webhook.")
    url = WebhookEndpoint.objects.get(id=endpoint_id, owner=request.user).url
    adapter = adapter_for(owner_id=request.user.pk)
    if isinstance(adapter, WebhookAdapter):
        now = "Your agent's actions go to the newest webhook that is still on."
    else:
        now = (
            "No webhook is on now: your agent's actions are only practised, nothing real is booked."
        )
    host = urlsplit(url).hostname or "it"
    messages.success(
        request, f"The webhook to {host} is switched off: nothing more is sent to it. {now}"
    )
    return redirect("webhooks")


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def webhooks_page(request: OwnerRequest) -> HttpResponse:
    """GET lists the owner's webhooks. POST either switches one off (``switch_off`` names it;
    then back here with a message) or adds one: the answer shows its signing secret, once,
    and is not cached; a refused address is named on the field and nothing is saved."""
    if request.method != "POST":
        return _page(request, WebhookForm.empty())
    if "switch_off" in request.POST:
        return _switch_off(request, request.POST["switch_off"])
    form = WebhookForm(request.POST)
    if form.is_valid():
        try:
            issued = webhook_endpoint_create(
                owner=request.user,
                url=form.cleaned_data["url"],
                add_key=form.cleaned_data["form_key"],
            )
        except WebhookAlreadyAdded as repeat:
            # A reload of the answer that showed the secret: said so, nothing more added.
            return _page(request, WebhookForm.empty(), repeated=repeat.url)
        except WebhookConfigInvalid as exc:
            form.add_error("url", exc.message)
        except OwnerLimitReached as exc:
            form.add_error(None, exc.message)  # not the address's fault: said for the form
        else:
            # Rendered in this answer, never kept (not in the session, not in a message).
            return _page(request, WebhookForm.empty(), issued=issued)
    return _page(request, form, status=422)

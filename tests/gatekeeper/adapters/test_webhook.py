"""The webhook adapter against a real HTTP server on a loopback port: signed bodies, retries
with backoff through Celery, timeouts and refusals as data, URLs checked when configured."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest

from gatekeeper.adapters import Refused, Succeeded, Unavailable, WebhookAdapter
from gatekeeper.errors import WebhookConfigInvalid
from gatekeeper.models import WebhookDelivery
from gatekeeper.tasks import MAX_RETRIES
from gatekeeper.tools import tool_get
from gatekeeper.webhooks import (
    webhook_endpoint_create,
    webhook_endpoint_deactivate,
    webhook_signature_verify,
    webhook_url_check,
)
from tests.gatekeeper.conftest import Receiver, idempotency_key, settle

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("webhook_settings", "celery_worker"),
]

INVITE = {"recipient": "peer", "event_start": "2026-07-01T19:30:00+02:00", "venue_id": "chez-marie"}


def _send(receiver: Receiver, owner: Any, context: Any, path: str, **kw: Any) -> tuple[Any, str]:
    issued = webhook_endpoint_create(owner=owner, url=receiver.url(path))
    key = idempotency_key()
    adapter = WebhookAdapter(endpoint_id=issued.endpoint.id)
    outcome = settle(
        lambda: adapter.execute(
            spec=tool_get("send_invitation"),
            arguments=kw.get("arguments", INVITE),
            idempotency_key=key,
            context=context,
        )
    )
    return outcome, key


@pytest.fixture
def owner(make_user: Any) -> Any:
    return make_user("hookie")


def test_the_body_is_signed_with_the_secret_shown_once(
    receiver: Receiver, owner: Any, context_for: Any
) -> None:
    issued = webhook_endpoint_create(owner=owner, url=receiver.url("/ok"))
    assert issued.secret.startswith("whsec_")
    assert issued.secret not in issued.endpoint.secret_sealed  # kept encrypted, not readable
    context = context_for(owner)
    key = idempotency_key()
    outcome = settle(
        lambda: WebhookAdapter(endpoint_id=issued.endpoint.id).execute(
            spec=tool_get("send_invitation"),
            arguments=INVITE,
            idempotency_key=key,
            context=context,
        )
    )
    assert isinstance(outcome, Succeeded) and outcome.output["status_code"] == 200
    [hit] = receiver.seen("/ok")
    # What a receiver does: HMAC-SHA256 of the raw body with the secret, constant-time compare.
    expected = "sha256=" + hmac.new(issued.secret.encode(), hit.body, hashlib.sha256).hexdigest()
    assert hit.headers["X-Synapsia-Signature"] == expected
    assert webhook_signature_verify(
        secret=issued.secret.encode(), body=hit.body, header=hit.headers["X-Synapsia-Signature"]
    )
    assert not webhook_signature_verify(
        secret=issued.secret.encode(), body=hit.body + b" ", header=expected
    )
    assert hit.headers["X-Synapsia-Idempotency-Key"] == key
    payload = json.loads(hit.body)
    assert payload["tool"] == "send_invitation" and payload["arguments"]["recipient"] == "peer"
    assert payload["idempotency_key"] == key
    assert payload["room_id"] == str(context.room_id)
    assert payload["schema_version"] == tool_get("send_invitation").schema_version


def test_5xx_is_retried_with_the_same_signed_body_then_succeeds(
    receiver: Receiver, owner: Any, context_for: Any
) -> None:
    receiver.script["/flaky"] = [500, 503, 200]
    outcome, key = _send(receiver, owner, context_for(owner), "/flaky")
    assert isinstance(outcome, Succeeded), outcome
    hits = receiver.seen("/flaky")
    assert len(hits) == 3
    assert len({h.body for h in hits}) == 1
    assert {h.headers["X-Synapsia-Idempotency-Key"] for h in hits} == {key}
    assert WebhookDelivery.objects.get(idempotency_key=key).attempts == 3


def test_429_is_retried(receiver: Receiver, owner: Any, context_for: Any) -> None:
    receiver.script["/busy"] = [429, 200]
    outcome, _ = _send(receiver, owner, context_for(owner), "/busy")
    assert isinstance(outcome, Succeeded)
    assert len(receiver.seen("/busy")) == 2


def test_a_receiver_that_never_recovers_ends_unavailable_after_bounded_retries(
    receiver: Receiver, owner: Any, context_for: Any
) -> None:
    receiver.script["/down"] = [500]
    outcome, _ = _send(receiver, owner, context_for(owner), "/down")
    assert isinstance(outcome, Unavailable) and outcome.reason_code == "webhook_http_status"
    assert len(receiver.seen("/down")) == MAX_RETRIES + 1


def test_a_timeout_is_unavailable_data(receiver: Receiver, owner: Any, context_for: Any) -> None:
    receiver.script["/slow"] = [("sleep", 2.0)]
    outcome, key = _send(receiver, owner, context_for(owner), "/slow")
    assert isinstance(outcome, Unavailable) and outcome.reason_code == "webhook_timeout"
    assert WebhookDelivery.objects.get(idempotency_key=key).attempts == MAX_RETRIES + 1


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_4xx_is_refused_data_and_not_retried(
    receiver: Receiver, owner: Any, context_for: Any, status: int
) -> None:
    receiver.script["/no"] = [status]
    outcome, _ = _send(receiver, owner, context_for(owner), "/no")
    assert isinstance(outcome, Refused) and outcome.reason_code == "webhook_rejected"
    assert str(status) in outcome.message
    assert len(receiver.seen("/no")) == 1


def test_a_redirect_is_refused_and_not_followed(
    receiver: Receiver, owner: Any, context_for: Any
) -> None:
    receiver.script["/moved"] = [302]
    outcome, _ = _send(receiver, owner, context_for(owner), "/moved")
    assert isinstance(outcome, Refused) and outcome.reason_code == "webhook_redirect"
    assert receiver.seen("/ok") == []


def test_a_replay_does_not_post_again(receiver: Receiver, owner: Any, context_for: Any) -> None:
    issued = webhook_endpoint_create(owner=owner, url=receiver.url("/ok"))
    adapter, key, context = (
        WebhookAdapter(endpoint_id=issued.endpoint.id),
        idempotency_key(),
        context_for(owner),
    )

    def call() -> Any:
        return adapter.execute(
            spec=tool_get("send_invitation"),
            arguments=INVITE,
            idempotency_key=key,
            context=context,
        )

    first, second = settle(call), settle(call)
    assert isinstance(first, Succeeded) and first == second
    assert len(receiver.seen("/ok")) == 1


def test_someone_elses_or_a_switched_off_webhook_is_refused(
    receiver: Receiver, owner: Any, make_user: Any, context_for: Any
) -> None:
    issued = webhook_endpoint_create(owner=owner, url=receiver.url("/ok"))
    mallory = context_for(make_user("mallory"))
    outcome = WebhookAdapter(endpoint_id=issued.endpoint.id).execute(
        spec=tool_get("send_invitation"),
        arguments=INVITE,
        idempotency_key=idempotency_key(),
        context=mallory,
    )
    assert isinstance(outcome, Refused) and outcome.reason_code == "webhook_endpoint_unknown"
    assert webhook_endpoint_deactivate(owner=owner, endpoint_id=issued.endpoint.id)
    outcome = WebhookAdapter(endpoint_id=issued.endpoint.id).execute(
        spec=tool_get("send_invitation"),
        arguments=INVITE,
        idempotency_key=idempotency_key(),
        context=context_for(owner),
    )
    assert isinstance(outcome, Refused) and outcome.reason_code == "webhook_endpoint_inactive"
    assert receiver.received == []


def test_a_rotated_secret_key_makes_the_secret_unreadable_and_nothing_is_sent(
    receiver: Receiver, owner: Any, context_for: Any, settings: Any
) -> None:
    issued = webhook_endpoint_create(owner=owner, url=receiver.url("/ok"))
    settings.SECRET_KEY = "a-different-secret-key-" + "x" * 40
    key, context = idempotency_key(), context_for(owner)
    outcome = settle(
        lambda: WebhookAdapter(endpoint_id=issued.endpoint.id).execute(
            spec=tool_get("send_invitation"),
            arguments=INVITE,
            idempotency_key=key,
            context=context,
        )
    )
    assert isinstance(outcome, Refused) and outcome.reason_code == "webhook_secret_unreadable"
    assert receiver.received == []


def test_a_host_no_longer_listed_as_insecure_is_refused_at_delivery(
    receiver: Receiver, owner: Any, context_for: Any, settings: Any
) -> None:
    issued = webhook_endpoint_create(owner=owner, url=receiver.url("/ok"))
    settings.SYNAPSIA = {**settings.SYNAPSIA, "WEBHOOK_INSECURE_HOSTS": []}
    key, context = idempotency_key(), context_for(owner)
    outcome = settle(
        lambda: WebhookAdapter(endpoint_id=issued.endpoint.id).execute(
            spec=tool_get("send_invitation"),
            arguments=INVITE,
            idempotency_key=key,
            context=context,
        )
    )
    assert isinstance(outcome, Refused) and outcome.reason_code == "webhook_config_invalid"
    assert receiver.received == []


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/hook",  # plain http to a host not listed
        "ftp://example.com/hook",
        "https://user:pw@example.com/hook",
        "https://example.com/hook#frag",
        "https://10.0.0.7/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://[::1]/hook",
        "https://localhost/hook",
        "https://db.localhost/hook",
        "https:///nohost",
        "not a url",
        "https://exämple.com/hook",
        "https://example.com:99999/hook",
        "",
    ],
)
def test_bad_urls_are_refused_when_configured(owner: Any, url: str) -> None:
    with pytest.raises(WebhookConfigInvalid):
        webhook_endpoint_create(owner=owner, url=url)
    assert not owner.webhook_endpoints.exists()


def test_https_urls_to_public_hosts_are_accepted(settings: Any) -> None:
    settings.SYNAPSIA = {**settings.SYNAPSIA, "WEBHOOK_INSECURE_HOSTS": []}
    assert webhook_url_check(url="https://hooks.example.com/synapsia?x=1")
    with pytest.raises(WebhookConfigInvalid, match="https"):
        webhook_url_check(url="http://127.0.0.1:8000/hook")


def test_the_insecure_host_default_per_profile(settings: Any) -> None:
    # Conftest overrides for other tests; the module default is what matters here.
    from synapsia import settings as module

    expected = [] if module.PROFILE == "production" else ["127.0.0.1", "localhost"]
    assert module.SYNAPSIA["WEBHOOK_INSECURE_HOSTS"] == expected

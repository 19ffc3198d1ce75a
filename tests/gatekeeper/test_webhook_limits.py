"""How many webhooks an owner may have on (``WEBHOOKS_ON_PER_OWNER``), and the add form sent
twice adding one: both hold when two adds race, each on its own connection (in the services
pass, two real connections to PostgreSQL; on SQLite its IMMEDIATE transactions). The time
between the count and the insert is widened (the secret's sealing waits), so without the
owner's lock both adds would count the same and both be saved."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from gatekeeper import webhooks
from gatekeeper.errors import WebhookAlreadyAdded, WebhookLimitReached
from gatekeeper.models import WebhookEndpoint
from gatekeeper.webhooks import webhook_endpoint_create

pytestmark = pytest.mark.django_db(transaction=True)


def _race(owner: Any, adds: list[dict[str, str]], monkeypatch: Any) -> list[str]:
    """Each add in a thread of its own, started together; what each ended with."""
    sealing = webhooks.webhook_secret_seal

    def slow_seal(**kwargs: Any) -> str:
        time.sleep(0.3)  # after the count, before the insert
        return sealing(**kwargs)

    monkeypatch.setattr(webhooks, "webhook_secret_seal", slow_seal)
    start = threading.Barrier(len(adds))
    ended: list[str] = []

    def add(kwargs: dict[str, str]) -> None:
        try:
            start.wait()
            webhook_endpoint_create(owner=owner, **kwargs)
            ended.append("added")
        except (WebhookLimitReached, WebhookAlreadyAdded) as refused:
            ended.append(refused.code)
        finally:
            connection.close()  # the thread's own connection

    threads = [threading.Thread(target=add, args=(kwargs,)) for kwargs in adds]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return sorted(ended)


def test_two_adds_at_once_stay_within_the_limit(
    make_user: Any, settings: Any, monkeypatch: Any
) -> None:
    settings.SYNAPSIA = {**settings.SYNAPSIA, "WEBHOOKS_ON_PER_OWNER": 2}
    owner = make_user("hookie")
    webhook_endpoint_create(owner=owner, url="https://one.example.com/h")
    ended = _race(
        owner,
        [{"url": "https://two.example.com/h"}, {"url": "https://three.example.com/h"}],
        monkeypatch,
    )
    assert ended == ["added", "webhook_limit_reached"]
    assert WebhookEndpoint.objects.filter(owner=owner, active=True).count() == 2


def test_the_same_form_sent_twice_at_once_adds_one(make_user: Any, monkeypatch: Any) -> None:
    owner = make_user("hookie")
    form = {"url": "https://hooks.example.com/h", "form_key": "a-key-from-the-page"}
    assert _race(owner, [form, form], monkeypatch) == ["added", "webhook_already_added"]
    assert WebhookEndpoint.objects.filter(owner=owner).count() == 1


def test_switched_off_webhooks_do_not_count(make_user: Any, settings: Any) -> None:
    settings.SYNAPSIA = {**settings.SYNAPSIA, "WEBHOOKS_ON_PER_OWNER": 1}
    owner, other = make_user("hookie"), make_user("other")
    first = webhook_endpoint_create(owner=owner, url="https://one.example.com/h").endpoint
    with pytest.raises(WebhookLimitReached, match="You have 1 webhook on,"):
        webhook_endpoint_create(owner=owner, url="https://two.example.com/h")
    webhook_endpoint_create(owner=other, url="https://two.example.com/h")  # theirs: their own
    webhooks.webhook_endpoint_deactivate(owner=owner, endpoint_id=first.id)
    webhook_endpoint_create(owner=owner, url="https://two.example.com/h")
    assert WebhookEndpoint.objects.filter(owner=owner).count() == 2


def test_the_api_says_the_limit_in_words(make_user: Any, settings: Any) -> None:
    settings.SYNAPSIA = {**settings.SYNAPSIA, "WEBHOOKS_ON_PER_OWNER": 1}
    owner = make_user("hookie")
    client = Client()
    client.force_login(owner)
    body = {"url": "https://one.example.com/h"}
    assert client.post("/api/webhooks", body, content_type="application/json").status_code == 201
    refused = client.post(
        "/api/webhooks", {"url": "https://two.example.com/h"}, content_type="application/json"
    )
    assert refused.status_code == 409
    assert refused.json() == {
        "code": "webhook_limit_reached",
        "message": "You have 1 webhook on, the most one owner may have. Switch one off before "
        "adding another.",
    }
    assert WebhookEndpoint.objects.filter(owner=owner).count() == 1

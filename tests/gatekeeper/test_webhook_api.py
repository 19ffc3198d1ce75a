"""Owners configure outgoing webhooks over the REST API: create (the secret once), list (never
a secret), deactivate; unsafe URLs are refused; nobody sees or switches off another's."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from gatekeeper.models import WebhookEndpoint
from gatekeeper.webhooks import webhook_secret_open

pytestmark = pytest.mark.django_db

HOOK = "https://hooks.example.com/synapsia"


@pytest.fixture(autouse=True)
def _production_url_rules(settings: Any) -> None:
    # No insecure hosts, as in production: the embedded default lists loopback.
    settings.SYNAPSIA = {**settings.SYNAPSIA, "WEBHOOK_INSECURE_HOSTS": []}


def _client(owner: Any) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def _create(client: Client, url: str = HOOK) -> Any:
    return client.post("/api/webhooks", {"url": url}, content_type="application/json")


def test_create_shows_the_secret_once_and_lists_never_do(make_user) -> None:
    alice = make_user("alice")
    client = _client(alice)
    created = _create(client)
    assert created.status_code == 201, created.content
    body = created.json()
    secret = body["secret"]
    assert secret.startswith("whsec_") and len(secret) > 40
    assert body["endpoint"]["url"] == HOOK and body["endpoint"]["active"] is True
    # The secret we showed is the one deliveries will be signed with, and is stored sealed.
    endpoint = WebhookEndpoint.objects.get(id=body["endpoint"]["id"], owner=alice)
    assert webhook_secret_open(endpoint=endpoint) == secret.encode()
    assert secret not in endpoint.secret_sealed

    listed = client.get("/api/webhooks")
    assert listed.status_code == 200
    assert listed.json() == [body["endpoint"]]
    assert secret not in listed.content.decode()
    assert "secret" not in listed.content.decode()
    # A second endpoint gets its own secret.
    assert _create(client, HOOK + "/2").json()["secret"] != secret


@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.example.com/synapsia",  # not https
        "ftp://hooks.example.com/synapsia",
        "https://127.0.0.1/hook",  # loopback
        "https://10.1.2.3/hook",  # private
        "https://169.254.169.254/latest/meta-data",  # link-local (cloud metadata)
        "https://[::1]/hook",
        "https://localhost/hook",
        "https://api.localhost/hook",
        "https://user:pw@hooks.example.com/hook",  # credentials in the URL
        "https://hooks.example.com/hook#fragment",
        "https://hooks.example.com:0/hook",
        "https://",
        "",
        "https://hooks.example.com/a b",
    ],
)
def test_unsafe_or_malformed_urls_are_refused_and_nothing_is_stored(make_user, url: str) -> None:
    client = _client(make_user("alice"))
    refused = _create(client, url)
    assert refused.status_code == 422, refused.content
    assert refused.json()["code"] == "webhook_config_invalid"
    assert refused.json()["message"]
    assert WebhookEndpoint.objects.count() == 0
    assert client.get("/api/webhooks").json() == []


def test_deactivate_and_another_owner_cannot_see_or_deactivate(make_user) -> None:
    alice, mallory = _client(make_user("alice")), _client(make_user("mallory"))
    endpoint = _create(alice).json()["endpoint"]
    # Mallory sees none of Alice's endpoints and cannot switch hers off.
    assert mallory.get("/api/webhooks").json() == []
    refused = mallory.post(f"/api/webhooks/{endpoint['id']}/deactivate")
    assert refused.status_code == 404
    assert refused.json()["code"] == "not_found"
    assert WebhookEndpoint.objects.get(id=endpoint["id"]).active is True
    # Unknown ids look the same as someone else's.
    unknown = alice.post("/api/webhooks/00000000-0000-4000-8000-000000000000/deactivate")
    assert (unknown.status_code, unknown.json()["code"]) == (404, "not_found")

    done = alice.post(f"/api/webhooks/{endpoint['id']}/deactivate")
    assert done.status_code == 200
    assert done.json() == {**endpoint, "active": False}
    assert alice.get("/api/webhooks").json() == [{**endpoint, "active": False}]
    assert WebhookEndpoint.objects.get(id=endpoint["id"]).active is False


def test_signed_out_requests_are_refused() -> None:
    client = Client()
    assert client.get("/api/webhooks").status_code == 401
    assert _create(client).status_code == 401
    assert WebhookEndpoint.objects.count() == 0


def test_the_openapi_document_lists_the_webhook_endpoints(make_user) -> None:
    document = _client(make_user("alice")).get("/api/openapi.json").json()
    assert {"/api/webhooks", "/api/webhooks/{endpoint_id}/deactivate"} <= set(document["paths"])
    created = document["paths"]["/api/webhooks"]["post"]["responses"]["201"]
    assert "IssuedWebhookOut" in str(created)


def test_a_retry_with_its_idempotency_key_adds_nothing_more(make_user) -> None:
    alice = make_user("alice")
    client = _client(alice)
    key = {"HTTP_IDEMPOTENCY_KEY": "retry-key-0123456789"}
    first = client.post("/api/webhooks", {"url": HOOK}, content_type="application/json", **key)
    assert first.status_code == 201 and first.json()["secret"].startswith("whsec_")
    retried = client.post("/api/webhooks", {"url": HOOK}, content_type="application/json", **key)
    assert retried.status_code == 409
    assert retried.json()["code"] == "webhook_already_added"
    assert "whsec_" not in retried.content.decode()
    other = "https://other.example.com/h"  # the same key with another address: another add
    again = client.post("/api/webhooks", {"url": other}, content_type="application/json", **key)
    assert again.status_code == 201
    assert sorted(WebhookEndpoint.objects.filter(owner=alice).values_list("url", flat=True)) == [
        HOOK,
        other,
    ]
    # Another owner's key is theirs alone.
    theirs = _client(make_user("bob"))
    bobs = theirs.post("/api/webhooks", {"url": HOOK}, content_type="application/json", **key)
    assert bobs.status_code == 201


@pytest.mark.parametrize("key", ["short", "x" * 65, "no spaces allowed here", "ünïcödé-key-0123"])
def test_a_malformed_idempotency_key_is_refused_and_adds_nothing(make_user, key: str) -> None:
    client = _client(make_user("alice"))
    refused = client.post(
        "/api/webhooks", {"url": HOOK}, content_type="application/json", HTTP_IDEMPOTENCY_KEY=key
    )
    assert refused.status_code == 422
    assert refused.json() == {
        "code": "idempotency_key_invalid",
        "message": "An Idempotency-Key is 16 to 64 letters, digits, '-' or '_'; nothing was added.",
    }
    assert not WebhookEndpoint.objects.exists()

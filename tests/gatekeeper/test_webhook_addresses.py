"""Webhook addresses are normalised and checked when the endpoint is configured, and every
address a name resolves to is checked again at delivery (issue 13, finding 6: ``127.1``,
``2130706433`` and ``0x7f.1`` were accepted at configuration and refused only later)."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from django.test import Client

from gatekeeper.models import DeliveryStatus, WebhookEndpoint
from gatekeeper.webhooks import (
    webhook_delivery_attempt,
    webhook_endpoint_create,
    webhook_secret_seal,
    webhook_url_check,
)
from tests.gatekeeper.conftest import pending_delivery

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _production_url_rules(settings: Any) -> None:
    # No insecure hosts, as in production: the embedded default lists loopback.
    settings.SYNAPSIA = {**settings.SYNAPSIA, "WEBHOOK_INSECURE_HOSTS": []}


def _create(owner: Any, url: str) -> Any:
    client = Client()
    client.force_login(owner)
    return client.post("/api/webhooks", {"url": url}, content_type="application/json")


# (URL, words the refusal must contain): each spelling reaches what the words say.
REFUSED = [
    ("https://127.1/hook", "127.1 (that is 127.0.0.1): it is this server itself"),
    ("https://2130706433/hook", "2130706433 (that is 127.0.0.1): it is this server itself"),
    ("https://0x7f.1/hook", "0x7f.1 (that is 127.0.0.1): it is this server itself"),
    ("https://0177.0.0.1/hook", "(that is 127.0.0.1): it is this server itself"),
    ("https://127.0.0.1./hook", "(that is 127.0.0.1): it is this server itself"),
    ("https://0/hook", "(that is 0.0.0.0): it is the unspecified address"),
    ("https://0.0.0.0/hook", "0.0.0.0: it is the unspecified address"),
    ("https://[::]/hook", "it is the unspecified address"),
    ("https://[::ffff:127.0.0.1]/hook", "an IPv6 form of 127.0.0.1, which is this server"),
    ("https://[0:0:0:0:0:ffff:7f00:1]/hook", "an IPv6 form of 127.0.0.1"),
    ("https://[::127.0.0.1]/hook", "an IPv6 form of 127.0.0.1"),
    ("https://[2002:7f00:1::]/hook", "an IPv6 form of 127.0.0.1"),  # 6to4
    ("https://[64:ff9b::a00:1]/hook", "an IPv6 form of 10.0.0.1, which is a private"),  # NAT64
    ("https://[::ffff:169.254.169.254]/latest", "an IPv6 form of 169.254.169.254"),
    ("https://[fe80::1%25eth0]/hook", "scoped to one of the server's own network interfaces"),
    ("https://[fe80::1]/hook", "a link-local address"),
    ("https://169.254.169.254/latest/meta-data", "a link-local address"),
    ("https://0xa9.0xfe.0xa9.0xfe/latest", "(that is 169.254.169.254): it is a link-local"),
    ("https://10.1.2.3/hook", "10.1.2.3: it is a private network address"),
    ("https://172.16.0.1/hook", "a private network address"),
    ("https://192.168.1.1/hook", "a private network address"),
    ("https://3232235777/hook", "(that is 192.168.1.1): it is a private network address"),
    ("https://[fc00::1]/hook", "a private network address"),
    ("https://100.64.0.1/hook", "not a public internet address"),  # carrier-grade NAT
    ("https://224.0.0.1/hook", "a multicast address"),
    ("https://255.255.255.255/hook", "the broadcast address"),
    ("https://localhost./hook", "localhost. (that is localhost): it is this server itself"),
    ("https://LOCALHOST/hook", "it is this server itself"),
    ("https://api.localhost./hook", "it is this server itself"),
    ("https://08.1.1.1/hook", "neither a host name nor an IP address"),
    ("https://hooks.example.123/hook", "neither a host name nor an IP address"),
    ("https://%31%32%37.0.0.1/hook", "letters, digits, dots and hyphens"),
    ("https://a..b/hook", "letters, digits, dots and hyphens"),
    ("https://-bad-.example.com/hook", "letters, digits, dots and hyphens"),
    ("https://[::1/hook", "not a valid URL"),
    ("https://[not-v6]/hook", "not a valid URL"),
]


@pytest.mark.parametrize(("url", "words"), REFUSED)
def test_local_and_odd_addresses_are_refused_when_configured_in_words(
    make_user: Any, url: str, words: str
) -> None:
    refused = _create(make_user("alice"), url)
    assert refused.status_code == 422, refused.content
    assert refused.json()["code"] == "webhook_config_invalid"
    assert words in refused.json()["message"]
    assert WebhookEndpoint.objects.count() == 0


@pytest.mark.parametrize(
    ("url", "stored"),
    [
        ("https://Hooks.Example.COM/synapsia", "https://hooks.example.com/synapsia"),
        ("https://hooks.example.com./synapsia?x=1", "https://hooks.example.com/synapsia?x=1"),
        ("https://0x5d.184.216.34:8443/h", "https://93.184.216.34:8443/h"),
        ("https://1572395042/h", "https://93.184.216.34/h"),
        ("https://[2606:4700:0:0:0:0:0:1111]/h", "https://[2606:4700::1111]/h"),
        ("https://93.184.216.34/h", "https://93.184.216.34/h"),
    ],
)
def test_public_addresses_are_stored_in_one_spelling(make_user: Any, url: str, stored: str) -> None:
    created = _create(make_user("alice"), url)
    assert created.status_code == 201, created.content
    assert created.json()["endpoint"]["url"] == stored
    assert WebhookEndpoint.objects.get().url == stored


def test_an_insecure_listed_host_is_matched_after_normalising(settings: Any) -> None:
    # The embedded default lets an owner post to a receiver on this machine over http.
    settings.SYNAPSIA = {**settings.SYNAPSIA, "WEBHOOK_INSECURE_HOSTS": ["127.0.0.1", "localhost"]}
    assert webhook_url_check(url="http://127.1:8000/hook") == "http://127.0.0.1:8000/hook"
    assert webhook_url_check(url="http://localhost.:8000/hook") == "http://localhost:8000/hook"
    with pytest.raises(Exception, match="https"):
        webhook_url_check(url="http://10.0.0.1:8000/hook")


@pytest.mark.parametrize(
    ("resolved", "words"),
    [
        ("127.0.0.1", "resolves to 127.0.0.1, which is this server itself"),
        ("::ffff:10.0.0.7", "resolves to ::ffff:10.0.0.7, which is an IPv6 form of 10.0.0.7"),
        ("169.254.169.254", "which is a link-local address"),
    ],
)
def test_a_name_is_still_resolved_and_checked_at_delivery(
    make_user: Any, monkeypatch: pytest.MonkeyPatch, resolved: str, words: str
) -> None:
    """A public-looking name passes at configuration (we cannot know its addresses then);
    the delivery resolves it and refuses a non-public answer, posting nothing."""
    issued = webhook_endpoint_create(owner=make_user("alice"), url="https://hooks.example.com/h")
    family = socket.AF_INET6 if ":" in resolved else socket.AF_INET
    asked: list[str] = []

    def resolve(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        asked.append(host)
        return [(family, socket.SOCK_STREAM, 6, "", (resolved, port))]

    def never_connect(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a refused address must never be connected to")

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    monkeypatch.setattr(socket, "create_connection", never_connect)
    delivery = pending_delivery(issued.endpoint)
    assert webhook_delivery_attempt(delivery_id=delivery.id, last_attempt=True) == (
        DeliveryStatus.REFUSED
    )
    delivery.refresh_from_db()
    assert asked == ["hooks.example.com"]
    assert delivery.reason_code == "webhook_address_forbidden"
    assert words in delivery.message


def test_a_row_stored_before_normalising_is_refused_at_delivery(make_user: Any) -> None:
    """An endpoint configured with ``127.1`` before this check (a row in the database) is
    read as 127.0.0.1 when delivering, and refused."""
    endpoint = WebhookEndpoint(owner=make_user("alice"), url="https://127.1/hook")
    endpoint.secret_sealed = webhook_secret_seal(endpoint_id=endpoint.id, secret="whsec_test")
    endpoint.save()
    delivery = pending_delivery(endpoint)
    assert webhook_delivery_attempt(delivery_id=delivery.id, last_attempt=True) == (
        DeliveryStatus.REFUSED
    )
    delivery.refresh_from_db()
    assert delivery.reason_code == "webhook_config_invalid"
    assert "127.1 (that is 127.0.0.1): it is this server itself" in delivery.message

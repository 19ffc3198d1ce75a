"""REST API rates: per signed-in owner and per address without a session; past the rate a
429 with a code, a sentence and Retry-After, and nothing done (issue 13, finding 4)."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings as django_settings
from django.test import Client

from rooms.models import Agent

pytestmark = pytest.mark.django_db


@pytest.fixture
def low_rates(settings: Any) -> None:
    # The rates are read on every request, so a test can lower them.
    settings.SYNAPSIA = {
        **settings.SYNAPSIA,
        "API_RATE_OWNER": "5/min",
        "API_RATE_ANONYMOUS": "3/min",
    }


def _owner_client(owner: Any) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def test_the_documented_default_rates() -> None:
    assert django_settings.SYNAPSIA["API_RATE_OWNER"] == "300/min"
    assert django_settings.SYNAPSIA["API_RATE_ANONYMOUS"] == "60/min"


@pytest.mark.usefixtures("low_rates")
def test_an_owner_past_the_rate_gets_429_in_words_and_nothing_is_done(make_owner: Any) -> None:
    alice = _owner_client(make_owner("alice"))
    statuses = [alice.get("/api/agents").status_code for _ in range(5)]
    assert statuses == [200] * 5
    refused = alice.post("/api/agents", {"name": "One too many"}, content_type="application/json")
    assert refused.status_code == 429
    body = refused.json()
    assert body["code"] == "rate_limited"
    assert body["message"].startswith("Too many requests: try again in ")
    assert body["message"].endswith(" seconds.") or body["message"].endswith(" second.")
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert not Agent.objects.filter(name="One too many").exists()


@pytest.mark.usefixtures("low_rates")
def test_one_owner_s_rate_is_not_another_s(make_owner: Any) -> None:
    alice, bob = _owner_client(make_owner("alice")), _owner_client(make_owner("bob"))
    for _ in range(5):
        alice.get("/api/agents")
    assert alice.get("/api/agents").status_code == 429
    assert bob.get("/api/agents").status_code == 200  # same address, another owner


@pytest.mark.usefixtures("low_rates")
def test_requests_without_a_session_are_limited_per_address() -> None:
    here, there = Client(REMOTE_ADDR="203.0.113.9"), Client(REMOTE_ADDR="198.51.100.3")
    # The public ledger key needs no session (503 when the embedded key is absent: either way
    # it is answered, then throttled).
    statuses = [here.get("/api/ledger/public-key").status_code for _ in range(4)]
    assert statuses[:3] != [429] * 3 and statuses[3] == 429
    assert there.get("/api/ledger/public-key").status_code != 429
    # A forged X-Forwarded-For does not buy a fresh allowance (the address is REMOTE_ADDR).
    forged = here.get("/api/ledger/public-key", HTTP_X_FORWARDED_FOR="192.0.2.77")
    assert forged.status_code == 429


def test_with_the_counters_store_down_the_api_answers_unthrottled(
    settings: Any, make_owner: Any
) -> None:
    """Redis holds nothing that must hold: without it the rates are not counted (and the log
    says so), but the API and the reset page still answer; logins are counted in the database."""
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens on port 1
        }
    }
    settings.PASSWORD_RESET_BY_EMAIL = True  # production offers the form only with email set up
    alice = _owner_client(make_owner("alice"))
    assert [alice.get("/api/agents").status_code for _ in range(3)] == [200, 200, 200]
    reset = Client().post("/password-reset/", {"email": "nobody@example.org"})
    assert reset.status_code == 302

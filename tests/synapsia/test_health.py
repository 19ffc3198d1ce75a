"""Liveness and readiness probes."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.test import Client


def test_healthz_answers_without_touching_services() -> None:
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db(transaction=True)
def test_readyz_is_ready_when_database_and_layer_answer() -> None:
    response = Client().get("/readyz")
    assert response.json() == {"status": "ready"}
    assert response.status_code == 200


@pytest.mark.django_db(transaction=True)
def test_readyz_names_the_database_when_it_cannot_be_reached(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Point new connections at a database that is not there (a missing directory for SQLite,
    # a closed port for PostgreSQL); the probe's worker thread opens a fresh connection.
    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("sqlite3"):
        monkeypatch.setitem(database, "NAME", "/nonexistent-synapsia-dir/db.sqlite3")
    else:
        monkeypatch.setitem(database, "PORT", "1")
    response = Client().get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert list(body["failing"]) == ["database"]
    assert "OperationalError" in body["failing"]["database"]


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_readyz_names_the_channel_layer_when_redis_is_down(settings: Any) -> None:
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]},
        }
    }
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert list(response.json()["failing"]) == ["channel_layer"]

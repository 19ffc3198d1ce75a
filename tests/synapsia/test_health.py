"""Liveness and readiness probes."""

from __future__ import annotations

import pytest
from django.test import Client

from synapsia import health


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
def test_readyz_names_the_failing_part(monkeypatch: pytest.MonkeyPatch) -> None:
    def database_down() -> None:
        raise ConnectionError("connection refused")

    monkeypatch.setattr(health, "_database_answers", database_down)
    response = Client().get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert list(body["failing"]) == ["database"]
    assert "connection refused" in body["failing"]["database"]

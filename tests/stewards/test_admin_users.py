"""The admin's user pages offer no way into another owner's account."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_a_superuser_cannot_set_an_owners_password_or_redirect_their_reset(
    superuser: Any, make_owner: Any
) -> None:
    owner = make_owner("alice")
    owner.email = "alice@example.org"
    owner.save()
    password_hash = owner.password
    client = Client()
    client.force_login(superuser)

    assert client.get(f"/admin/auth/user/{owner.pk}/password/").status_code == 404
    assert (
        client.post(
            f"/admin/auth/user/{owner.pk}/password/",
            {"password1": "taken over 123!", "password2": "taken over 123!"},
        ).status_code
        == 404
    )
    page = client.get(f"/admin/auth/user/{owner.pk}/change/").content.decode()
    assert 'name="password' not in page and "password/" not in page
    assert 'name="email"' not in page  # shown, not editable

    client.post(
        f"/admin/auth/user/{owner.pk}/change/",
        {
            "username": "alice",
            "email": "operator@example.org",
            "password": "x",
            "is_active": "on",
            "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00",
        },
    )
    owner.refresh_from_db()
    assert owner.email == "alice@example.org"
    assert owner.password == password_hash
    assert client.get("/admin/auth/user/add/").status_code == 403


def test_an_owner_keeps_every_way_into_their_own_account(make_owner: Any) -> None:
    owner = make_owner("alice")
    client = Client()
    client.force_login(owner)
    assert client.get("/settings/password/").status_code == 200


def test_the_admin_registers_no_model_that_holds_room_content() -> None:
    """An allow-list: a new admin registration must be added here on purpose (and pass the
    separation matrix, tests/stewards/test_separation.py)."""
    from django.contrib import admin

    registered = {model._meta.label for model in admin.site._registry}
    assert registered <= {
        "auth.User",
        "auth.Group",
        "axes.AccessAttempt",
        "axes.AccessLog",
        "axes.AccessFailureLog",
        "gatekeeper.ToolPolicyRule",
        # Metadata only (when, media type, size), read-only; its sealed title and body are
        # never shown (tests/artifacts/test_operator.py, and the separation matrix).
        "artifacts.Artifact",
    }, registered

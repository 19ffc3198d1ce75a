"""One-time login links: looking does not use them, signing in uses them once, and a link that
cannot be used signs nobody in."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from practice.errors import NotADemoOwner
from practice.login_links import login_link_issue
from practice.models import LoginLink
from practice.seeding import Practice, practice_seed

pytestmark = pytest.mark.django_db


@pytest.fixture
def practice() -> Practice:
    return practice_seed()


def _signed_in(client: Client) -> str | None:
    return client.session.get("_auth_user_id")


def _link(path: str) -> LoginLink:
    token = path.rstrip("/").rsplit("/", 1)[-1]
    return LoginLink.objects.get(token_hash=hashlib.sha256(token.encode()).hexdigest())


def test_the_seeding_prints_a_link_per_demo_owner(practice: Practice) -> None:
    for seat in (practice.host, practice.guest):
        assert seat.login_path.startswith("/practice/login/") and seat.login_path.endswith("/")
        link = _link(seat.login_path)
        assert link.owner_id == seat.owner.pk and link.room_id == practice.room_id
        assert link.used_at is None
        assert timedelta(minutes=59) < link.expires_at - timezone.now() <= timedelta(hours=1)
    # Only the hash is stored.
    token = practice.host.login_path.rstrip("/").rsplit("/", 1)[-1]
    assert not LoginLink.objects.filter(token_hash=token).exists()


def test_looking_at_a_link_does_not_use_it(client: Client, practice: Practice) -> None:
    for _ in range(2):  # a link previewer, then the person
        page = client.get(practice.host.login_path)
        assert page.status_code == 200
        assert "Sign in as demo-alice (practice room)" in page.content.decode()
        assert "no-store" in page.headers["Cache-Control"]
    assert _link(practice.host.login_path).used_at is None
    assert _signed_in(client) is None


def test_signing_in_uses_the_link_once_and_leads_to_the_room(
    client: Client, practice: Practice
) -> None:
    response = client.post(practice.host.login_path)
    assert response.status_code == 302
    assert response.headers["Location"] == f"/rooms/{practice.room_id}/"
    assert _signed_in(client) == str(practice.host.owner.pk)
    assert client.get(response.headers["Location"]).status_code == 200
    assert _link(practice.host.login_path).used_at is not None

    again = Client()
    refused = again.post(practice.host.login_path)
    assert refused.status_code == 410
    assert "already used" in refused.content.decode()
    assert _signed_in(again) is None
    assert again.get(practice.host.login_path).status_code == 410


def test_the_other_owner_has_their_own_link(client: Client, practice: Practice) -> None:
    client.post(practice.guest.login_path)
    assert _signed_in(client) == str(practice.guest.owner.pk)


def test_an_expired_link_is_refused(client: Client, practice: Practice) -> None:
    LoginLink.objects.filter(id=_link(practice.host.login_path).id).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert client.get(practice.host.login_path).status_code == 410
    refused = client.post(practice.host.login_path)
    assert refused.status_code == 410 and "expired" in refused.content.decode()
    assert _signed_in(client) is None
    assert _link(practice.host.login_path).used_at is None


@pytest.mark.parametrize(
    "token",
    [
        "q3Zr8Lk1VbX0nT5yWcE2uHs9GdJ4aPf7MoYi6RtKwQ8",  # well-formed, never issued
        "short",
        "A" * 44,
        "A" * 42 + "!",
        "%00" * 15,
    ],
)
def test_unknown_or_malformed_tokens_sign_nobody_in(
    client: Client, practice: Practice, token: str
) -> None:
    for response in (
        client.get(f"/practice/login/{token}/"),
        client.post(f"/practice/login/{token}/"),
    ):
        assert response.status_code == 404
        assert "not valid" in response.content.decode()
    assert _signed_in(client) is None


def test_a_forged_link_differs_by_one_character(client: Client, practice: Practice) -> None:
    token = practice.host.login_path.rstrip("/").rsplit("/", 1)[-1]
    forged = token[:-1] + ("A" if token[-1] != "A" else "B")
    assert client.post(f"/practice/login/{forged}/").status_code == 404
    assert _signed_in(client) is None
    assert _link(practice.host.login_path).used_at is None


def test_only_demo_owners_get_links(client: Client, practice: Practice, make_owner: Any) -> None:
    carol = make_owner("carol")
    with pytest.raises(NotADemoOwner):
        login_link_issue(owner=carol, room_id=None)
    # Even a link row written straight into the database does not sign a non-demo owner in.
    token = secrets.token_urlsafe(32)
    LoginLink.objects.create(
        owner=carol,
        token_hash=hashlib.sha256(token.encode()).hexdigest(),
        expires_at=timezone.now() + timedelta(hours=1),
    )
    assert client.post(f"/practice/login/{token}/").status_code == 404
    assert _signed_in(client) is None


def test_signing_in_needs_the_forms_csrf_token(practice: Practice) -> None:
    browser = Client(enforce_csrf_checks=True)
    assert browser.post(practice.host.login_path).status_code == 403
    assert _link(practice.host.login_path).used_at is None
    page = browser.get(practice.host.login_path)
    csrf = page.context["csrf_token"]
    response = browser.post(practice.host.login_path, {"csrfmiddlewaretoken": str(csrf)})
    assert response.status_code == 302
    assert _signed_in(browser) == str(practice.host.owner.pk)


def test_a_new_seeding_issues_new_links_and_old_unused_ones_still_expire(
    client: Client, practice: Practice
) -> None:
    second = practice_seed()
    assert second.host.login_path != practice.host.login_path
    response = client.post(second.host.login_path)
    assert response.headers["Location"] == f"/rooms/{second.room_id}/"

"""Staff and superusers cannot read a shared artifact: the admin shows that one exists (when,
its media type, its size), never its title, body or room; no selector opens it for them."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from artifacts.models import Artifact
from artifacts.selectors import artifacts_for_owner
from rooms.errors import NotFound
from tests.artifacts.conftest import publish

pytestmark = pytest.mark.django_db

CANARY = "zq8operatorcanary"


def test_the_admin_shows_metadata_only_and_changes_nothing(
    shared_room: Any, django_user_model: Any
) -> None:
    publish(shared_room, shared_room.a, title=f"Plan {CANARY}", body=f"Body {CANARY}")
    artifact = Artifact.objects.get()
    root = django_user_model.objects.create_superuser("root", "root@example.test", "pw 12345 x")
    client = Client()
    client.force_login(root)
    base = "/admin/artifacts/artifact/"
    listing = client.get(base)
    change = client.get(f"{base}{artifact.id}/change/")
    assert listing.status_code == change.status_code == 200
    for page in (listing, change):
        html = page.content.decode()
        assert CANARY not in html
        assert shared_room.room.purpose not in html  # the room's name is its purpose
    assert "Markdown" in change.content.decode()
    assert client.get(f"{base}add/").status_code == 403
    assert client.post(f"{base}{artifact.id}/delete/", {"post": "yes"}).status_code == 403
    assert Artifact.objects.filter(id=artifact.id).exists()
    with pytest.raises(NotFound):
        artifacts_for_owner(owner=root, room_id=shared_room.room.id)

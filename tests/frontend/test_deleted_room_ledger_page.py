"""The ledger page of a deleted room (issue 14: the ledger "still verifies" after a deletion):
each former owner still reaches it, from the notice on their rooms page and at its address,
with words saying the room was deleted and none of its content; anyone else, staff included,
gets the page every unknown room gets."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from rooms import services
from tests.conftest import OpenRoom

pytestmark = pytest.mark.django_db(transaction=True)

CANARY = "deleted-ledger-page-canary-5e21"


@pytest.fixture(autouse=True)
def _journal(tmp_path: Path, settings: Any) -> None:
    settings.SYNAPSIA = {
        **settings.SYNAPSIA,
        "DELETION_JOURNAL_PATH": str(tmp_path / "deletions.jsonl"),
    }


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_former_owners_reach_the_deleted_rooms_ledger_and_no_one_else_does(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    opened = make_open_room(purpose=f"Dinner {CANARY}")
    services.message_say(
        room_id=opened.room.id, agent_id=opened.a.agent.id, client_id="m1", text=CANARY
    )
    address = f"/rooms/{opened.room.id}/ledger/"
    deleter = _client(opened.b.owner)
    done = deleter.post(f"/rooms/{opened.room.id}/delete/", {"confirm": "on"}, follow=True)
    assert done.status_code == 200
    # The one who deleted it is told where its ledger stays, by a link (the purpose escaped).
    assert f'<a href="{address}">Its ledger</a> stays' in done.content.decode()

    for owner in (opened.a.owner, opened.b.owner):
        page = _client(owner).get(address)
        assert page.status_code == 200
        text = page.content.decode()
        assert 'id="room-deleted"' in text and "This room was deleted for both sides" in text
        assert f'data-room-id="{opened.room.id}"' in text  # the browser's checker runs on it
        assert CANARY not in text

    # The other owner's notice links there (the one who deleted it has no notice).
    rooms_page = _client(opened.a.owner).get("/").content.decode()
    assert address in rooms_page

    stranger = User.objects.create_user("mallory", password="x" * 12)
    staff = User.objects.create_user("operator", password="x" * 12, is_staff=True)
    superuser = User.objects.create_superuser("root", password="x" * 12)
    for outsider in (stranger, staff, superuser):
        page = _client(outsider).get(address)
        assert page.status_code == 404
        assert "room-deleted" not in page.content.decode()
        assert CANARY not in page.content.decode()

"""A turn's disclosure grants are read by one written statement (issue 17), and the grants it
builds are exactly the ORM's: every column, and the approving key as select_related reads it
(so a turn that claims an approval queries nothing more for its key)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from gatekeeper.grants import turn_grants_lock
from gatekeeper.records import OPEN_GRANT_STATUSES, Grant, GrantKind, GrantStatus
from tests.gatekeeper.test_disclosure_approval import Scene

pytestmark = pytest.mark.django_db


def _orm(scene: Scene) -> list[Grant]:
    return list(
        Grant.objects.select_related("key")
        .filter(
            kind=GrantKind.DISCLOSURE,
            room_id=scene.room.id,
            recipient_agent_id=scene.setup.b.agent.id,
            status__in=[*OPEN_GRANT_STATUSES, GrantStatus.DENIED],
        )
        .order_by("created_at", "id")
    )


def _columns(model: Any, row: Any) -> dict[str, Any]:
    return {f.attname: getattr(row, f.attname) for f in model._meta.concrete_fields}


def _read(scene: Scene) -> list[Grant]:
    with transaction.atomic():
        grants = turn_grants_lock(room_id=scene.room.id, recipient_agent_id=scene.setup.b.agent.id)
    return list(grants._grants)


def test_the_written_read_builds_the_orms_grants_with_their_keys(make_open_room: Any) -> None:
    scene = Scene(make_open_room())
    scene.bob_turn()  # asks Alice: one pending request
    pending = scene.pending()
    scene.decide(pending)  # approved, signed with her key
    scene.bob_turn()  # disclosed once: consumed (not read again)
    scene.bob_turn()  # asked again
    denied = scene.pending()
    scene.decide(denied, approve=False)

    expected, read = _orm(scene), _read(scene)
    assert [g.status for g in expected] == [GrantStatus.DENIED]
    assert [_columns(Grant, g) for g in read] == [_columns(Grant, g) for g in expected]

    scene.bob_turn()  # the denial is remembered: nothing new asked
    scene.resign()  # a new slip: asked again, then approved
    scene.bob_turn()
    approved = scene.pending()
    scene.decide(approved)
    expected, read = _orm(scene), _read(scene)
    assert {g.status for g in expected} == {GrantStatus.DENIED, GrantStatus.APPROVED}
    assert [_columns(Grant, g) for g in read] == [_columns(Grant, g) for g in expected]
    with CaptureQueriesContext(connection) as captured:
        keys = [(g.key_id, g.key) for g in read]
    assert len(captured) == 0  # each key came with its grant
    for (key_id, key), want in zip(keys, expected, strict=True):
        assert key_id == want.key_id
        if want.key is None:
            assert key is None
        else:
            assert key is not None
            assert _columns(type(key), key) == _columns(type(want.key), want.key)

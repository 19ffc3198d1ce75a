"""Publishing a shared artifact: stored sealed under the room's key, shared with the other
agent only if the publisher's slip clears it, refused with a clear error when malformed."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from artifacts.delivery import artifacts_for_agent
from artifacts.models import Artifact
from artifacts.sealing import artifact_open
from artifacts.selectors import artifacts_for_owner
from gatekeeper.models import SandboxEffect, WebhookDelivery
from gatekeeper.records import ActionRecord
from gatekeeper.webhooks import webhook_endpoint_create
from ledger.models import LedgerEvent
from ledger.verification import ledger_verify_room
from rooms.models import Room
from tests.artifacts.conftest import publish, sign_publishing
from tests.gatekeeper.conftest import (
    receiver,  # noqa: F401 (a fixture)
    webhook_settings,  # noqa: F401 (a fixture)
)

pytestmark = pytest.mark.django_db

CANARY = "zq8artifactcanary"


def _events(room: Any, kind: str) -> list[dict[str, Any]]:
    return [
        e.data for e in LedgerEvent.objects.filter(room_id=room.room.id, kind=kind).order_by("seq")
    ]


def test_a_cleared_publish_is_stored_sealed_and_reaches_the_peer_fenced(shared_room: Any) -> None:
    result = publish(shared_room, shared_room.a, title=f"Plan {CANARY}", body=f"Walk {CANARY}")
    assert result.status == "executed", result
    artifact = Artifact.objects.get()
    assert artifact.shared_with_peer and artifact.media_type == "text/markdown"
    assert result.output["output"]["artifact_id"] == f"art-{artifact.id.hex}"
    # At rest the artifact row holds no text; the server stored it (no sandbox effect row).
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM artifacts_artifact")
        assert CANARY.encode() not in repr(cursor.fetchall()).encode()
    assert not SandboxEffect.objects.exists()
    content = artifact_open(
        room_id=artifact.room_id, artifact_id=artifact.id, blob=bytes(artifact.sealed)
    )
    assert (content.title, content.body) == (f"Plan {CANARY}", f"Walk {CANARY}")

    delivery = artifacts_for_agent(
        room_id=shared_room.room.id, agent_id=shared_room.b.agent.id, turn=3
    )
    assert delivery.error is None and len(delivery.artifacts) == 1
    shared = delivery.artifacts[0]
    # Fenced untrusted data: the text sits between the nonce-bearing boundary lines only.
    assert shared.fenced.count(shared.nonce) == 2
    inner = shared.fenced.split("\n", 1)[1].rsplit("\n", 1)[0]
    assert inner == f"Plan {CANARY}\n\nWalk {CANARY}"
    assert "artifact" in shared.fenced.split("\n", 1)[0]
    disclosure = _events(shared_room, "disclosure")[-1]
    assert disclosure == {
        "owner_id": str(shared_room.a.owner.pk),
        "item_id": str(artifact.id),
        "recipient_agent_id": str(shared_room.b.agent.id),
        "turn": 3,
    }
    # The publisher's own agent is not handed its own artifact back.
    mine = artifacts_for_agent(room_id=shared_room.room.id, agent_id=shared_room.a.agent.id, turn=1)
    assert mine.artifacts == ()
    # Nothing of it in the ledger; the chain still verifies.
    rows = list(LedgerEvent.objects.filter(room_id=shared_room.room.id).values())
    assert CANARY not in repr(rows)
    assert ledger_verify_room(room_id=shared_room.room.id).ok


def test_a_slip_that_keeps_documents_with_the_owners_gives_the_peer_nothing(
    shared_room: Any,
) -> None:
    result = publish(shared_room, shared_room.b, title="Bob's draft", body="Secret draft")
    assert result.status == "executed"
    artifact = Artifact.objects.get()
    assert not artifact.shared_with_peer
    # The refusal is in the ledger (metadata only), naming the rule and the artifact.
    denial = _events(shared_room, "denial")[-1]
    assert denial == {
        "rule": "recipient_not_cleared",
        "subject_id": str(shared_room.b.agent.id),
        "resource_id": str(artifact.id),
    }
    delivery = artifacts_for_agent(
        room_id=shared_room.room.id, agent_id=shared_room.a.agent.id, turn=1
    )
    assert delivery.artifacts == () and delivery.error is None
    assert not _events(shared_room, "disclosure")
    # Both owners still see it in the room.
    for owner in (shared_room.a.owner, shared_room.b.owner):
        (view,) = artifacts_for_owner(owner=owner, room_id=shared_room.room.id)
        assert view.title == "Bob's draft" and view.body == "Secret draft"
        assert "Not given to the other agent" in view.shared_words


def test_a_publish_the_slip_does_not_clear_is_not_stored(make_open_room: Any) -> None:
    room = make_open_room()
    # Alice's slip names another tool only: publishing is beyond it.
    from tests.slips.conftest import seat_slip_sign

    seat_slip_sign(
        room.a,
        room.room.id,
        [{"resource": "tool:propose_time", "operation": "act", "approval": "none"}],
    )
    result = publish(room, room.a)
    assert result.status == "awaiting_grant" and result.rule == "beyond_slip.not_in_slip"
    assert not Artifact.objects.exists()
    assert (
        artifacts_for_agent(room_id=room.room.id, agent_id=room.b.agent.id, turn=1).artifacts == ()
    )
    assert Room.objects.get(id=room.room.id).state == "paused"  # a fork for Alice


def test_revoking_the_publishers_key_stops_delivery_at_once(shared_room: Any) -> None:
    from slips import services as slip_services
    from slips.models import Slip

    publish(shared_room, shared_room.a)
    first = artifacts_for_agent(
        room_id=shared_room.room.id, agent_id=shared_room.b.agent.id, turn=1
    )
    assert len(first.artifacts) == 1
    slip = Slip.objects.get(owner=shared_room.a.owner, room_id=shared_room.room.id)
    slip_services.key_revoke(owner=shared_room.a.owner, key_id=slip.key_id)
    later = artifacts_for_agent(
        room_id=shared_room.room.id, agent_id=shared_room.b.agent.id, turn=2
    )
    assert later.artifacts == ()  # decided again, live: nothing cached from turn 1
    assert _events(shared_room, "denial")[-1]["rule"] == "key_revoked"


def test_uses_spent_by_publishing_still_share_what_was_published(make_open_room: Any) -> None:
    room = make_open_room()
    sign_publishing(room, room.a, "peer_agent", max_uses=1)
    # A record for the peer only does not let the agent publish (own_agent): a grant is asked.
    assert publish(room, room.a).status == "awaiting_grant"

    other = make_open_room(prefix="x")
    sign_publishing(other, other.a, "both", max_uses=1)
    assert publish(other, other.a).status == "executed"
    delivered = artifacts_for_agent(room_id=other.room.id, agent_id=other.b.agent.id, turn=1)
    assert len(delivered.artifacts) == 1


def test_a_replayed_publish_stores_one_artifact(shared_room: Any) -> None:
    first = publish(shared_room, shared_room.a)
    again = publish(shared_room, shared_room.a)
    assert again.replay and again.output == first.output
    assert Artifact.objects.count() == 1 and not SandboxEffect.objects.exists()


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"body": "é" * 16_001}, "at most 32,000"),  # 16,001 chars, 32,002 bytes
        ({"body": "x" * 20_001}, "body"),
        ({"body": "Line one\x07hidden\x1b[2J"}, "control characters"),
        ({"body": "Line one\x00hidden"}, "U+0000"),
        ({"body": "\ud800 lone surrogate"}, "valid Unicode"),
        ({"body": "   \n\t "}, "blank"),
        ({"title": "Two\nlines"}, "one line"),
        ({"format": "html"}, "format"),
        ({"format": "text"}, "format"),
    ],
)
def test_malformed_or_oversized_artifacts_are_refused_with_a_clear_error(
    shared_room: Any, arguments: dict[str, Any], words: str
) -> None:
    base = {"title": "Plan", "body": "Dinner at 19:30.", "format": "markdown"}
    from rooms import forks

    result = forks.action_for_agent(
        room_id=shared_room.room.id,
        agent_id=shared_room.a.agent.id,
        client_id="publish-bad-01",
        tool="publish_artifact",
        arguments={**base, **arguments},
    )
    assert result.status == "denied" and result.rule == "invalid_arguments"
    assert words in result.detail
    assert not Artifact.objects.exists() and not ActionRecord.objects.exists()
    # Refused for its shape: the room does not stop.
    assert Room.objects.get(id=shared_room.room.id).state == "open"


def test_a_second_different_document_is_no_contradiction(shared_room: Any) -> None:
    """Publishing acts only inside the room: a second, different document is published too,
    with no contradiction flare and no pause (a second booking would be one)."""
    from rooms.models import Flare

    first = publish(shared_room, shared_room.a, title="Plan A", body="Dinner at 19:30.")
    second = publish(
        shared_room, shared_room.a, title="Plan B", body="Dinner at 20:00.", client_id="publish-2"
    )
    assert (first.status, second.status) == ("executed", "executed"), second
    assert Artifact.objects.filter(room_id=shared_room.room.id).count() == 2
    assert not Flare.objects.exists()
    assert Room.objects.get(pk=shared_room.room.id).state == "open"


def test_an_owner_with_a_webhook_has_the_artifact_stored_and_the_webhook_sent_nothing(
    shared_room: Any,
    receiver: Any,  # noqa: F811 (the fixture)
    webhook_settings: Any,  # noqa: F811 (the fixture)
) -> None:
    # Alice's real-world actions go to her webhook; a publish acts only inside the room.
    webhook_endpoint_create(owner=shared_room.a.owner, url=receiver.url("/hook"))
    result = publish(shared_room, shared_room.a, title="Plan", body="Dinner at 19:30.")
    assert (result.status, result.rule) == ("executed", "cleared"), result
    assert result.output is not None
    artifact = Artifact.objects.get()
    assert artifact.publisher_owner_id == shared_room.a.owner.pk
    assert result.output["output"]["artifact_id"] == f"art-{artifact.id.hex}"
    delivered = artifacts_for_agent(
        room_id=shared_room.room.id, agent_id=shared_room.b.agent.id, turn=2
    )
    assert len(delivered.artifacts) == 1
    assert receiver.seen("/hook") == []
    assert not WebhookDelivery.objects.exists() and not SandboxEffect.objects.exists()
    # A replay finds the same artifact, and still sends the webhook nothing.
    assert publish(shared_room, shared_room.a, title="Plan", body="Dinner at 19:30.").replay
    assert Artifact.objects.count() == 1 and receiver.seen("/hook") == []

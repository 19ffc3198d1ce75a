"""A sharing check that fails when an artifact is published (an error, a timeout) is a denial
that pauses the room at a fork, recorded (spec, "Failing closed"); the artifact is left
undecided, not refused forever: once the owners resume, the other agent's next turn decides
it live, and that decision settles it."""

from __future__ import annotations

import time
from typing import Any

import pytest

from artifacts.models import Artifact
from artifacts.selectors import artifacts_for_owner
from gatekeeper import sharing
from ledger.models import LedgerEvent
from ledger.verification import ledger_verify_room
from rooms import services
from rooms.context import context_for_agent
from rooms.ledger_api import events_with_words
from rooms.models import Room, RoomState
from tests.artifacts.conftest import publish

pytestmark = pytest.mark.django_db

PLAN = "Dinner at 19:30 at Lina's, then a walk along the canal."


def _events(room: Any, kind: str) -> list[dict[str, Any]]:
    return list(
        LedgerEvent.objects.filter(room_id=room.room.id, kind=kind)
        .order_by("seq")
        .values_list("data", flat=True)
    )


def _state(room: Any) -> str:
    return Room.objects.get(id=room.room.id).state


def _break_sharing_check(
    how: str, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> tuple[str, dict[str, Any]]:
    """Make only the sharing decision fail (the publish itself is decided as usual): it
    raises, or it takes longer than the Gatekeeper's timeout. Returns the rule it should be
    denied with, and the settings to restore."""
    before = settings.SYNAPSIA
    real = sharing.capability_verdict
    if how == "error":

        def broken(**_: Any) -> Any:
            raise RuntimeError("slip store down")

        monkeypatch.setattr(sharing, "capability_verdict", broken)
        return "gatekeeper.error", before

    def slow(**kwargs: Any) -> Any:
        time.sleep(0.6)
        return real(**kwargs)

    settings.SYNAPSIA = {**before, "GATEKEEPER_TIMEOUT_SECONDS": 0.3}
    monkeypatch.setattr(sharing, "capability_verdict", slow)
    return "gatekeeper.timeout", before


@pytest.mark.parametrize("how", ["error", "timeout"])
def test_a_failed_sharing_check_denies_pauses_and_is_decided_again_after_resume(
    shared_room: Any, monkeypatch: pytest.MonkeyPatch, settings: Any, how: str
) -> None:
    rule, before = _break_sharing_check(how, monkeypatch, settings)
    result = publish(shared_room, shared_room.a, body=PLAN)
    monkeypatch.undo()
    settings.SYNAPSIA = before

    # The publish itself was allowed and stored; its sharing was denied, fail closed.
    assert result.status == "executed", result
    artifact = Artifact.objects.get()
    assert artifact.share_undecided
    denial = _events(shared_room, "denial")[-1]
    assert denial == {
        "rule": rule,
        "subject_id": str(shared_room.a.agent.id),
        "resource_id": str(artifact.id),
    }
    # The room stopped at the fail-safe fork, and the pause is in the ledger, in words.
    assert _state(shared_room) == RoomState.PAUSED
    assert _events(shared_room, "room_paused")[-1] == {"by": "gatekeeper", "reason_rule": rule}
    paused = LedgerEvent.objects.filter(room_id=shared_room.room.id, kind="room_paused").last()
    assert paused is not None
    (worded,) = events_with_words(
        room_id=shared_room.room.id,
        events=[{"seq": paused.seq, "kind": paused.kind, "data": paused.data}],
    )
    assert "safety check" in worded["words"] and "paused the room" in worded["words"]
    # Both owners are told, on the artifact, why the other agent does not have it yet.
    for owner in (shared_room.a.owner, shared_room.b.owner):
        (view,) = artifacts_for_owner(owner=owner, room_id=shared_room.room.id)
        assert view.shared_words.startswith("Not given to the other agent yet")
        assert "failed, so the room paused" in view.shared_words

    # While the room is paused, nothing reaches the other agent.
    assert (
        context_for_agent(
            room_id=shared_room.room.id, agent_id=shared_room.b.agent.id
        ).peer_artifacts
        == []
    )
    assert not _events(shared_room, "disclosure")

    # Alice resumes: Bob's agent's next turn decides it live (Alice's slip shares it).
    services.room_transition(
        owner=shared_room.a.owner, room_id=shared_room.room.id, to=RoomState.OPEN
    )
    context = context_for_agent(room_id=shared_room.room.id, agent_id=shared_room.b.agent.id)
    (given,) = context.peer_artifacts
    assert given.artifact_id == artifact.id and PLAN in given.fenced
    disclosure = _events(shared_room, "disclosure")[-1]
    assert disclosure["item_id"] == str(artifact.id) and disclosure["turn"] == context.turn
    artifact.refresh_from_db()
    assert artifact.shared_with_peer and not artifact.share_undecided
    (view,) = artifacts_for_owner(owner=shared_room.b.owner, room_id=shared_room.room.id)
    assert view.shared_words == "Shared with the other agent, as fenced untrusted text."
    assert _state(shared_room) == RoomState.OPEN
    assert ledger_verify_room(room_id=shared_room.room.id).ok


def test_an_undecided_artifact_a_slip_does_not_share_is_settled_as_kept_with_one_denial(
    shared_room: Any, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    # Bob's slip keeps his agent's documents with the owners; the check failed at publishing.
    rule, _ = _break_sharing_check("error", monkeypatch, settings)
    assert publish(shared_room, shared_room.b, title="Bob's draft").status == "executed"
    monkeypatch.undo()
    artifact = Artifact.objects.get()
    assert artifact.share_undecided and _state(shared_room) == RoomState.PAUSED

    services.room_transition(
        owner=shared_room.b.owner, room_id=shared_room.room.id, to=RoomState.OPEN
    )
    # Decided as publishing would have decided it: refused, recorded once, kept.
    for _ in range(3):
        context = context_for_agent(room_id=shared_room.room.id, agent_id=shared_room.a.agent.id)
        assert context.peer_artifacts == []
    about = [d for d in _events(shared_room, "denial") if d["resource_id"] == str(artifact.id)]
    assert [d["rule"] for d in about] == [rule, "recipient_not_cleared"]
    assert about[-1]["subject_id"] == str(shared_room.b.agent.id)
    artifact.refresh_from_db()
    assert not artifact.shared_with_peer and not artifact.share_undecided
    (view,) = artifacts_for_owner(owner=shared_room.a.owner, room_id=shared_room.room.id)
    assert view.shared_words.startswith("Not given to the other agent: ")
    assert not _events(shared_room, "disclosure")
    assert _state(shared_room) == RoomState.OPEN
    assert ledger_verify_room(room_id=shared_room.room.id).ok


def test_an_undecided_artifact_stays_undecided_while_the_reader_is_not_in_standing(
    shared_room: Any, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """A refusal about the reading agent's seat is no answer about the publisher's slip."""
    from artifacts.delivery import artifacts_for_agent
    from rooms.models import RoomMember, SeatStanding

    _break_sharing_check("error", monkeypatch, settings)
    publish(shared_room, shared_room.a, body=PLAN)
    monkeypatch.undo()
    services.room_transition(
        owner=shared_room.a.owner, room_id=shared_room.room.id, to=RoomState.OPEN
    )
    RoomMember.objects.filter(room_id=shared_room.room.id, agent_id=shared_room.b.agent.id).update(
        standing=SeatStanding.MUTED
    )
    muted = artifacts_for_agent(
        room_id=shared_room.room.id, agent_id=shared_room.b.agent.id, turn=1
    )
    assert muted.artifacts == () and muted.error is None
    assert _events(shared_room, "denial")[-1]["rule"] == "agent_withdrawn"
    artifact = Artifact.objects.get()
    assert artifact.share_undecided and not artifact.shared_with_peer

"""Shared artifacts reach the other agent in its turn's context, and only there: fenced, decided
live for that turn and recorded in the ledger first; a failed check pauses the room with
nothing of the turn disclosed; the publisher's own agent is never handed its own back."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, get_args

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.context import PeerArtifact as SdkPeerArtifact
from agents.context import TurnContext
from artifacts import delivery as delivery_module
from artifacts.models import Artifact, MediaType
from gatekeeper import sharing
from ledger.models import LedgerEvent
from ledger.services import LedgerAppendError
from ledger.verification import ledger_verify_room
from rooms import services
from rooms.context import context_for_agent
from rooms.models import Room, RoomState
from slips import services as slip_services
from slips import vault
from synapsia_protocol import PeerArtifact
from tests.artifacts.conftest import publish, publish_record
from tests.conftest import OpenRoom
from tests.rooms.test_context_statements import MAX_STATEMENTS
from tests.slips.conftest import canonical_text, enroll, seat_slip_sign, slip_payload

pytestmark = pytest.mark.django_db

PLAN = "Dinner at 19:30 at Lina's, then a walk along the canal."
BUDGET_TO_PEER = {
    "resource": "budget",
    "operation": "disclose",
    "recipient": "peer_agent",
    "scope": "range",
    "approval": "none",
    "max_uses": 50,
}


def _resign(seat: Any, room: OpenRoom, capabilities: list[dict[str, Any]]) -> None:
    """A new slip replacing the seat's current one (issued a second later, so it is newer)."""
    key, device = enroll(seat.owner)
    text = canonical_text(
        slip_payload(
            owner=seat.owner,
            room_id=room.room.id,
            agent_id=seat.agent.id,
            key=key,
            capabilities=capabilities,
            issued_at=int(time.time()) + 1,
        )
    )
    slip_services.slip_submit(
        owner=seat.owner,
        room_id=room.room.id,
        seated_agent_id=seat.agent.id,
        payload=text,
        signature=device.sign(text),
    )


def _turn(room: OpenRoom, seat: Any) -> Any:
    return context_for_agent(room_id=room.room.id, agent_id=seat.agent.id)


def _events(room: OpenRoom, kind: str) -> list[dict[str, Any]]:
    return list(
        LedgerEvent.objects.filter(room_id=room.room.id, kind=kind)
        .order_by("seq")
        .values_list("data", flat=True)
    )


@pytest.fixture
def budget_room(make_open_room: Callable[..., OpenRoom]) -> OpenRoom:
    """Alice shares what her agent publishes and her budget range with Bob's agent; Bob's
    slip keeps what his agent publishes with the owners."""
    room = make_open_room()
    vault.vault_item_create(
        owner=room.a.owner,  # type: ignore[arg-type]
        content={"kind": "budget", "currency": "EUR", "minimum": 3000, "maximum": 6000},
    )
    seat_slip_sign(room.a, room.room.id, [publish_record("both"), BUDGET_TO_PEER])
    seat_slip_sign(room.b, room.room.id, [publish_record("own_agent")])
    return room


def test_a_cleared_artifact_reaches_the_peer_fenced_with_its_nonce_in_the_preamble(
    shared_room: OpenRoom,
) -> None:
    assert publish(shared_room, shared_room.a, body=PLAN).status == "executed"
    [artifact] = Artifact.objects.filter(room_id=shared_room.room.id)

    context = _turn(shared_room, shared_room.b)

    [given] = context.peer_artifacts
    assert given.artifact_id == artifact.id
    assert given.media_type == "text/markdown" and given.size_bytes == len(PLAN.encode())
    assert given.published_at == artifact.created_at
    lines = given.fenced.split("\n")
    assert lines[0].startswith(f'<<untrusted source="artifact" nonce="{given.nonce}')
    assert lines[-1] == f'<</untrusted nonce="{given.nonce}">>'
    assert "Friday plan" in given.fenced and PLAN in given.fenced
    assert given.nonce in context.preamble  # the trusted part names the genuine block
    assert given.truncated is False and given.flags == []
    # Recorded for the very turn it fed, before it was handed out, in a chain that verifies.
    disclosures = [
        d for d in _events(shared_room, "disclosure") if d["item_id"] == str(artifact.id)
    ]
    assert disclosures == [
        {
            "owner_id": str(shared_room.a.owner.pk),  # type: ignore[attr-defined]
            "item_id": str(artifact.id),
            "recipient_agent_id": str(shared_room.b.agent.id),
            "turn": context.turn,
        }
    ]
    assert ledger_verify_room(room_id=shared_room.room.id).ok


def test_each_turn_decides_again_and_gets_a_fresh_fence(shared_room: OpenRoom) -> None:
    publish(shared_room, shared_room.a, body=PLAN)
    first, second = _turn(shared_room, shared_room.b), _turn(shared_room, shared_room.b)
    assert first.peer_artifacts[0].nonce != second.peer_artifacts[0].nonce
    assert first.peer_artifacts[0].nonce not in second.preamble
    turns = [d["turn"] for d in _events(shared_room, "disclosure")]
    assert turns == [first.turn, second.turn]


def test_an_artifact_kept_with_the_owners_never_reaches_the_other_agent(
    shared_room: OpenRoom,
) -> None:
    # Bob's slip says "own_agent": what his agent publishes stays with the two owners, and
    # the ledger recorded that refusal when it was published.
    assert publish(shared_room, shared_room.b, body=PLAN).status == "executed"
    [artifact] = Artifact.objects.filter(room_id=shared_room.room.id)
    assert artifact.shared_with_peer is False
    context = _turn(shared_room, shared_room.a)
    assert context.peer_artifacts == []
    assert PLAN not in context.model_dump_json()
    denials = [d for d in _events(shared_room, "denial") if d["resource_id"] == str(artifact.id)]
    assert [d["rule"] for d in denials] == ["recipient_not_cleared"]
    assert not [d for d in _events(shared_room, "disclosure") if d["item_id"] == str(artifact.id)]


def test_a_slip_that_stops_sharing_is_obeyed_at_the_next_turn_and_the_denial_recorded(
    shared_room: OpenRoom,
) -> None:
    publish(shared_room, shared_room.a, body=PLAN)
    [artifact] = Artifact.objects.filter(room_id=shared_room.room.id)
    assert len(_turn(shared_room, shared_room.b).peer_artifacts) == 1
    # Alice signs a new slip that keeps her agent's documents with the owners.
    _resign(shared_room.a, shared_room, [publish_record("own_agent")])

    context = _turn(shared_room, shared_room.b)

    assert context.peer_artifacts == [] and PLAN not in context.model_dump_json()
    denials = [d for d in _events(shared_room, "denial") if d["resource_id"] == str(artifact.id)]
    assert denials and denials[-1]["subject_id"] == str(shared_room.a.agent.id)
    assert len([d for d in _events(shared_room, "disclosure") if d["turn"] == context.turn]) == 0
    assert Room.objects.get(id=shared_room.room.id).state == RoomState.OPEN  # a denial, no pause


def test_the_publishers_own_agent_does_not_get_its_own_back(shared_room: OpenRoom) -> None:
    publish(shared_room, shared_room.a, body=PLAN)
    before = LedgerEvent.objects.filter(room_id=shared_room.room.id).count()
    context = _turn(shared_room, shared_room.a)
    assert context.peer_artifacts == [] and PLAN not in context.model_dump_json()
    # Nothing was decided for it, so nothing was recorded about it.
    assert LedgerEvent.objects.filter(room_id=shared_room.room.id).count() == before


def test_a_failing_check_pauses_the_room_and_the_turn_discloses_nothing(
    budget_room: OpenRoom, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish(budget_room, budget_room.a, body=PLAN)
    assert len(_turn(budget_room, budget_room.b).peer_items) == 1  # the budget, while it works
    disclosed = len(_events(budget_room, "disclosure"))

    def broken(**_: Any) -> Any:
        raise RuntimeError("slip store down")

    monkeypatch.setattr(sharing, "capability_verdict", broken)
    context = _turn(budget_room, budget_room.b)

    assert context.peer_artifacts == [] and context.peer_items == []
    assert PLAN not in context.model_dump_json()
    assert any("paused" in notice and "gatekeeper.error" in notice for notice in context.notices)
    assert Room.objects.get(id=budget_room.room.id).state == RoomState.PAUSED
    # The budget's disclosure of this turn rolled back with the rest: nothing was recorded.
    assert len(_events(budget_room, "disclosure")) == disclosed
    assert ledger_verify_room(room_id=budget_room.room.id).ok


def test_an_artifact_that_cannot_be_opened_is_a_failed_check(
    shared_room: OpenRoom, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish(shared_room, shared_room.a, body=PLAN)

    def unreadable(**_: Any) -> Any:
        raise ValueError("sealed blob damaged")

    monkeypatch.setattr(delivery_module, "artifact_open", unreadable)
    context = _turn(shared_room, shared_room.b)
    assert context.peer_artifacts == []
    assert Room.objects.get(id=shared_room.room.id).state == RoomState.PAUSED
    assert not _events(shared_room, "disclosure")


def test_an_unrecordable_delivery_delivers_nothing_and_pauses(
    budget_room: OpenRoom, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish(budget_room, budget_room.a, body=PLAN)

    def ledger_down(**_: Any) -> Any:
        raise LedgerAppendError("ledger down")

    monkeypatch.setattr(delivery_module, "ledger_append_many", ledger_down)
    context = _turn(budget_room, budget_room.b)
    assert context.peer_artifacts == [] and context.peer_items == []
    assert Room.objects.get(id=budget_room.room.id).state == RoomState.PAUSED
    assert not _events(budget_room, "disclosure")  # the vault's batch rolled back too


def test_a_paused_room_delivers_no_artifact(shared_room: OpenRoom) -> None:
    publish(shared_room, shared_room.a, body=PLAN)
    services.room_transition(
        owner=shared_room.a.owner, room_id=shared_room.room.id, to=RoomState.PAUSED
    )
    paused = _events(shared_room, "room_paused")
    denials = _events(shared_room, "denial")
    for _ in range(3):
        context = _turn(shared_room, shared_room.b)
        assert context.peer_artifacts == [] and PLAN not in context.model_dump_json()
        assert any("paused" in notice for notice in context.notices)
    # The pause is recorded once, when it happened; the turns add no denial per artifact.
    assert len(paused) == 1 and _events(shared_room, "denial") == denials
    assert _events(shared_room, "room_paused") == paused
    [artifact] = Artifact.objects.filter(room_id=shared_room.room.id)
    assert all(d["resource_id"] != str(artifact.id) for d in denials)


def _spy_delivery(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the statements ``artifacts_for_agent`` makes, call by call."""
    counts: list[int] = []
    real = delivery_module.artifacts_for_agent

    def counted(**kwargs: Any) -> Any:
        with CaptureQueriesContext(connection) as captured:
            result = real(**kwargs)
        counts.append(len(captured))
        return result

    monkeypatch.setattr(delivery_module, "artifacts_for_agent", counted)
    return counts


@pytest.mark.django_db(transaction=True)
def test_no_shared_artifact_costs_no_statement_and_some_are_counted_apart(
    budget_room: OpenRoom, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turn's own budget (tests/rooms/test_context_statements.py) holds with artifacts:
    whether there is any to decide is a column of the facts statement, and what deciding
    them costs is ``artifacts_for_agent``'s own, counted apart (like the signed head)."""
    calls = _spy_delivery(monkeypatch)
    publish(budget_room, budget_room.b, body=PLAN)  # Bob's: kept with the owners
    publish(budget_room, budget_room.a, body=PLAN, client_id="publish-a-1")

    # Alice's agent: the only shared artifact is its own, so there is nothing to decide.
    _turn(budget_room, budget_room.a)
    assert calls == []

    for published in (1, 4):
        while (
            Artifact.objects.filter(publisher_agent_id=budget_room.a.agent.id).count() < published
        ):
            n = Artifact.objects.count()
            publish(budget_room, budget_room.a, body=f"{PLAN} {n}", client_id=f"publish-a-{n}")
        with CaptureQueriesContext(connection) as captured:
            context = _turn(budget_room, budget_room.b)
        assert len(context.peer_artifacts) == published and len(context.peer_items) == 1
        sql = [q["sql"] for q in captured.captured_queries]
        heads = sum('INSERT INTO "ledger_signedhead"' in s for s in sql)
        assert len(captured) - calls[-1] - heads <= MAX_STATEMENTS, "\n".join(sql)
    # Deciding and recording them is set-based too: four cost what one does.
    assert len(calls) == 2 and calls[0] == calls[1], calls


def test_the_protocol_names_exactly_the_allowed_media_types() -> None:
    literal = PeerArtifact.model_fields["media_type"].annotation
    assert set(get_args(literal)) == set(MediaType.values)


def test_the_sdk_decodes_the_frame_into_the_packages_own_class(shared_room: OpenRoom) -> None:
    publish(shared_room, shared_room.a, body=PLAN)
    sent = _turn(shared_room, shared_room.b).model_dump(mode="json")
    received = TurnContext.from_body(sent)
    assert SdkPeerArtifact is PeerArtifact
    [artifact] = received.peer_artifacts
    assert isinstance(artifact, PeerArtifact) and PLAN in artifact.fenced
    # An agent built before artifacts existed still decodes a context without the field.
    sent.pop("peer_artifacts")
    assert TurnContext.from_body(sent).peer_artifacts == []


@pytest.mark.parametrize(
    ("alice_onward", "bob_onward", "tier", "uses", "expected"),
    [
        (True, True, None, 5, True),  # both owners let documents leave, Collaborative
        (False, True, None, 5, False),  # the publisher's slip keeps them in the room
        (True, False, None, 5, False),  # the reader's owner's rule is narrower: it wins
        (True, True, "room_only", 5, False),  # Room Only keeps everything in the room
        (True, True, None, 1, False),  # uses spent by publishing: shared, not let out
    ],
    ids=["both-out", "publisher-keeps", "reader-keeps", "room-only", "uses-spent"],
)
def test_a_shared_artifact_says_whether_it_may_leave_the_room(
    make_open_room: Callable[..., OpenRoom],
    alice_onward: bool,
    bob_onward: bool,
    tier: str | None,
    uses: int,
    expected: bool,
) -> None:
    """``onward_disclosure`` on a peer artifact is the sharing decision's own record (the
    publisher's slip, the other owner's rule for the same tool, the tier), decided with the
    share at each turn and typed beside the block, as on a cleared item."""
    room = make_open_room()
    seat_slip_sign(
        room.a,
        room.room.id,
        [publish_record("both", onward_disclosure=alice_onward, max_uses=uses)],
    )
    seat_slip_sign(
        room.b, room.room.id, [publish_record("own_agent", onward_disclosure=bob_onward)]
    )
    if tier is not None:
        slip_services.tier_choose(owner=room.b.owner, room_id=room.room.id, tier=tier)  # type: ignore[arg-type]
    assert publish(room, room.a, body=PLAN).status == "executed"
    [given] = _turn(room, room.b).peer_artifacts
    assert given.onward_disclosure is expected
    if tier is None and uses > 1:  # the tier is read live: Room Only takes it back at once
        slip_services.tier_choose(owner=room.b.owner, room_id=room.room.id, tier="room_only")  # type: ignore[arg-type]
        [again] = _turn(room, room.b).peer_artifacts
        assert again.onward_disclosure is False

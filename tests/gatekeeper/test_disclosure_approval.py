"""A slip item with approval ``per_use`` ("ask me before each use") is asked for, through the
room, the first time an agent's context needs it; the owner's signed approval discloses it
once, on the recipient's next turn; the turn after asks again. Every approval that is not
exactly the owner's, for exactly that use, under the slip in force, discloses nothing."""

from __future__ import annotations

import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
import rfc8785
from django.db import connections
from django.test import Client
from django.utils import timezone

from gatekeeper.grants import grant_payload, grant_signed_bytes, grants_expire
from gatekeeper.records import Grant, GrantKind, GrantStatus
from ledger.models import LedgerEvent
from rooms import forks, services
from rooms.context import AWAITING_PEER_NOTICE, context_for_agent
from rooms.errors import InvalidState, NotFound
from rooms.models import Room, RoomState
from slips import services as slip_services
from slips import vault
from slips.canonical import GRANT_TAG
from slips.models import SlipCapability
from slips.signatures import b64url_encode
from tests.slips.conftest import Device, canonical_text, enroll, seat_slip_sign, slip_payload

pytestmark = pytest.mark.django_db

CONTENT = "lupin"  # in Alice's allergies: must reach Bob's agent only when she approved


def allergies_per_use(**extra: Any) -> dict[str, Any]:
    return {
        "resource": "allergies",
        "operation": "disclose",
        "recipient": "peer_agent",
        "scope": "list",
        "approval": "per_use",
        "max_uses": 5,
        **extra,
    }


class Scene:
    """Alice's slip lets Bob's agent see her allergies, asking her before each use."""

    def __init__(self, setup: Any, *, holds_item: bool = True) -> None:
        self.setup = setup
        self.room = setup.room
        self.alice, self.bob = setup.a.owner, setup.b.owner
        if holds_item:
            vault.vault_item_create(
                owner=self.alice, content={"kind": "allergies", "items": ["sesame", CONTENT]}
            )
        self.key, self.device = seat_slip_sign(setup.a, self.room.id, [allergies_per_use()])
        self.resigned = 0

    def bob_turn(self) -> Any:
        return context_for_agent(room_id=self.room.id, agent_id=self.setup.b.agent.id)

    def resign(self, capabilities: list[dict[str, Any]] | None = None) -> None:
        """Alice signs a new slip (a second later than the one in force), replacing it."""
        self.resigned += 1
        self.key, self.device = enroll(self.alice, label=f"device {self.resigned}")
        text = canonical_text(
            slip_payload(
                owner=self.alice,
                room_id=self.room.id,
                agent_id=self.setup.a.agent.id,
                key=self.key,
                capabilities=capabilities or [allergies_per_use()],
                issued_at=int(time.time()) + self.resigned,
            )
        )
        slip_services.slip_submit(
            owner=self.alice,
            room_id=self.room.id,
            seated_agent_id=self.setup.a.agent.id,
            payload=text,
            signature=self.device.sign(text),
        )

    def grants(self, **filters: Any) -> list[Grant]:
        return list(
            Grant.objects.filter(kind=GrantKind.DISCLOSURE, room_id=self.room.id, **filters)
        )

    def pending(self) -> Grant:
        [grant] = self.grants(status=GrantStatus.PENDING)
        return grant

    def decide(self, grant: Grant, *, approve: bool = True, **overrides: Any) -> Any:
        arguments: dict[str, Any] = {
            "owner": self.alice,
            "room_id": self.room.id,
            "grant_id": grant.id,
            "approve": approve,
            "key_id": self.key.id if approve else None,
            "signature": self.device.sign_grant(grant) if approve else "",
        }
        return forks.grant_decide(**{**arguments, **overrides})

    def uses_left(self) -> int:
        return (
            SlipCapability.objects.filter(
                slip__owner=self.alice, slip__superseded_at__isnull=True, resource="allergies"
            )
            .values_list("uses_left", flat=True)
            .get()
        )

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [
            e.data
            for e in LedgerEvent.objects.filter(room_id=self.room.id, kind=kind).order_by("seq")
        ]


@pytest.fixture
def scene(make_open_room) -> Scene:
    return Scene(make_open_room())


def shown(context: Any) -> list[Any]:
    return [item for item in context.peer_items if item.resource == "allergies"]


# --- asking ---------------------------------------------------------------------------------


def test_the_item_is_asked_for_once_across_turns_and_not_shown_meanwhile(scene: Scene) -> None:
    turns = [scene.bob_turn() for _ in range(3)]
    assert all(shown(t) == [] for t in turns)
    assert all(CONTENT not in t.model_dump_json() for t in turns)
    # Bob's agent is told, in words that name nothing of Alice's, that something waits.
    assert all(AWAITING_PEER_NOTICE in t.notices for t in turns)
    grant = scene.pending()  # one request, not one per turn
    assert (grant.owner, grant.recipient_agent_id, grant.resource, grant.scope) == (
        scene.alice,
        scene.setup.b.agent.id,
        "allergies",
        "list",
    )
    assert scene.events("grant_requested") == [
        {"grant_id": str(grant.id), "action_id": None, "owner_id": str(scene.alice.pk)}
    ]
    # Waiting for a disclosure does not pause the room, and no use was spent.
    assert Room.objects.get(id=scene.room.id).state == RoomState.OPEN
    assert scene.events("room_paused") == [] and scene.events("fork_opened") == []
    assert scene.uses_left() == 5


def test_the_owner_sees_the_request_in_words_and_the_other_owner_does_not(scene: Scene) -> None:
    scene.bob_turn()
    alice, bob = Client(), Client()
    alice.force_login(scene.alice)
    bob.force_login(scene.bob)
    response = alice.get(f"/api/rooms/{scene.room.id}/grants")
    assert response.status_code == 200
    [request] = response.json()
    assert request["kind"] == "disclosure" and request["action_id"] is None
    assert (request["resource"], request["scope"], request["recipient"]) == (
        "allergies",
        "list",
        "peer_agent",
    )
    assert request["summary"] == (
        "Let the other owner's agent see your allergies (the whole list), once, on its next turn."
    )
    assert request["payload"] == {
        "decision": "approve",
        "kind": "disclosure",
        "grant_id": request["grant_id"],
        "room_id": str(scene.room.id),
        "owner_id": str(scene.alice.pk),
        "recipient_agent_id": str(scene.setup.b.agent.id),
        "resource": "allergies",
        "scope": "list",
        "slip_id": str(scene.pending().slip_id),
        "expires_at": int(scene.pending().expires_at.timestamp()),
    }
    assert CONTENT not in response.content.decode()  # what, never the content
    assert bob.get(f"/api/rooms/{scene.room.id}/grants").json() == []


def test_the_owner_approves_in_the_page_through_the_grants_api(scene: Scene) -> None:
    scene.bob_turn()
    grant = scene.pending()
    alice = Client()
    alice.force_login(scene.alice)
    url = f"/api/rooms/{scene.room.id}/grants/{grant.id}"
    body = {"decision": "approve", "key_id": str(scene.key.id), "signature": "A" * 86}
    refused = alice.post(url, body, content_type="application/json")
    assert (refused.status_code, refused.json()["status"], refused.json()["rule"]) == (
        200,
        "pending",
        "grant_bad_signature",
    )
    body["signature"] = scene.device.sign_grant(grant)
    approved = alice.post(url, body, content_type="application/json").json()
    assert (approved["action_id"], approved["status"], approved["rule"]) == (
        None,
        "approved",
        "granted",
    )
    assert alice.post(url, body, content_type="application/json").status_code == 409
    assert alice.get(f"/api/rooms/{scene.room.id}/grants").json() == []  # nothing waits
    assert len(shown(scene.bob_turn())) == 1


def test_whether_the_owner_is_asked_does_not_depend_on_their_vault(make_open_room) -> None:
    holds, lacks = Scene(make_open_room()), Scene(make_open_room(prefix="x"), holds_item=False)
    for _ in range(2):
        with_item, without = holds.bob_turn(), lacks.bob_turn()
        assert with_item.notices == without.notices
        assert len(holds.grants()) == len(lacks.grants()) == 1
    # Approved with nothing to show: nothing is shown, no use is spent, the approval waits.
    lacks.decide(lacks.pending())
    assert shown(lacks.bob_turn()) == [] and lacks.uses_left() == 5
    assert [g.status for g in lacks.grants()] == [GrantStatus.APPROVED]


def test_the_owners_own_agent_is_told_which_of_its_items_wait(make_open_room) -> None:
    setup = make_open_room()
    vault.vault_item_create(owner=setup.b.owner, content={"kind": "note", "text": "private"})
    key, device = seat_slip_sign(setup.b, setup.room.id, [{"resource": "note"}])  # read, per use
    own = context_for_agent(room_id=setup.room.id, agent_id=setup.b.agent.id)
    assert own.own_items == []
    assert "Waiting for your owner's approval, so not included this turn: note." in own.notices
    [grant] = Grant.objects.filter(kind=GrantKind.DISCLOSURE, room_id=setup.room.id)
    assert (grant.owner, grant.recipient, grant.recipient_agent_id) == (
        setup.b.owner,
        "own_agent",
        setup.b.agent.id,
    )
    # Alice's agent hears nothing about Bob's own items.
    theirs = context_for_agent(room_id=setup.room.id, agent_id=setup.a.agent.id)
    assert AWAITING_PEER_NOTICE not in theirs.notices and "note" not in " ".join(theirs.notices)
    forks.grant_decide(
        owner=setup.b.owner,
        room_id=setup.room.id,
        grant_id=grant.id,
        approve=True,
        key_id=key.id,
        signature=device.sign_grant(grant),
    )
    [item] = context_for_agent(room_id=setup.room.id, agent_id=setup.b.agent.id).own_items
    assert item.content == {"text": "private"} or "private" in json.dumps(item.content)


def test_nothing_is_asked_while_the_room_is_paused(scene: Scene) -> None:
    services.room_transition(owner=scene.alice, room_id=scene.room.id, to=RoomState.PAUSED)
    turn = scene.bob_turn()
    assert scene.grants() == [] and AWAITING_PEER_NOTICE not in turn.notices


# --- approving and denying ------------------------------------------------------------------


def test_approval_discloses_once_on_the_next_turn_and_the_turn_after_asks_again(
    scene: Scene,
) -> None:
    scene.bob_turn()
    grant = scene.pending()
    result = scene.decide(grant)
    assert (result.status, result.rule) == ("approved", "granted")
    assert Room.objects.get(id=scene.room.id).state == RoomState.OPEN
    assert scene.events("disclosure") == []  # approving alone shows nothing

    turn = scene.bob_turn()
    [item] = shown(turn)
    assert sorted(item.content["items"]) == sorted(["sesame", CONTENT])
    assert AWAITING_PEER_NOTICE not in turn.notices
    grant.refresh_from_db()
    assert grant.status == GrantStatus.CONSUMED and grant.consumed_at is not None
    assert scene.uses_left() == 4  # the slip's use is spent as usual
    [disclosure] = scene.events("disclosure")
    assert (disclosure["recipient_agent_id"], disclosure["turn"]) == (
        str(scene.setup.b.agent.id),
        turn.turn,
    )

    after = scene.bob_turn()  # per use: the next use is asked for again
    assert shown(after) == [] and AWAITING_PEER_NOTICE in after.notices
    assert scene.pending().id != grant.id
    assert len(scene.events("disclosure")) == 1 and scene.uses_left() == 4


def test_a_denial_is_remembered_until_the_owner_signs_a_new_slip(scene: Scene) -> None:
    scene.bob_turn()
    result = scene.decide(scene.pending(), approve=False)
    assert (result.status, result.rule) == ("denied", "grant_denied")
    for _ in range(3):
        turn = scene.bob_turn()
        assert shown(turn) == [] and AWAITING_PEER_NOTICE not in turn.notices
    assert [g.status for g in scene.grants()] == [GrantStatus.DENIED]  # no nagging
    assert Room.objects.get(id=scene.room.id).state == RoomState.OPEN
    [denied] = scene.events("grant_denied")
    assert denied["action_id"] is None and denied["reason"] == "owner_denied"

    scene.resign()  # a new slip: Alice may be asked again
    scene.bob_turn()
    assert scene.pending().slip_id != scene.grants(status=GrantStatus.DENIED)[0].slip_id


def test_an_expired_request_is_asked_again_on_a_later_turn(scene: Scene) -> None:
    scene.bob_turn()
    first = scene.pending()
    Grant.objects.filter(id=first.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert grants_expire() == 1
    first.refresh_from_db()
    assert first.status == GrantStatus.EXPIRED
    assert scene.events("grant_expired") == [{"grant_id": str(first.id), "action_id": None}]
    assert scene.events("fork_resolved") == []  # no fork was opened for it
    scene.bob_turn()
    assert scene.pending().id != first.id


def test_an_approval_no_turn_used_in_time_expires_unused(scene: Scene) -> None:
    scene.bob_turn()
    grant = scene.pending()
    scene.decide(grant)
    Grant.objects.filter(id=grant.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert grants_expire() == 1
    assert shown(scene.bob_turn()) == [] and scene.uses_left() == 5


# --- approvals that must disclose nothing ---------------------------------------------------


def assert_nothing_disclosed(scene: Scene) -> None:
    turn = scene.bob_turn()
    assert shown(turn) == [] and CONTENT not in turn.model_dump_json()
    assert scene.events("disclosure") == [] and scene.uses_left() == 5


def test_a_forged_signature_is_refused(scene: Scene) -> None:
    scene.bob_turn()
    grant = scene.pending()
    forged = Device().sign_grant(grant)  # a key that is not Alice's, under her key's id
    result = scene.decide(grant, signature=forged)
    assert (result.status, result.rule) == ("pending", "grant_bad_signature")
    assert scene.events("grant_approved") == []
    assert_nothing_disclosed(scene)


@pytest.mark.parametrize(
    "field, value",
    [
        ("recipient_agent_id", "other-agent"),
        ("resource", "budget"),
        ("scope", "range"),
        ("room_id", "other-room"),
        ("owner_id", "other-owner"),
        ("slip_id", "other-slip"),
        ("expires_at", 4_102_444_800),
        ("kind", "action"),
    ],
)
def test_a_signature_over_any_other_payload_is_refused(
    scene: Scene, field: str, value: Any
) -> None:
    scene.bob_turn()
    grant = scene.pending()
    altered = {**grant_payload(grant), field: value}
    signature = b64url_encode(
        scene.device.signing_key.sign(GRANT_TAG + rfc8785.dumps(altered)).signature
    )
    assert scene.decide(grant, signature=signature).rule == "grant_bad_signature"
    assert_nothing_disclosed(scene)


def test_a_replayed_approval_discloses_nothing_more(scene: Scene) -> None:
    scene.bob_turn()
    grant = scene.pending()
    signature = scene.device.sign_grant(grant)
    scene.decide(grant, signature=signature)
    assert len(shown(scene.bob_turn())) == 1
    with pytest.raises(InvalidState):
        scene.decide(grant, signature=signature)  # the same approval again
    # ... nor for the next use's request: the signature covers one grant id.
    assert shown(scene.bob_turn()) == []
    following = scene.pending()
    assert scene.decide(following, signature=signature).rule == "grant_bad_signature"
    assert shown(scene.bob_turn()) == [] and len(scene.events("disclosure")) == 1


def test_approving_twice_discloses_once(scene: Scene) -> None:
    scene.bob_turn()
    grant = scene.pending()
    scene.decide(grant)
    with pytest.raises(InvalidState) as again:
        scene.decide(grant)  # the second click finds it approved already
    assert again.value.message == (
        "This request was already answered: approved, and the item is shared once, on the "
        "agent's next turn. Nothing more to do."
    )
    assert len(shown(scene.bob_turn())) == 1 and len(scene.events("grant_approved")) == 1
    assert len(scene.events("disclosure")) == 1 and scene.uses_left() == 4


@pytest.mark.django_db(transaction=True)
def test_two_approvals_and_two_turns_at_once_disclose_once(make_open_room) -> None:
    scene = Scene(make_open_room())
    scene.bob_turn()
    grant = scene.pending()
    signature = scene.device.sign_grant(grant)
    barrier = threading.Barrier(2)

    def approve(_: int) -> str:
        try:
            barrier.wait(timeout=30)
            try:
                return str(scene.decide(grant, signature=signature).status)
            except InvalidState:
                return "refused"
        finally:
            connections.close_all()

    def turn(_: int) -> int:
        try:
            barrier.wait(timeout=30)
            return len(shown(scene.bob_turn()))
        finally:
            connections.close_all()

    with ThreadPoolExecutor(2) as pool:
        assert sorted(pool.map(approve, range(2))) == ["approved", "refused"]
        assert sorted(pool.map(turn, range(2))) == [0, 1]
    assert len(scene.events("grant_approved")) == 1 and len(scene.events("disclosure")) == 1
    assert scene.uses_left() == 4


def test_an_expired_request_cannot_be_approved(scene: Scene) -> None:
    scene.bob_turn()
    grant = scene.pending()
    Grant.objects.filter(id=grant.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    grant.refresh_from_db()
    result = scene.decide(grant)
    assert (result.status, result.rule) == ("expired", "grant_expired")
    assert_nothing_disclosed(scene)


def test_an_approval_for_another_room_or_by_another_owner_is_not_found(
    scene: Scene, make_open_room
) -> None:
    scene.bob_turn()
    grant = scene.pending()
    elsewhere = make_open_room(prefix="y")
    with pytest.raises(NotFound):
        scene.decide(grant, room_id=elsewhere.room.id)
    bob_key, bob_device = enroll(scene.bob)
    with pytest.raises(NotFound):
        scene.decide(
            grant, owner=scene.bob, key_id=bob_key.id, signature=bob_device.sign_grant(grant)
        )
    assert scene.grants()[0].status == GrantStatus.PENDING
    assert_nothing_disclosed(scene)


def test_an_approval_signed_with_a_revoked_key_is_refused(scene: Scene) -> None:
    scene.bob_turn()
    grant = scene.pending()
    second, device = enroll(scene.alice, label="phone")  # not the key her slip is signed with
    slip_services.key_revoke(owner=scene.alice, key_id=second.id)
    result = scene.decide(grant, key_id=second.id, signature=device.sign_grant(grant))
    assert result.rule == "grant_key_not_usable"
    assert_nothing_disclosed(scene)


def test_an_approval_whose_key_is_revoked_before_use_discloses_nothing(scene: Scene) -> None:
    scene.bob_turn()
    grant = scene.pending()
    second, device = enroll(scene.alice, label="phone")
    scene.decide(grant, key_id=second.id, signature=device.sign_grant(grant))
    slip_services.key_revoke(owner=scene.alice, key_id=second.id)
    assert_nothing_disclosed(scene)
    grant.refresh_from_db()
    assert grant.status == GrantStatus.EXPIRED
    assert {"rule": "grant_key_not_usable"}.items() <= scene.events("denial")[-1].items()


def test_an_approval_edited_after_signing_discloses_nothing(scene: Scene) -> None:
    scene.bob_turn()
    grant = scene.pending()
    scene.decide(grant)
    # Someone with database access stretches the deadline: the signature no longer covers it.
    Grant.objects.filter(id=grant.id).update(expires_at=grant.expires_at + timedelta(days=1))
    assert_nothing_disclosed(scene)
    assert scene.events("denial")[-1]["rule"] == "grant_bad_signature"


def test_approving_after_the_slip_was_replaced_discloses_nothing(scene: Scene) -> None:
    scene.bob_turn()
    old = scene.pending()
    old_signature = scene.device.sign_grant(old)
    old_key = scene.key
    scene.resign()
    result = scene.decide(old, key_id=old_key.id, signature=old_signature)
    assert (result.status, result.rule) == ("expired", "grant_slip_changed")
    assert_nothing_disclosed(scene)
    assert scene.pending().id != old.id  # asked again, under the new slip


def test_replacing_the_slip_after_approval_discloses_nothing(scene: Scene) -> None:
    scene.bob_turn()
    grant = scene.pending()
    scene.decide(grant)
    scene.resign()
    assert_nothing_disclosed(scene)
    grant.refresh_from_db()
    assert grant.status == GrantStatus.EXPIRED and scene.pending().id != grant.id


def test_revoking_the_slips_key_after_approval_discloses_nothing(scene: Scene) -> None:
    scene.bob_turn()
    grant = scene.pending()
    scene.decide(grant)
    slip_services.key_revoke(owner=scene.alice, key_id=scene.key.id)
    turn = scene.bob_turn()
    assert shown(turn) == [] and scene.events("disclosure") == []


def test_a_slip_that_drops_the_approval_rule_clears_the_item_without_asking(
    scene: Scene,
) -> None:
    scene.bob_turn()
    scene.resign([allergies_per_use(approval="none")])
    assert len(shown(scene.bob_turn())) == 1


def test_a_closed_room_takes_no_approval(scene: Scene) -> None:
    scene.bob_turn()
    grant = scene.pending()
    services.room_transition(owner=scene.alice, room_id=scene.room.id, to=RoomState.CLOSED)
    with pytest.raises(InvalidState):
        scene.decide(grant)
    assert Grant.objects.get(id=grant.id).status == GrantStatus.PENDING


def test_an_approval_in_a_paused_room_leaves_it_paused(scene: Scene) -> None:
    scene.bob_turn()
    grant = scene.pending()
    services.room_transition(owner=scene.alice, room_id=scene.room.id, to=RoomState.PAUSED)
    scene.decide(grant)
    assert Room.objects.get(id=scene.room.id).state == RoomState.PAUSED
    assert shown(scene.bob_turn()) == []  # nothing is disclosed in a paused room
    services.room_transition(owner=scene.alice, room_id=scene.room.id, to=RoomState.OPEN)
    assert len(shown(scene.bob_turn())) == 1


# --- the ledger -----------------------------------------------------------------------------


def test_the_ledger_records_request_and_decision_without_content(scene: Scene) -> None:
    scene.bob_turn()
    first = scene.pending()
    scene.decide(first)
    scene.bob_turn()
    scene.bob_turn()
    scene.decide(scene.pending(), approve=False)
    kinds = list(
        LedgerEvent.objects.filter(room_id=scene.room.id)
        .order_by("seq")
        .values_list("kind", flat=True)
    )
    # Request, signed approval, the one disclosure (one allergies item), and for the next
    # use a new request and its denial; nothing paused the room.
    assert kinds[kinds.index("grant_requested") :] == [
        "grant_requested",
        "grant_approved",
        "disclosure",
        "grant_requested",
        "grant_denied",
    ]
    [approved] = scene.events("grant_approved")
    assert approved["action_id"] is None and approved["key_id"] == str(scene.key.id)
    every = json.dumps([e.data for e in LedgerEvent.objects.filter(room_id=scene.room.id)])
    assert CONTENT not in every and "sesame" not in every
    assert "allergies" not in every  # what was asked stays with the owner who was asked


def test_the_signed_bytes_are_kept_with_the_approval(scene: Scene) -> None:
    scene.bob_turn()
    grant = scene.pending()
    scene.decide(grant)
    grant.refresh_from_db()
    assert b"synapsia-grant-v1\n" + bytes(grant.payload) == grant_signed_bytes(grant)
    assert grant.key_id == scene.key.id and len(bytes(grant.signature)) == 64


def test_an_unknown_grant_id_is_not_found(scene: Scene) -> None:
    with pytest.raises(NotFound):
        forks.grant_decide(
            owner=scene.alice, room_id=scene.room.id, grant_id=uuid.uuid4(), approve=False
        )

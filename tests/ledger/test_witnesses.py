"""Heads witnessed outside the database (issue 13): an owner's device key countersigns a
server-signed head, and every verifier takes it as a checkpoint history must extend, even
against a writer who holds the database *and* the server's signing key.

Adversarial: forged countersignatures, a revoked, rotated-away or server-held key, another
owner's key, a head of another room or one the server never signed, a replayed witness, a
tampered stored witness, a rewrite below a witnessed head that the server key re-signed, and
witness rows deleted (which the server alone cannot see; an export kept earlier can).
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import pytest
from django.core.management import call_command
from django.db import transaction
from django.test import Client
from django.utils import timezone
from nacl.signing import SigningKey

from ledger import verify_export
from ledger.chain import witness_signed_bytes
from ledger.events import Join
from ledger.models import HeadWitness, LedgerEvent, LedgerHead, SignedHead
from ledger.receipts import receipt_export
from ledger.services import ledger_append
from ledger.signing import ledger_public_key, ledger_sign_head, sign_locked_head
from ledger.verification import ledger_verify_all, ledger_verify_room
from ledger.witnesses import WitnessClaim, ledger_witness_record, signature_decode
from rooms import services as room_services
from slips.models import DeviceKey, KeyCustody
from tests.ledger.conftest import append_events
from tests.ledger.test_rewrite_attacks import _forge, _joins

pytestmark = pytest.mark.django_db


@dataclass
class Device:
    """An owner's enrolled device key; the private half stays in the test (the 'device')."""

    owner: Any
    key: SigningKey
    row: DeviceKey


def _device(owner: Any, **fields: Any) -> Device:
    key = SigningKey.generate()
    row = DeviceKey.objects.create(
        owner=owner, label="Test device", public_key=bytes(key.verify_key), **fields
    )
    return Device(owner, key, row)


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _payload(
    device: Device,
    head: SignedHead,
    *,
    room_id: UUID | None = None,
    key_id: str | None = None,
    owner_id: str | None = None,
    signer: SigningKey | None = None,
    seq: int | None = None,
) -> dict[str, Any]:
    """What the browser posts: the head and the device key's signature over the witness
    bytes. The keyword arguments let a test sign something other than it claims."""
    message = witness_signed_bytes(
        room_id=room_id or head.room_id,
        seq=seq if seq is not None else head.seq,
        head_hash=head.hash,
        signed_at=head.signed_at,
        owner_id=owner_id or str(device.owner.pk),
        key_id=key_id or str(device.row.id),
    )
    signature = (signer or device.key).sign(message).signature
    return {
        "seq": head.seq,
        "hash": head.hash,
        "signed_at": head.signed_at,
        "key_id": key_id or str(device.row.id),
        "signature": _b64url(signature),
    }


def _post(owner: Any, room_id: UUID, body: dict[str, Any]) -> Any:
    client = Client()
    client.force_login(owner)
    return client.post(
        f"/api/rooms/{room_id}/ledger/witnesses", data=body, content_type="application/json"
    )


def _export(room_id: UUID) -> dict[str, Any]:
    return json.loads(json.dumps(receipt_export(room_id)))


@pytest.fixture
def witnessed_room(make_open_room) -> tuple[Any, Device, SignedHead]:
    """An open room with a signed head at its tip, which Alice's device witnessed."""
    opened = make_open_room()
    append_events(opened.room.id, 6)
    head = ledger_sign_head(room_id=opened.room.id)
    alice = _device(opened.a.owner)
    response = _post(opened.a.owner, opened.room.id, _payload(alice, head))
    assert response.status_code == 201, response.content
    return opened, alice, head


def test_an_owner_witnesses_a_signed_head_and_every_verifier_holds_it(witnessed_room) -> None:
    opened, alice, head = witnessed_room
    stored = HeadWitness.objects.get(room_id=opened.room.id)
    assert (stored.seq, stored.hash, stored.key_id) == (head.seq, head.hash, str(alice.row.id))

    # Both owners see it; the one who made it is told so (the page words it, not the API).
    for owner, by_you in ((opened.a.owner, True), (opened.b.owner, False)):
        client = Client()
        client.force_login(owner)
        page = client.get(f"/api/rooms/{opened.room.id}/ledger").json()
        [witness] = page["witnesses"]
        assert (witness["seq"], witness["by_you"], witness["owner_name"]) == (
            head.seq,
            by_you,
            "alice",
        )
    assert ledger_verify_room(room_id=opened.room.id).ok
    summary = verify_export.verify(_export(opened.room.id), pinned_key=ledger_public_key())
    assert "1 owner witness(es)" in summary
    call_command("verify_ledger")  # exits 0


def test_forged_countersignatures_are_refused(make_open_room) -> None:
    opened = make_open_room()
    append_events(opened.room.id, 3)
    head = ledger_sign_head(room_id=opened.room.id)
    alice = _device(opened.a.owner)
    forged = [
        _payload(alice, head, signer=SigningKey.generate()),  # not her key's signature
        _payload(alice, head, seq=head.seq - 1),  # signed another number than it claims
        _payload(alice, head, owner_id=str(opened.b.owner.pk)),  # signed as someone else
        {**_payload(alice, head), "signature": _b64url(b"\x00" * 64)},
        {**_payload(alice, head), "signature": "not base64 at all!"},
    ]
    for body in forged:
        response = _post(opened.a.owner, opened.room.id, body)
        assert response.status_code == 400, body
        assert response.json()["code"] in {"witness_bad_signature", "witness_malformed"}
    # A witness claiming another hash at the head's number: not a head the server signed.
    other = {**_payload(alice, head), "hash": "ab" * 32}
    assert _post(opened.a.owner, opened.room.id, other).status_code == 400
    assert not HeadWitness.objects.exists()


@pytest.mark.parametrize("standing", ["revoked", "rotated", "server-held", "unregistered"])
def test_only_a_live_device_key_may_witness(make_open_room, standing: str) -> None:
    opened = make_open_room()
    append_events(opened.room.id, 3)
    head = ledger_sign_head(room_id=opened.room.id)
    fields = {
        "revoked": {"revoked_at": timezone.now()},
        "rotated": {"retired_at": timezone.now()},
        "server-held": {"custody": KeyCustody.DEMO_SEEDING},
        "unregistered": {},
    }[standing]
    alice = _device(opened.a.owner, **fields)
    body = _payload(alice, head)
    if standing == "unregistered":
        alice.row.delete()
    response = _post(opened.a.owner, opened.room.id, body)
    assert (response.status_code, response.json()["code"]) == (400, "witness_key_unusable")
    assert not HeadWitness.objects.exists()


def test_another_owners_key_cannot_witness_for_you(make_open_room) -> None:
    opened = make_open_room()
    append_events(opened.room.id, 3)
    head = ledger_sign_head(room_id=opened.room.id)
    bob = _device(opened.b.owner)
    # Alice submits a perfectly valid witness made with Bob's key (say she copied it).
    body = _payload(bob, head)
    response = _post(opened.a.owner, opened.room.id, body)
    assert (response.status_code, response.json()["code"]) == (400, "witness_key_unusable")
    # Or signs with her own key but names Bob's: the key is not hers.
    alice = _device(opened.a.owner)
    body = _payload(alice, head, key_id=str(bob.row.id))
    assert _post(opened.a.owner, opened.room.id, body).json()["code"] == "witness_key_unusable"
    # Bob's own submission is accepted, and a stranger to the room gets nothing (404).
    assert _post(opened.b.owner, opened.room.id, _payload(bob, head)).status_code == 201
    stranger = type(opened.a.owner).objects.create_user(username="mallory", password="x" * 12)
    assert _post(stranger, opened.room.id, _payload(bob, head)).status_code == 404


def test_a_head_of_another_room_or_an_unsigned_one_is_refused(make_open_room) -> None:
    one, two = make_open_room(), make_open_room(prefix="two-")
    append_events(one.room.id, 3)
    append_events(two.room.id, 3)
    other_head = ledger_sign_head(room_id=two.room.id)
    alice = _device(one.a.owner)
    # Signed for room two, posted to room one: the signed bytes name room two.
    response = _post(one.a.owner, one.room.id, _payload(alice, other_head))
    assert response.json()["code"] == "witness_bad_signature"
    # Signed for room one with room two's head: room one's server never signed it.
    response = _post(one.a.owner, one.room.id, _payload(alice, other_head, room_id=one.room.id))
    assert response.json()["code"] == "witness_unknown_head"
    # A head of room one the server did not sign (its unsigned tip), however well signed.
    with transaction.atomic():
        tip = ledger_append(
            room_id=one.room.id, event=Join(participant_id="x", participant_kind="agent")
        )
    fake = SignedHead(
        room_id=one.room.id, seq=tip.seq, hash=tip.hash, signed_at=other_head.signed_at
    )
    response = _post(one.a.owner, one.room.id, _payload(alice, fake))
    assert response.json()["code"] == "witness_unknown_head"
    assert not HeadWitness.objects.exists()


def test_a_replayed_witness_stores_nothing_new(witnessed_room) -> None:
    opened, alice, head = witnessed_room
    body = _payload(alice, head)
    again = _post(opened.a.owner, opened.room.id, body)
    assert again.status_code == 200 and again.json()["seq"] == head.seq
    assert HeadWitness.objects.filter(room_id=opened.room.id).count() == 1
    # Replayed into another room she sits in: the signature names this room.
    other = room_services.room_create(owner=opened.a.owner, purpose="Lunch", charter="Lunch.")
    append_events(other.id, 3)
    ledger_sign_head(room_id=other.id)
    response = _post(opened.a.owner, other.id, body)
    assert response.status_code == 400
    assert HeadWitness.objects.count() == 1


@pytest.mark.parametrize(
    "field, value",
    [
        ("seq", 3),
        ("hash", "cd" * 32),
        ("signed_at", "2026-01-01T00:00:00.000000Z"),
        ("owner_id", "999"),
        ("public_key", base64.b64encode(bytes(SigningKey.generate().verify_key)).decode()),
        ("signature", base64.b64encode(b"\x01" * 64).decode()),
    ],
)
def test_a_tampered_stored_witness_is_caught(witnessed_room, field: str, value: Any) -> None:
    opened, _alice, _head = witnessed_room
    HeadWitness.objects.filter(room_id=opened.room.id).update(**{field: value})
    verdict = ledger_verify_room(room_id=opened.room.id)
    assert not verdict.ok and "witness" in verdict.problem, verdict
    assert "invalid signature" in verdict.problem
    assert [v.room_id for v in ledger_verify_all()] == [str(opened.room.id)]
    with pytest.raises(verify_export.Broken, match="witness"):
        verify_export.verify(_export(opened.room.id), pinned_key=ledger_public_key())


def _rewrite_with_the_server_key(room_id: UUID, *, also_sign: int | None = None) -> None:
    """The strongest writer: holds the database and the server's signing key. Rewrites the
    whole history consistently (different events), deletes every signed head and re-signs
    the new chain's tip with the server key, as the append path would have; ``also_sign``:
    a number at which it signs the new chain too (where the owner's witness stands)."""
    LedgerEvent.objects.filter(room_id=room_id).delete()
    count = max(SignedHead.objects.filter(room_id=room_id).values_list("seq", flat=True)) + 2
    SignedHead.objects.filter(room_id=room_id).delete()
    LedgerHead.objects.filter(room_id=room_id).update(seq=0, hash="0" * 64)
    _forge(room_id, _joins(count), after=(0, "0" * 64))
    with transaction.atomic():
        head = LedgerHead.objects.select_for_update().get(room_id=room_id)
        if also_sign is not None:
            event = LedgerEvent.objects.get(room_id=room_id, seq=also_sign)
            sign_locked_head(room_id=room_id, seq=also_sign, head_hash=event.hash, fresh=True)
        sign_locked_head(room_id=room_id, seq=head.seq, head_hash=head.hash, fresh=True)


@pytest.mark.parametrize(
    "at_witness", [False, True], ids=["tip-re-signed", "witnessed-seq-re-signed"]
)
def test_a_rewrite_below_a_witnessed_head_is_caught_though_the_server_key_re_signed_it(
    witnessed_room, at_witness: bool
) -> None:
    opened, _alice, head = witnessed_room
    _rewrite_with_the_server_key(opened.room.id, also_sign=head.seq if at_witness else None)
    # Without the witness the rewrite would pass: the chain and its new heads are consistent.
    verdict = ledger_verify_room(room_id=opened.room.id)
    assert not verdict.ok and "witness" in verdict.problem, verdict
    assert verdict.first_bad_seq == head.seq
    with pytest.raises(verify_export.Broken, match="owner confirmed"):
        verify_export.verify(_export(opened.room.id), pinned_key=ledger_public_key())
    HeadWitness.objects.filter(room_id=opened.room.id).delete()
    assert ledger_verify_room(room_id=opened.room.id).ok  # the witness was the only catch


def test_deleted_witness_rows_the_server_cannot_see_but_an_earlier_export_can(
    witnessed_room,
) -> None:
    opened, _alice, _head = witnessed_room
    kept = _export(opened.room.id)  # the owner downloaded the record after confirming it
    verify_export.verify(kept, pinned_key=ledger_public_key())

    # The writer with both the database and the server key deletes the witness rows and
    # rewrites history under the server key: the server's own check cannot tell.
    HeadWitness.objects.filter(room_id=opened.room.id).delete()
    _rewrite_with_the_server_key(opened.room.id)
    assert ledger_verify_room(room_id=opened.room.id).ok  # what the server alone can say
    now = _export(opened.room.id)
    verify_export.verify(now, pinned_key=ledger_public_key())  # alone, the file looks fine
    with pytest.raises(verify_export.Broken, match="missing from this one"):
        verify_export.verify(now, pinned_key=ledger_public_key(), earlier=[kept])

    # Witness rows deleted with history left alone: nothing was rewritten, but the earlier
    # export still shows a confirmation the database lost.
    fresh = _room_whose_witness_rows_were_deleted(opened)
    with pytest.raises(verify_export.Broken, match="witness rows were deleted"):
        verify_export.verify(fresh[1], pinned_key=ledger_public_key(), earlier=[fresh[0]])


def _room_whose_witness_rows_were_deleted(opened: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    room_id = uuid.uuid4()
    append_events(room_id, 3)
    head = ledger_sign_head(room_id=room_id)
    device = _device(opened.a.owner)
    body = _payload(device, head)
    ledger_witness_record(
        room_id=room_id, owner_id=str(opened.a.owner.pk), key_id=str(device.row.id),
        public_key=bytes(device.key.verify_key),
        claim=WitnessClaim(
            head.seq, head.hash, head.signed_at, signature_decode(body["signature"])
        ),
    )  # fmt: skip
    before = _export(room_id)
    HeadWitness.objects.filter(room_id=room_id).delete()
    return before, _export(room_id)


def test_the_offline_verifier_takes_earlier_exports_on_the_command_line(
    witnessed_room, tmp_path
) -> None:
    opened, _alice, _head = witnessed_room
    old = tmp_path / "old.json"
    old.write_text(json.dumps(_export(opened.room.id)))
    HeadWitness.objects.filter(room_id=opened.room.id).delete()
    new = tmp_path / "new.json"
    new.write_text(json.dumps(_export(opened.room.id)))
    assert verify_export.main([str(new)]) == 0
    assert verify_export.main([str(new), "--earlier", str(old)]) == 1
    assert verify_export.main([str(old), "--earlier", str(old)]) == 0

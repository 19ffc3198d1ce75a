"""Signed slips: every way to forge, replay, tamper or re-bind one is refused and recorded."""

from __future__ import annotations

import base64
import time
import uuid

import pytest
import rfc8785
from django.db import transaction

from ledger.models import LedgerEvent
from slips import services
from slips.errors import Rejected, SlipError
from slips.models import Slip, SlipCapability
from slips.selectors import slip_capabilities
from tests.slips.conftest import Device, canonical_text, enroll

pytestmark = pytest.mark.django_db

AVAILABILITY = {"resource": "availability", "operation": "disclose", "recipient": "peer_agent"}


def _refused(signer, text: str, signature: str, code: str) -> None:
    before = Slip.objects.count()
    with pytest.raises(SlipError) as caught:
        services.slip_submit(
            owner=signer.owner,
            room_id=signer.room_id,
            seated_agent_id=signer.agent_id,
            payload=text,
            signature=signature,
        )
    assert caught.value.code == code, caught.value.message
    assert Slip.objects.count() == before  # nothing half-written
    rejected = LedgerEvent.objects.filter(room_id=signer.room_id, kind="slip_rejected").last()
    assert rejected is not None and rejected.data["reason"] == code


def test_a_signed_slip_is_stored_with_narrowest_defaults(make_signer) -> None:
    signer = make_signer()
    slip = signer.submit(capabilities=[{"resource": "budget"}])
    (cap,) = slip_capabilities(slip=slip)
    assert cap.as_record() == {
        "resource": "budget",
        "operation": "read",
        "scope": "band",  # the rough band, never the exact range, unless the owner says so
        "recipient": "own_agent",
        "expires_at": slip.expires_at,
        "max_uses": 1,
        "onward_disclosure": False,
        "approval": "per_use",
    }
    assert SlipCapability.objects.get(slip=slip).uses_left == 1
    event = LedgerEvent.objects.get(room_id=signer.room_id, kind="slip_signed")
    assert event.data["slip_id"] == str(slip.id) and event.data["capability_count"] == 1


def test_forged_signature(make_signer) -> None:
    signer = make_signer()
    text = canonical_text(signer.payload())
    _refused(signer, text, Device().sign(text), "bad_signature")


def test_signature_by_another_owners_key(make_signer) -> None:
    alice, bob = make_signer("alice"), make_signer("bob")
    payload = alice.payload(key_id=str(bob.key.id))
    text = canonical_text(payload)
    _refused(alice, text, bob.device.sign(text), "foreign_key")


def test_signature_with_the_wrong_domain_tag(make_signer) -> None:
    from slips.canonical import GRANT_TAG, KEY_PROOF_TAG

    signer = make_signer()
    text = canonical_text(signer.payload())
    _refused(signer, text, signer.device.sign(text, tag=KEY_PROOF_TAG), "bad_signature")
    _refused(signer, text, signer.device.sign(text, tag=GRANT_TAG), "bad_signature")


def test_unknown_key(make_signer) -> None:
    signer = make_signer()
    text = canonical_text(signer.payload(key_id=str(uuid.uuid4())))
    _refused(signer, text, signer.device.sign(text), "unknown_key")


def test_replay_into_another_room_or_for_another_agent(make_signer) -> None:
    signer = make_signer()
    text = canonical_text(signer.payload())
    signature = signer.device.sign(text)
    room = signer.room_id
    signer.room_id = uuid.uuid4()
    _refused(signer, text, signature, "wrong_room")
    signer.room_id, signer.agent_id = room, uuid.uuid4()
    _refused(signer, text, signature, "wrong_agent")


def test_slip_for_another_owner(make_signer, make_owner) -> None:
    signer = make_signer()
    payload = signer.payload()
    payload["owner_id"] = str(make_owner("mallory").pk)
    text = canonical_text(payload)
    _refused(signer, text, signer.device.sign(text), "wrong_owner")


def test_expired_and_stale_and_future_slips(make_signer) -> None:
    signer = make_signer()
    now = int(time.time())
    for payload, code in [
        (signer.payload(issued_at=now - 10, lifetime=5), "slip_expired"),
        (signer.payload(issued_at=now - 3600), "stale_issued_at"),
        (signer.payload(issued_at=now + 3600), "issued_in_future"),
        (signer.payload(lifetime=365 * 86_400), "lifetime_too_long"),
    ]:
        text = canonical_text(payload)
        _refused(signer, text, signer.device.sign(text), code)


def test_nonce_reuse(make_signer) -> None:
    signer = make_signer()
    first = signer.payload()
    signer.submit(first)
    again = signer.payload(nonce=first["nonce"], issued_at=first["issued_at"] + 1)
    text = canonical_text(again)
    _refused(signer, text, signer.device.sign(text), "nonce_reused")


def test_resubmitting_the_same_slip_is_refused(make_signer) -> None:
    signer = make_signer()
    text = canonical_text(signer.payload())
    signature = signer.device.sign(text)
    services.slip_submit(
        owner=signer.owner,
        room_id=signer.room_id,
        seated_agent_id=signer.agent_id,
        payload=text,
        signature=signature,
    )
    _refused(signer, text, signature, "nonce_reused")


def test_revoked_key_cannot_sign(make_signer) -> None:
    signer = make_signer()
    services.key_revoke(owner=signer.owner, key_id=signer.key.id)
    text = canonical_text(signer.payload())
    _refused(signer, text, signer.device.sign(text), "key_revoked")


def test_tampered_byte(make_signer) -> None:
    signer = make_signer()
    text = canonical_text(signer.payload(capabilities=[{"resource": "budget", "max_uses": 2}]))
    signature = signer.device.sign(text)
    _refused(signer, text.replace('"max_uses":2', '"max_uses":9'), signature, "bad_signature")


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ('{"a":1,"a":1}', "duplicate_key"),
        ('{"a":"\ud800"}', "lone_surrogate"),
        ('{"a":NaN}', "non_finite_number"),
        ('{"a":0.5}', "float_number"),
        ('{"a":9007199254740993}', "integer_out_of_range"),
        ('{"a":"' + "x" * 20_000 + '"}', "oversized"),
        ('{"b":1,"a":1}', "not_canonical"),
    ],
)
def test_malformed_payload_text(make_signer, text: str, code: str) -> None:
    signer = make_signer()
    signature = signer.device.sign(text) if code != "lone_surrogate" else "A" * 86
    _refused(signer, text, signature, code)


@pytest.mark.parametrize("signature", ["", "!!!!", "A" * 85, "A" * 86 + "==", "A" * 87])
def test_malformed_signature(make_signer, signature: str) -> None:
    signer = make_signer()
    _refused(signer, canonical_text(signer.payload()), signature, "malformed_base64")


def test_standard_base64_alphabet_is_refused(make_signer) -> None:
    signer = make_signer()
    text = canonical_text(signer.payload())
    raw = signer.device.signing_key.sign(b"synapsia-slip-v1\n" + text.encode()).signature
    standard = base64.b64encode(raw).decode()
    if "+" not in standard and "/" not in standard:
        standard = standard.rstrip("=") + "=="  # still not the canonical unpadded form
    _refused(signer, text, standard, "malformed_base64")


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        (lambda p: p.update(extra=1), "unknown_field"),
        (lambda p: p.pop("nonce"), "missing_field"),
        (lambda p: p.update(v=2), "bad_version"),
        (lambda p: p.update(issued_at=True), "bad_field"),
        (lambda p: p.update(room_id=p["room_id"].upper()), "bad_field"),
        (lambda p: p.update(nonce="short"), "bad_field"),
        (lambda p: p.update(capabilities=[{"resource": "diary"}]), "unknown_resource"),
        (lambda p: p.update(capabilities=[{"resource": "budget", "colour": 1}]), "unknown_field"),
        (
            lambda p: p.update(capabilities=[{"resource": "budget", "max_uses": 0}]),
            "bad_capability",
        ),
        (
            lambda p: p.update(capabilities=[{"resource": "budget", "scope": "exact"}]),
            "bad_capability",
        ),
        (
            lambda p: p.update(capabilities=[{"resource": "budget", "operation": "act"}]),
            "bad_capability",
        ),
        (
            lambda p: p.update(capabilities=[{"resource": "tool:book", "operation": "read"}]),
            "bad_capability",
        ),
        (
            lambda p: p.update(capabilities=[{"resource": "budget", "onward_disclosure": 1}]),
            "bad_capability",
        ),
        (
            lambda p: p.update(
                capabilities=[{"resource": "budget", "expires_at": p["expires_at"] + 1}]
            ),
            "bad_capability",
        ),
        (lambda p: p.update(capabilities=[{"resource": "budget"}] * 2), "duplicate_capability"),
    ],
)
def test_bad_payload_shape(make_signer, mutate, code: str) -> None:
    signer = make_signer()
    payload = signer.payload()
    mutate(payload)
    text = canonical_text(payload)
    _refused(signer, text, signer.device.sign(text), code)


def test_newer_slip_supersedes_and_older_cannot_come_back(make_signer) -> None:
    signer = make_signer()
    now = int(time.time())
    older_payload = signer.payload(issued_at=now - 10)
    older_text = canonical_text(older_payload)
    older_signature = signer.device.sign(older_text)
    first = signer.submit(issued_at=now - 5)
    second = signer.submit(issued_at=now)
    first.refresh_from_db()
    assert first.superseded_at is not None and first.superseded_by_id == second.id
    _refused(signer, older_text, older_signature, "stale_slip")


def test_rejection_rolls_back_inside_an_outer_transaction(make_signer) -> None:
    signer = make_signer()
    with transaction.atomic():
        with pytest.raises(Rejected):
            text = canonical_text(signer.payload(key_id=str(uuid.uuid4())))
            services.slip_submit(
                owner=signer.owner,
                room_id=signer.room_id,
                seated_agent_id=signer.agent_id,
                payload=text,
                signature=signer.device.sign(text),
            )
        signer.submit()  # the connection is still usable afterwards
    assert Slip.objects.count() == 1


def test_key_used_is_recorded(make_signer) -> None:
    signer = make_signer()
    assert signer.key.last_used_at is None
    signer.submit()
    signer.key.refresh_from_db()
    assert signer.key.last_used_at is not None


def test_enroll_then_sign_with_a_second_device(make_signer) -> None:
    signer = make_signer()
    key2, device2 = enroll(signer.owner, label="phone")
    signer.key, signer.device = key2, device2
    slip = signer.submit(capabilities=[AVAILABILITY])
    assert slip.key_id == key2.id
    assert rfc8785.dumps({"a": 1}) == b'{"a":1}'

"""Device keys: proof of possession, single-use expiring challenges, rotation, revocation."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from ledger.models import LedgerEvent
from slips import services
from slips.errors import Malformed, NotFound, Rejected
from slips.models import DeviceKey
from tests.slips.conftest import Device, enroll

pytestmark = pytest.mark.django_db


def _enroll_with(owner, device, challenge, *, label="laptop", proof=None, public_key=None):
    return services.key_enroll(
        owner=owner,
        challenge=challenge,
        public_key=public_key or device.public_key,
        label=label,
        proof=proof or device.proof(owner=owner, challenge=challenge, label=label),
    )


def test_enroll_stores_only_the_public_key(make_owner) -> None:
    alice = make_owner("alice")
    key, device = enroll(alice)
    assert bytes(key.public_key) == bytes(device.signing_key.verify_key)
    assert key.after_key_loss is False
    assert list(DeviceKey.objects.filter(owner=alice)) == [key]


def test_challenge_is_single_use(make_owner) -> None:
    alice = make_owner("alice")
    device = Device()
    challenge = services.key_challenge_issue(owner=alice, purpose="enroll").value
    _enroll_with(alice, device, challenge)
    with pytest.raises(Rejected) as caught:
        _enroll_with(alice, Device(), challenge)
    assert caught.value.code == "challenge_used"


def test_expired_challenge_is_refused(make_owner) -> None:
    alice = make_owner("alice")
    past = timezone.now() - timedelta(hours=1)
    challenge = services.key_challenge_issue(owner=alice, purpose="enroll", now=past).value
    with pytest.raises(Rejected) as caught:
        _enroll_with(alice, Device(), challenge)
    assert caught.value.code == "challenge_expired"
    assert not DeviceKey.objects.exists()


def test_another_owners_challenge_is_unknown(make_owner) -> None:
    alice, bob = make_owner("alice"), make_owner("bob")
    challenge = services.key_challenge_issue(owner=alice, purpose="enroll").value
    with pytest.raises(Rejected) as caught:
        _enroll_with(bob, Device(), challenge)
    assert caught.value.code == "challenge_unknown"


def test_proof_by_another_key_is_refused(make_owner) -> None:
    alice = make_owner("alice")
    device, thief = Device(), Device()
    challenge = services.key_challenge_issue(owner=alice, purpose="enroll").value
    with pytest.raises(Rejected) as caught:
        _enroll_with(
            alice,
            device,
            challenge,
            proof=thief.proof(owner=alice, challenge=challenge, label="laptop"),
        )
    assert caught.value.code == "bad_proof"
    # A failed proof does not burn the challenge: the real device can still use it.
    _enroll_with(alice, device, challenge)


def test_proof_for_rotation_does_not_enroll(make_owner) -> None:
    """The purpose is signed: a rotate proof is not an enroll proof."""
    alice = make_owner("alice")
    device = Device()
    challenge = services.key_challenge_issue(owner=alice, purpose="enroll").value
    with pytest.raises(Rejected):
        _enroll_with(
            alice,
            device,
            challenge,
            proof=device.proof(owner=alice, challenge=challenge, label="laptop", purpose="rotate"),
        )


def test_label_is_signed(make_owner) -> None:
    alice = make_owner("alice")
    device = Device()
    challenge = services.key_challenge_issue(owner=alice, purpose="enroll").value
    with pytest.raises(Rejected):
        _enroll_with(
            alice,
            device,
            challenge,
            label="phone",
            proof=device.proof(owner=alice, challenge=challenge, label="laptop"),
        )


@pytest.mark.parametrize(
    "public_key", ["not base64!", "AAAA", "A" * 43 + "=", "A" * 42 + "B", "A" * 44]
)
def test_malformed_public_key_is_refused(make_owner, public_key: str) -> None:
    alice = make_owner("alice")
    challenge = services.key_challenge_issue(owner=alice, purpose="enroll").value
    with pytest.raises(Malformed) as caught:
        _enroll_with(alice, Device(), challenge, public_key=public_key)
    assert caught.value.code == "malformed_base64"


def test_same_key_cannot_enroll_twice(make_owner) -> None:
    alice = make_owner("alice")
    _, device = enroll(alice)
    with pytest.raises(Rejected) as caught:
        enroll(alice, device)
    assert caught.value.code == "key_already_enrolled"


def test_rotate_retires_the_old_key(make_owner, make_signer) -> None:
    signer = make_signer()
    old_slip = signer.submit()
    new_device = Device()
    challenge = services.key_challenge_issue(owner=signer.owner, purpose="rotate").value
    new_key = services.key_rotate(
        owner=signer.owner,
        old_key_id=signer.key.id,
        challenge=challenge,
        public_key=new_device.public_key,
        label="new laptop",
        proof=new_device.proof(
            owner=signer.owner, challenge=challenge, label="new laptop", purpose="rotate"
        ),
    )
    signer.key.refresh_from_db()
    assert signer.key.retired_at is not None and signer.key.replaced_by_id == new_key.id
    old_slip.refresh_from_db()
    assert old_slip.superseded_at is None  # rotation alone does not withdraw what was signed
    with pytest.raises(Rejected) as caught:
        signer.submit()
    assert caught.value.code == "key_retired"
    signer.key, signer.device = new_key, new_device
    signer.submit(issued_at=old_slip.issued_at + 1)
    kinds = list(LedgerEvent.objects.filter(room_id=signer.room_id).values_list("kind", flat=True))
    assert "key_rotated" in kinds


def test_revoke_is_recorded_in_every_room_and_enroll_after_loss_is_flagged(
    make_signer,
) -> None:
    import uuid

    signer = make_signer()
    signer.submit()
    other_room = uuid.uuid4()
    signer.room_id = other_room
    signer.submit()
    services.key_revoke(owner=signer.owner, key_id=signer.key.id)
    for room in {other_room} | set(
        LedgerEvent.objects.values_list("room_id", flat=True).distinct()
    ):
        assert LedgerEvent.objects.filter(room_id=room, kind="key_revoked").count() == 1
    key, _ = enroll(signer.owner, label="replacement")
    assert key.after_key_loss is True
    flagged = LedgerEvent.objects.filter(kind="key_enrolled")
    assert flagged.count() == 2 and all(e.data["after_key_loss"] for e in flagged)


def test_revoke_needs_your_own_key(make_owner) -> None:
    alice, bob = make_owner("alice"), make_owner("bob")
    key, _ = enroll(alice)
    with pytest.raises(NotFound):
        services.key_revoke(owner=bob, key_id=key.id)
    key.refresh_from_db()
    assert key.revoked_at is None


def test_key_changes_reach_every_room_the_owner_sits_in_before_any_slip(make_open_room) -> None:
    """Revocation is a ledger event in every open room, and a new key after a loss is shown to
    the owner's partners, in rooms where they have not signed a slip yet too; a closed room
    they never signed in is left alone."""
    setup = make_open_room()
    alice = setup.a.owner
    from rooms.services import room_create

    closed = room_create(owner=alice, purpose="An old dinner", charter="")
    closed.state = "closed"
    closed.save(update_fields=["state"])
    key, _ = enroll(alice, label="laptop")
    services.key_revoke(owner=alice, key_id=key.id)
    enroll(alice, label="replacement")

    def changes(room_id: object) -> list[tuple[str, bool | None]]:
        rows = LedgerEvent.objects.filter(
            room_id=room_id, kind__in=("key_enrolled", "key_revoked")
        ).order_by("seq")
        return [(e.kind, e.data.get("after_key_loss")) for e in rows]

    assert changes(setup.room.id) == [
        ("key_enrolled", False),
        ("key_revoked", None),
        ("key_enrolled", True),
    ]
    assert changes(closed.id) == []

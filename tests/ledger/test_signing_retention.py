"""Server-signed heads, the published key, and retention purges that keep chains verifiable."""

from __future__ import annotations

import base64
import os
import stat
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import transaction
from django.test import Client
from django.utils import timezone
from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

from ledger import signing
from ledger.chain import GENESIS_HASH, HEAD_SIGNATURE_PREFIX, head_signed_bytes
from ledger.events import Join
from ledger.models import LedgerEvent, LedgerHead, SignedHead
from ledger.retention import ledger_purge_expired
from ledger.services import ledger_append
from ledger.tasks import purge_expired
from ledger.verification import ledger_verify_room
from tests.ledger.conftest import append_events

pytestmark = pytest.mark.django_db


def test_signed_head_verifies_with_the_published_key(make_chain) -> None:
    room_id = make_chain(4)
    signed = signing.ledger_sign_head(room_id=room_id)
    head = LedgerHead.objects.get(room_id=room_id)
    assert (signed.seq, signed.hash) == (4, head.hash)
    published = Client().get("/api/ledger/public-key").json()  # no session needed
    assert published["algorithm"] == "Ed25519"
    assert published["public_key"] == signed.public_key
    assert published["signed_message_prefix"] == HEAD_SIGNATURE_PREFIX.decode()
    message = head_signed_bytes(
        room_id=room_id, seq=signed.seq, head_hash=signed.hash, signed_at=signed.signed_at
    )
    assert message.startswith(b"synapsia-ledger-head-v1\n")
    VerifyKey(base64.b64decode(published["public_key"])).verify(
        message, base64.b64decode(signed.signature)
    )
    assert ledger_verify_room(room_id=room_id).ok


def test_a_forged_signed_head_fails(make_chain) -> None:
    room_id = make_chain(3)
    signed = signing.ledger_sign_head(room_id=room_id)
    forged_sig = bytearray(base64.b64decode(signed.signature))
    forged_sig[0] ^= 1
    key = VerifyKey(base64.b64decode(signing.ledger_public_key()))
    with pytest.raises(BadSignatureError):
        key.verify(
            head_signed_bytes(
                room_id=room_id, seq=3, head_hash=signed.hash, signed_at=signed.signed_at
            ),
            bytes(forged_sig),
        )
    SignedHead.objects.filter(pk=signed.pk).update(signature=base64.b64encode(forged_sig).decode())
    verdict = ledger_verify_room(room_id=room_id)
    assert not verdict.ok and "invalid signature" in verdict.problem
    # A head signed by some other key (say, whoever holds the database) is not trusted.
    mallory = SigningKey.generate()
    message = head_signed_bytes(
        room_id=room_id, seq=3, head_hash=signed.hash, signed_at=signed.signed_at
    )
    SignedHead.objects.filter(pk=signed.pk).update(
        public_key=base64.b64encode(bytes(mallory.verify_key)).decode(),
        signature=base64.b64encode(mallory.sign(message).signature).decode(),
    )
    verdict = ledger_verify_room(room_id=room_id)
    assert not verdict.ok and "does not trust" in verdict.problem


def test_an_empty_room_signs_the_genesis_head() -> None:
    import uuid

    signed = signing.ledger_sign_head(room_id=uuid.uuid4())
    assert (signed.seq, signed.hash) == (0, GENESIS_HASH)
    assert ledger_verify_room(room_id=signed.room_id).ok


def test_production_refuses_to_sign_without_a_key(settings, make_chain) -> None:
    room_id = make_chain(1)
    settings.PROFILE = "production"
    settings.SYNAPSIA = {**settings.SYNAPSIA, "LEDGER_SIGNING_KEY": ""}
    signing._signing_key.cache_clear()
    with pytest.raises(signing.LedgerSigningUnavailable, match="SYNAPSIA_LEDGER_SIGNING_KEY"):
        signing.ledger_sign_head(room_id=room_id)
    assert Client().get("/api/ledger/public-key").status_code == 503
    settings.SYNAPSIA = {**settings.SYNAPSIA, "LEDGER_SIGNING_KEY": "bm90IDMyIGJ5dGVz"}
    signing._signing_key.cache_clear()
    with pytest.raises(signing.LedgerSigningUnavailable, match="32 bytes"):
        signing.ledger_sign_head(room_id=room_id)
    assert not SignedHead.objects.exists()


def test_embedded_profile_generates_and_keeps_a_private_key_file(settings, tmp_path) -> None:
    settings.PROFILE = "embedded"
    path = tmp_path / "var" / "ledger-signing.key"
    settings.SYNAPSIA = {
        **settings.SYNAPSIA,
        "LEDGER_SIGNING_KEY": "",
        "LEDGER_SIGNING_KEY_PATH": str(path),
    }
    signing._signing_key.cache_clear()
    first = signing.ledger_public_key()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    signing._signing_key.cache_clear()
    assert signing.ledger_public_key() == first  # persisted, not regenerated


def _age_events(room_id, *, through_seq: int, days: int) -> None:
    LedgerEvent.objects.filter(room_id=room_id, seq__lte=through_seq).update(
        occurred_at=timezone.now() - timedelta(days=days)
    )


def test_purge_leaves_a_checkpoint_and_the_rest_still_verifies(make_chain, settings) -> None:
    settings.SYNAPSIA = {**settings.SYNAPSIA, "LEDGER_RETENTION_DAYS": 90}
    room_id, fresh = make_chain(8), make_chain(3)
    signing.ledger_sign_head(room_id=room_id)
    # Timestamps are hashed, so ageing events breaks their hashes: rebuild the chain instead.
    LedgerEvent.objects.filter(room_id=room_id).delete()
    LedgerHead.objects.filter(room_id=room_id).delete()
    SignedHead.objects.filter(room_id=room_id).delete()
    past = timezone.now() - timedelta(days=100)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("ledger.services.timezone.now", lambda: past)
        append_events(room_id, 5)
        # As the beat would within T: an unsigned tail 100 days old fails the quiet-tail rule.
        signing.ledger_sign_head(room_id=room_id)
    append_events(room_id, 3)
    five = LedgerEvent.objects.get(room_id=room_id, seq=5)
    assert ledger_verify_room(room_id=room_id).ok

    report = ledger_purge_expired()
    assert report.events_purged == 5 and [r.room_id for r in report.rooms] == [room_id]
    head = LedgerHead.objects.get(room_id=room_id)
    assert (head.checkpoint_seq, head.checkpoint_hash) == (5, five.hash)
    assert not LedgerEvent.objects.filter(occurred_at__lt=report.cutoff).exists()
    seqs = list(
        LedgerEvent.objects.filter(room_id=room_id).order_by("seq").values_list("seq", "kind")
    )
    assert seqs[0] == (6, "join") and seqs[-1] == (9, "retention_purge")
    purge = LedgerEvent.objects.get(room_id=room_id, seq=9)
    assert purge.data == {
        "through_seq": 5, "through_hash": five.hash, "events_purged": 5, "window_days": 90,
    }  # fmt: skip
    assert ledger_verify_room(room_id=room_id).ok
    assert ledger_verify_room(room_id=fresh).ok
    call_command("verify_ledger")
    # Appends continue from the head, and a second purge with nothing expired does nothing.
    with transaction.atomic():
        ledger_append(room_id=room_id, event=Join(participant_id="late", participant_kind="owner"))
    assert ledger_purge_expired().events_purged == 0
    assert ledger_verify_room(room_id=room_id).ok


def test_a_forged_checkpoint_is_found(make_chain) -> None:
    # Someone deletes the first events and moves the checkpoint to hide it: no purge event
    # in the chain names that checkpoint.
    room_id = make_chain(6)
    three = LedgerEvent.objects.get(room_id=room_id, seq=3)
    LedgerEvent.objects.filter(room_id=room_id, seq__lte=3).delete()
    LedgerHead.objects.filter(room_id=room_id).update(checkpoint_seq=3, checkpoint_hash=three.hash)
    verdict = ledger_verify_room(room_id=room_id)
    assert (verdict.ok, verdict.first_bad_seq) == (False, 4)
    assert "retention_purge" in verdict.problem


def test_purge_task_and_command_apply_the_window(make_chain, settings, capsys) -> None:
    settings.SYNAPSIA = {**settings.SYNAPSIA, "LEDGER_RETENTION_DAYS": 1}
    room_id = make_chain(2)
    assert "ledger-purge-expired" in settings.CELERY_BEAT_SCHEDULE
    assert purge_expired.apply().get() == 0  # run here, as a worker would; nothing is old yet
    future = timezone.now() + timedelta(days=2)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("ledger.retention.timezone.now", lambda: future)
        call_command("purge_expired")
    assert "purged 2 event(s)" in capsys.readouterr().out
    assert ledger_verify_room(room_id=room_id).ok
    assert list(LedgerEvent.objects.filter(room_id=room_id).values_list("kind", flat=True)) == [
        "retention_purge"
    ]


@pytest.mark.parametrize(
    "room_id, seq, head_hash, signed_at",
    [
        ("0b5e4d1c-6a3f-4f1e-9d2c-8a7b6c5d4e3f", 64, "ab" * 32, "2026-12-01T16:00:00.123456Z"),
        ("room", 0, "0" * 64, ""),
        ('quote"back\\slash', 2**53 - 1, "h\u00e9", "\u2028 \U0001f600 \x7f"),
    ],
)
def test_head_signed_bytes_are_rfc_8785_built_directly(room_id, seq, head_hash, signed_at) -> None:
    import rfc8785

    from ledger.chain import HEAD_SIGNATURE_PREFIX, head_signed_bytes

    expected = HEAD_SIGNATURE_PREFIX + rfc8785.dumps(
        {"room_id": room_id, "seq": seq, "hash": head_hash, "signed_at": signed_at}
    )
    assert (
        head_signed_bytes(room_id=room_id, seq=seq, head_hash=head_hash, signed_at=signed_at)
        == expected
    )


@pytest.mark.parametrize("seq", [-1, 2**53, True, "3"])
def test_head_signed_bytes_refuse_numbers_rfc_8785_cannot_carry(seq) -> None:
    import rfc8785

    from ledger.chain import head_signed_bytes

    with pytest.raises(rfc8785.CanonicalizationError):
        head_signed_bytes(room_id="r", seq=seq, head_hash="h", signed_at="t")

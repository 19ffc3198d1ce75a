"""Writes for device keys, signed slips and room tiers.

Each function checks its input, changes the records in one transaction together with the
ledger events that record the change, and raises a ``SlipError`` (changing nothing) when the
request cannot be honoured. A refused slip is itself recorded: ``SlipRejected`` with the rule.

Room membership lives in ``rooms``, which ``slips`` must not import: the functions that act on
a room take ``seated_agent_id``, the agent the caller's seat in that room is bound to, which
the API layer (``rooms/slip_api.py``) reads from ``rooms.selectors.room_seat`` before calling.
"""

from __future__ import annotations

import logging
import secrets
import unicodedata
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.apps import apps
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from gatekeeper.owner_limits import owner_limit_check
from ledger.events import KeyCustody as RecordedCustody
from ledger.events import KeyEnrolled, KeyRevoked, KeyRotated, SlipRejected, SlipSigned
from ledger.services import ledger_append
from slips.canonical import KEY_PROOF_TAG, SLIP_TAG, payload_parse_canonical, signed_bytes
from slips.capabilities import (
    ROOM_RULE_FIELDS,
    VAULT_KINDS,
    Capability,
    room_rule_narrower,
    tier_narrowest,
)
from slips.config import slips_setting
from slips.errors import Malformed, NotFound, Rejected, SlipError
from slips.models import (
    DeviceKey,
    KeyChallenge,
    KeyChallengePurpose,
    KeyCustody,
    RoomTier,
    Slip,
    SlipCapability,
    SlipConflict,
    Tier,
)
from slips.payload import SlipPayload, key_proof_payload, slip_payload_read
from slips.signals import key_revoked
from slips.signatures import b64url_decode, b64url_encode, signature_valid

logger = logging.getLogger(__name__)

DEFAULT_SLIP_DAYS = 7


def _config(name: str) -> int:
    return int(slips_setting(name))


def _rooms_of_owner(owner_id: Any) -> list[UUID]:
    """Where the owner's key changes are shown to their partners: every room they sit in that
    has not closed (with a slip or not yet: the partner must know whose key will sign there),
    and every room they signed a slip for. In one order, so two changes lock rooms alike."""
    # By name, not import: rooms depends on slips, not the other way round.
    seats = apps.get_model("rooms", "RoomMember").objects.filter(owner_id=owner_id)
    sitting = seats.exclude(room__state="closed").values_list("room_id", flat=True)
    signed = Slip.objects.filter(owner_id=owner_id).values_list("room_id", flat=True)
    return sorted({*sitting, *signed}, key=str)


def key_custody_recorded(key: DeviceKey) -> RecordedCustody:
    """The key's custody as ledger events record it (anything unknown reads as server-held,
    the more conspicuous answer)."""
    return "device" if key.custody == KeyCustody.DEVICE else "demo_seeding"


def _clean_label(label: str) -> str:
    label = label.strip()
    if not 1 <= len(label) <= 80:
        raise Malformed("bad_label", "A device label has 1 to 80 characters.")
    if not unicodedata.is_normalized("NFC", label):
        raise Malformed("not_nfc", "The device label must be in Unicode NFC.")
    return label


# --- device keys -----------------------------------------------------------------------------


def key_challenge_issue(*, owner: User, purpose: str, now: datetime | None = None) -> KeyChallenge:
    """A fresh single-use challenge for a new key to sign (``enroll`` or ``rotate``)."""
    if purpose not in KeyChallengePurpose.values:
        raise Malformed("bad_purpose", "A challenge is for 'enroll' or 'rotate'.")
    now = now or timezone.now()
    return KeyChallenge.objects.create(
        owner=owner,
        purpose=purpose,
        value=b64url_encode(secrets.token_bytes(32)),
        expires_at=now + timedelta(seconds=_config("CHALLENGE_TTL_SECONDS")),
    )


def _key_from_proof(
    *,
    owner: User,
    purpose: str,
    challenge: str,
    public_key: str,
    label: str,
    proof: str,
    now: datetime,
) -> DeviceKey:
    """Check a proof of possession and consume its challenge; the unsaved new key."""
    row = (
        KeyChallenge.objects.select_for_update()
        .filter(value=challenge, owner=owner, purpose=purpose)
        .first()
        if isinstance(challenge, str)
        else None
    )
    if row is None:
        raise Rejected("challenge_unknown", "That challenge was not issued to you; ask again.")
    if row.used_at is not None:
        raise Rejected("challenge_used", "That challenge was already used; ask for a new one.")
    if row.expires_at <= now:
        raise Rejected("challenge_expired", "That challenge has expired; ask for a new one.")
    key_bytes = b64url_decode(public_key, field="public_key", length=32)
    proof_bytes = b64url_decode(proof, field="proof", length=64)
    label = _clean_label(label)
    message = signed_bytes(
        tag=KEY_PROOF_TAG,
        payload=key_proof_payload(
            challenge=challenge,
            label=label,
            owner_id=str(owner.pk),
            public_key=public_key,
            purpose=purpose,
        ),
    )
    if not signature_valid(public_key=key_bytes, message=message, signature=proof_bytes):
        raise Rejected("bad_proof", "The proof of possession does not verify for that key.")
    if DeviceKey.objects.filter(public_key=key_bytes).exists():
        raise Rejected("key_already_enrolled", "That key is already enrolled.")
    row.used_at = now
    row.save(update_fields=["used_at"])
    return DeviceKey(owner=owner, label=label, public_key=key_bytes)


@transaction.atomic
def key_enroll(
    *,
    owner: User,
    challenge: str,
    public_key: str,
    label: str,
    proof: str,
    now: datetime | None = None,
    custody: KeyCustody = KeyCustody.DEVICE,
) -> DeviceKey:
    """Enroll a browser's public key after checking it signed our challenge.

    Enrolling while the owner has keys but none usable (all revoked) is flagged
    ``after_key_loss`` and recorded in each of the owner's rooms, for partners to see.
    ``custody`` is ``demo_seeding`` only for the practice room's server-held demo keys
    (``practice.seeding``); the API never sets it.
    """
    now = now or timezone.now()
    key = _key_from_proof(
        owner=owner,
        purpose=KeyChallengePurpose.ENROLL,
        challenge=challenge,
        public_key=public_key,
        label=label,
        proof=proof,
        now=now,
    )
    keys = DeviceKey.objects.select_for_update().filter(owner=owner)
    usable = keys.filter(revoked_at__isnull=True, retired_at__isnull=True)
    owner_limit_check(owner, "device_keys", usable)
    had_keys = keys.exists()
    key.after_key_loss = had_keys and not usable.exists()
    key.custody = custody
    key.save()
    for room_id in _rooms_of_owner(owner.pk):
        ledger_append(
            room_id=room_id,
            event=KeyEnrolled(
                owner_id=str(owner.pk), key_id=str(key.id), after_key_loss=key.after_key_loss
            ),
        )
    return key


def _usable_key(owner: User, key_id: UUID) -> DeviceKey:
    try:
        key = DeviceKey.objects.select_for_update().get(id=key_id, owner=owner)
    except DeviceKey.DoesNotExist:
        raise NotFound("not_found", "No such device key.") from None
    if key.revoked_at is not None:
        raise Rejected("key_revoked", "That key is revoked.")
    if key.retired_at is not None:
        raise Rejected("key_retired", "That key was already rotated.")
    return key


@transaction.atomic
def key_rotate(
    *,
    owner: User,
    old_key_id: UUID,
    challenge: str,
    public_key: str,
    label: str,
    proof: str,
    now: datetime | None = None,
) -> DeviceKey:
    """Enroll a new key in place of ``old_key_id``: the new key signs future slips; the old
    one signs nothing new, but the slips it signed keep verifying under it."""
    now = now or timezone.now()
    old = _usable_key(owner, old_key_id)
    key = _key_from_proof(
        owner=owner,
        purpose=KeyChallengePurpose.ROTATE,
        challenge=challenge,
        public_key=public_key,
        label=label,
        proof=proof,
        now=now,
    )
    key.save()
    old.retired_at = now
    old.replaced_by = key
    old.save(update_fields=["retired_at", "replaced_by"])
    for room_id in _rooms_of_owner(owner.pk):
        ledger_append(
            room_id=room_id,
            event=KeyRotated(
                owner_id=str(owner.pk), old_key_id=str(old.id), new_key_id=str(key.id)
            ),
        )
    return key


@transaction.atomic
def key_revoke(*, owner: User, key_id: UUID, now: datetime | None = None) -> DeviceKey:
    """Revoke a key at once, from any signed-in session: slips it signed stop clearing anything.

    Recorded in every room the owner has slips in; after commit ``slips.signals.key_revoked``
    tells the rooms layer, so it can notify (and where nothing clears them, disconnect) the
    agent sessions those slips served.
    """
    now = now or timezone.now()
    try:
        key = DeviceKey.objects.select_for_update().get(id=key_id, owner=owner)
    except DeviceKey.DoesNotExist:
        raise NotFound("not_found", "No such device key.") from None
    if key.revoked_at is not None:
        return key
    key.revoked_at = now
    key.save(update_fields=["revoked_at"])
    room_ids = _rooms_of_owner(owner.pk)
    for room_id in room_ids:
        ledger_append(room_id=room_id, event=KeyRevoked(owner_id=str(owner.pk), key_id=str(key.id)))
    affected = list(
        Slip.objects.filter(key=key, superseded_at__isnull=True).values_list("room_id", "agent_id")
    )
    transaction.on_commit(
        lambda: key_revoked.send(
            sender=DeviceKey, owner_id=owner.pk, key_id=key.id, affected=affected
        )
    )
    return key


# --- slips -----------------------------------------------------------------------------------


def slip_template(
    *, owner: User, room_id: UUID, seated_agent_id: UUID, now: datetime | None = None
) -> dict[str, Any]:
    """The payload for the browser to fill (``key_id``, ``capabilities``), canonicalise and sign.

    The nonce is fresh and random; the browser may use its own instead (it must be unused).
    """
    issued_at = int((now or timezone.now()).timestamp())
    return {
        "v": 1,
        "room_id": str(room_id),
        "owner_id": str(owner.pk),
        "agent_id": str(seated_agent_id),
        "key_id": "",
        "nonce": b64url_encode(secrets.token_bytes(18)),
        "issued_at": issued_at,
        "expires_at": issued_at + DEFAULT_SLIP_DAYS * 86_400,
        "capabilities": [],
    }


def _slip_check(
    *,
    owner: User,
    room_id: UUID,
    seated_agent_id: UUID,
    payload: str,
    signature: str,
    now: datetime,
) -> tuple[bytes, bytes, SlipPayload, DeviceKey]:
    if not isinstance(payload, str) or not isinstance(signature, str):
        raise Malformed("bad_request", "payload and signature are text.")
    try:
        raw = payload.encode("utf-8")
    except UnicodeEncodeError:
        raise Malformed("lone_surrogate", "Text contains a lone surrogate.") from None
    parsed = slip_payload_read(payload_parse_canonical(raw))
    signature_bytes = b64url_decode(signature, field="signature", length=64)
    key = DeviceKey.objects.filter(id=parsed.key_id).first()
    if key is None:
        raise Rejected("unknown_key", "The slip names a key that is not enrolled.")
    if key.owner_id != owner.pk:
        raise Rejected("foreign_key", "The slip is signed with a key that is not yours.")
    if key.revoked_at is not None:
        raise Rejected("key_revoked", "That key is revoked; enroll a new one.")
    if key.retired_at is not None:
        raise Rejected("key_retired", "That key was rotated; sign with your new key.")
    if not signature_valid(
        public_key=bytes(key.public_key), message=SLIP_TAG + raw, signature=signature_bytes
    ):
        raise Rejected("bad_signature", "The signature does not verify for these bytes.")
    if parsed.owner_id != str(owner.pk):
        raise Rejected("wrong_owner", "The slip is bound to another owner.")
    if parsed.room_id != room_id:
        raise Rejected("wrong_room", "The slip is bound to another room.")
    if parsed.agent_id != seated_agent_id:
        raise Rejected("wrong_agent", "The slip is bound to an agent not seated for you here.")
    now_s, skew = int(now.timestamp()), _config("CLOCK_SKEW_SECONDS")
    if parsed.issued_at > now_s + skew:
        raise Rejected("issued_in_future", "The slip's issued_at is ahead of our clock.")
    if parsed.issued_at < now_s - skew:
        raise Rejected("stale_issued_at", "The slip was signed too long ago; sign it again.")
    if parsed.expires_at <= now_s:
        raise Rejected("slip_expired", "The slip has already expired.")
    if parsed.expires_at - parsed.issued_at > _config("MAX_LIFETIME_DAYS") * 86_400:
        raise Rejected("lifetime_too_long", "A slip lasts at most the configured lifetime.")
    if Slip.objects.filter(nonce=parsed.nonce).exists():
        raise Rejected("nonce_reused", "That nonce was already used; sign a fresh slip.")
    return raw, signature_bytes, parsed, key


def _slip_reject(*, owner: User, room_id: UUID, agent_id: UUID, code: str) -> None:
    """Record a refused slip (rule id only). A ledger failure here must not hide the refusal."""
    try:
        with transaction.atomic():
            ledger_append(
                room_id=room_id,
                event=SlipRejected(owner_id=str(owner.pk), agent_id=str(agent_id), reason=code),
            )
    except Exception:  # the caller still gets the refusal; the gap is logged
        logger.exception("could not record SlipRejected(%s) in room %s", code, room_id)


def slip_submit(
    *,
    owner: User,
    room_id: UUID,
    seated_agent_id: UUID,
    payload: str,
    signature: str,
    now: datetime | None = None,
) -> Slip:
    """Verify and store a signed slip; it supersedes the owner's previous slip for this room
    and agent from this moment. Refusals raise ``SlipError`` and are ``SlipRejected`` events.

    ``payload`` is the canonical JSON text exactly as signed; ``signature`` is base64url.
    """
    now = now or timezone.now()
    try:
        with transaction.atomic():
            return _slip_store(
                owner=owner,
                room_id=room_id,
                seated_agent_id=seated_agent_id,
                payload=payload,
                signature=signature,
                now=now,
            )
    except SlipError as exc:
        _slip_reject(owner=owner, room_id=room_id, agent_id=seated_agent_id, code=exc.code)
        raise


def _slip_store(
    *,
    owner: User,
    room_id: UUID,
    seated_agent_id: UUID,
    payload: str,
    signature: str,
    now: datetime,
) -> Slip:
    raw, signature_bytes, parsed, key = _slip_check(
        owner=owner,
        room_id=room_id,
        seated_agent_id=seated_agent_id,
        payload=payload,
        signature=signature,
        now=now,
    )
    current = (
        Slip.objects.select_for_update()
        .filter(owner=owner, room_id=room_id, agent_id=seated_agent_id, superseded_at__isnull=True)
        .first()
    )
    if current is not None and current.issued_at >= parsed.issued_at:
        raise Rejected("stale_slip", "A newer slip is already in force; sign a fresh one.")
    if current is not None:
        current.superseded_at = now
        current.save(update_fields=["superseded_at"])
    try:
        with transaction.atomic():  # savepoint: a nonce race must not poison the outer block
            slip = Slip.objects.create(
                owner=owner,
                room_id=room_id,
                agent_id=seated_agent_id,
                key=key,
                payload=raw,
                signature=signature_bytes,
                nonce=parsed.nonce,
                issued_at=parsed.issued_at,
                expires_at=parsed.expires_at,
            )
    except IntegrityError:
        raise Rejected("nonce_reused", "That nonce was already used; sign a fresh slip.") from None
    if current is not None:
        current.superseded_by = slip
        current.save(update_fields=["superseded_by"])
    SlipCapability.objects.bulk_create(
        SlipCapability(
            slip=slip,
            position=i,
            resource=c.resource,
            operation=c.operation,
            uses_left=c.max_uses,
        )
        for i, c in enumerate(parsed.capabilities)
    )
    DeviceKey.objects.filter(id=key.id).update(last_used_at=now)
    ledger_append(
        room_id=room_id,
        event=SlipSigned(
            owner_id=str(owner.pk),
            agent_id=str(seated_agent_id),
            slip_id=str(slip.id),
            key_id=str(key.id),
            capability_count=len(parsed.capabilities),
            key_custody=key_custody_recorded(key),
        ),
    )
    conflicts_recompute(room_id=room_id)
    return slip


# --- tiers and conflicts ---------------------------------------------------------------------


@transaction.atomic
def tier_choose(*, owner: User, room_id: UUID, tier: str) -> RoomTier:
    """Record the tier ``owner`` wants for a room (the room runs under the narrowest chosen).

    The caller must have checked ``owner`` holds a seat in the room (see module docstring).
    """
    if tier not in Tier.values:
        raise Malformed("bad_tier", "A tier is sandbox, room_only or collaborative.")
    row, _ = RoomTier.objects.update_or_create(
        room_id=room_id, owner=owner, defaults={"tier": tier}
    )
    conflicts_recompute(room_id=room_id)
    return row


def live_slip_capabilities(*, room_id: UUID) -> dict[str, tuple[Capability, ...]]:
    """Each owner's capabilities in their live slips for the room (from the stored payloads,
    which were verified when submitted); used for room rules that can only narrow.

    What stored bytes say is a pure function of the bytes, parsed once per process
    (``slips.verification.signed_slip_payload``); the slips themselves are read every call."""
    from slips.verification import signed_slip_payload  # verification imports this module

    result: dict[str, tuple[Capability, ...]] = {}
    live = Slip.objects.filter(room_id=room_id, superseded_at__isnull=True)
    for owner_id, payload in live.values_list("owner_id", "payload"):
        parsed = signed_slip_payload(bytes(payload))
        result[str(owner_id)] = result.get(str(owner_id), ()) + parsed.capabilities
    return result


def conflicts_recompute(*, room_id: UUID) -> list[SlipConflict]:
    """Re-derive the room's conflicts: where owners' rules for a shared resource (an action
    tool; vault items belong to one owner) or their chosen tiers differ, the narrower wins."""
    SlipConflict.objects.filter(room_id=room_id).delete()
    conflicts: list[SlipConflict] = []
    by_owner = live_slip_capabilities(room_id=room_id)
    rules: dict[tuple[str, str], dict[str, Capability]] = {}
    for owner_id, capabilities in by_owner.items():
        for c in capabilities:
            if c.resource not in VAULT_KINDS:
                rules.setdefault((c.resource, c.operation), {})[owner_id] = c
    for (resource, operation), per_owner in sorted(rules.items()):
        if len(per_owner) < 2:
            continue
        for field in ROOM_RULE_FIELDS:
            values = {o: getattr(c, field) for o, c in per_owner.items()}
            if len(set(values.values())) < 2:
                continue
            winner = values[next(iter(values))]
            for value in values.values():
                winner = room_rule_narrower(field, winner, value)
            conflicts.append(
                SlipConflict(
                    room_id=room_id,
                    resource=resource,
                    operation=operation,
                    field=field,
                    values=values,
                    winner=winner,
                    reason=f"The owners' slips differ on {field}; the narrower rule applies "
                    "to both agents.",
                )
            )
    tiers = {
        str(owner_id): tier
        for owner_id, tier in RoomTier.objects.filter(room_id=room_id).values_list(
            "owner_id", "tier"
        )
    }
    for owner_id in by_owner:
        tiers.setdefault(owner_id, tier_narrowest([]).value)
    if len(set(tiers.values())) > 1:
        conflicts.append(
            SlipConflict(
                room_id=room_id,
                resource="*",
                operation="*",
                field="tier",
                values=tiers,
                winner=tier_narrowest(list(tiers.values())).value,
                reason="The owners chose different tiers; the room runs under the narrower.",
            )
        )
    return SlipConflict.objects.bulk_create(conflicts)

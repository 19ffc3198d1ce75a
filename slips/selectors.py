"""Reads for device keys, slips, conflicts and the owner's own vault, scoped to who asks."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any
from uuid import UUID

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.utils import timezone

from slips.canonical import payload_parse_canonical
from slips.capabilities import Capability
from slips.models import DeviceKey, RoomTier, Slip, SlipConflict, VaultItem
from slips.payload import slip_payload_read
from slips.sentences import (
    TIER_NAMES,
    TIER_ROOM_EFFECTS,
    SlipChanges,
    capability_sentence,
    slip_changes,
    tool_words,
    when_in_words,
)
from slips.vault import Budget, vault_open


def keys_of_owner(*, owner: User) -> QuerySet[DeviceKey]:
    return DeviceKey.objects.filter(owner=owner)


def slips_of_owner(*, owner: User, room_id: UUID | None = None) -> QuerySet[Slip]:
    """The owner's slips, newest first (superseded ones too, for the history)."""
    slips = Slip.objects.filter(owner=owner).select_related("key")
    return slips.filter(room_id=room_id) if room_id is not None else slips


def slip_capabilities(*, slip: Slip) -> tuple[Capability, ...]:
    """A stored slip's capability records as signed, with the narrowest defaults filled in."""
    return slip_payload_read(payload_parse_canonical(bytes(slip.payload))).capabilities


def room_conflicts(*, room_id: UUID) -> QuerySet[SlipConflict]:
    """Which rule won where the room's owners disagree; readable by both owners (the caller
    checks the reader holds a seat in the room)."""
    return SlipConflict.objects.filter(room_id=room_id)


@dataclass(frozen=True)
class OpenedVaultItem:
    id: UUID
    kind: str
    content: dict[str, Any]


def vault_of_owner(*, owner: User) -> list[OpenedVaultItem]:
    """The owner's own vault, decrypted, for the owner's own pages (never for an agent)."""
    return [
        OpenedVaultItem(id=row.id, kind=row.kind, content=vault_open(row).model_dump(mode="json"))
        for row in VaultItem.objects.filter(owner=owner)
    ]


def slip_in_force(*, room_id: UUID, owner_id: Any, agent_id: UUID, now: datetime) -> bool:
    """Whether the owner has a slip for this agent in this room that can still clear anything:
    not superseded, not expired, signed by a key that is not revoked. (Each use is still
    verified in full by ``slips.verification``; this only says whether to keep a session.)"""
    return Slip.objects.filter(
        room_id=room_id,
        owner_id=owner_id,
        agent_id=agent_id,
        superseded_at__isnull=True,
        expires_at__gt=int(now.timestamp()),
        key__revoked_at__isnull=True,
    ).exists()


# --- the slip and the room's tier in words ----------------------------------------------------


def vault_kinds_of_owner(*, owner_id: Any) -> set[str]:
    """The kinds of item the owner has in their vault (nothing is decrypted)."""
    return set(VaultItem.objects.filter(owner_id=owner_id).values_list("kind", flat=True))


def owner_budget_currency(*, owner_id: Any) -> str | None:
    """The currency of the owner's budget, for sentences that name it ("rounded to 10 EUR")."""
    row = VaultItem.objects.filter(owner_id=owner_id, kind="budget").first()
    if row is None:
        return None
    item = vault_open(row)
    return item.currency if isinstance(item, Budget) else None


def owner_tier(*, owner_id: Any, room_id: UUID) -> str | None:
    """The tier this owner chose for the room, or None if they chose none."""
    return (
        RoomTier.objects.filter(owner_id=owner_id, room_id=room_id)
        .values_list("tier", flat=True)
        .first()
    )


def _owner_names(owner_ids: set[str], reader_id: Any | None) -> dict[str, str]:
    names = {
        str(pk): name
        for pk, name in User.objects.filter(pk__in=owner_ids).values_list("pk", "username")
    }
    if reader_id is not None and str(reader_id) in names:
        names[str(reader_id)] = "you"
    return names


def _room_tier_and_choosers(room_id: UUID) -> tuple[str, dict[str, str]]:
    # Imported here: slips.verification imports slips.services, which stays below selectors.
    from slips.verification import room_tier

    chosen = {
        str(owner): tier
        for owner, tier in RoomTier.objects.filter(room_id=room_id).values_list("owner_id", "tier")
    }
    return room_tier(room_id=room_id), chosen


def room_tier_words(room_id: UUID, reader_id: Any | None = None) -> str:
    """The tier the room runs under, who chose it and what it does, in one sentence (for the
    room page and the slip page; ``reader_id`` is named "you")."""
    tier, chosen = _room_tier_and_choosers(room_id)
    name = TIER_NAMES[tier]
    if not chosen:
        return (
            f"No one has chosen a privacy tier, so the room runs under {name}: "
            f"{TIER_ROOM_EFFECTS[tier]}."
        )
    names = _owner_names(set(chosen), reader_id)
    by = sorted(names.get(o, "an owner") for o, t in chosen.items() if t == tier)
    who = " and ".join(by) if by else "no one (an owner with a slip counts as the default)"
    return f"The room runs under {name}, chosen by {who}: {TIER_ROOM_EFFECTS[tier]}."


def _possessive(name: str) -> str:
    return "your" if name == "you" else f"{name}'s"


def _rule_value_words(field: str, value: Any) -> str:
    if field == "approval":
        return "asks before each use" if value == "per_use" else "does not ask"
    if field == "onward_disclosure":
        return "lets it be carried out of the room" if value else "keeps it in the room"
    return str(value)


def conflicts_in_words(*, room_id: UUID, reader_id: Any | None = None) -> list[str]:
    """Where the owners' tiers or rules differ and which (the narrower) applies, one sentence
    each; both owners read the same sentences (``reader_id`` is named "you")."""
    rows = list(room_conflicts(room_id=room_id))
    owners = {str(o) for row in rows for o in dict(row.values)}
    names = _owner_names(owners, reader_id)
    chosen = {
        str(owner): tier
        for owner, tier in RoomTier.objects.filter(room_id=room_id).values_list("owner_id", "tier")
    }
    sentences: list[str] = []
    for row in rows:
        values: dict[str, Any] = dict(row.values)
        if row.field == "tier":
            parts = []
            for owner, tier in sorted(values.items(), key=lambda kv: names.get(kv[0], "")):
                who = names.get(owner, "an owner")
                verb = "chose" if owner in chosen else "chose no tier, which counts as"
                parts.append(f"{who} {verb} {TIER_NAMES[tier]}")
            winner = TIER_NAMES[row.winner]
            said = " and ".join(parts)
            sentence = f"{said[:1].upper()}{said[1:]}, so the room runs under {winner}"
            sentences.append(f"{sentence}: {TIER_ROOM_EFFECTS[row.winner]}.")
            continue
        action = tool_words(row.resource)
        parts = [
            f"{_possessive(names.get(o, 'an owner'))} slip {_rule_value_words(row.field, v)}"
            for o, v in sorted(values.items(), key=lambda kv: names.get(kv[0], ""))
        ]
        sentences.append(
            f"For the “{action}” action, {' and '.join(parts)}, so for both agents it "
            f"{_rule_value_words(row.field, row.winner)} (the narrower rule)."
        )
    return sentences


@dataclass(frozen=True)
class SlipInForce:
    """The owner's live slip for a room, in words, and what changed from the one before."""

    signed_at: str
    expires_at: str
    sentences: list[str]
    changes: SlipChanges | None  # None when it replaced no earlier slip
    replaced_at: str | None
    # Why it clears nothing although it is the latest (expired, its key revoked), or None.
    warning: str | None = None


def slip_in_force_words(
    *, owner: User, room_id: UUID, zone: tzinfo = UTC, now: datetime | None = None
) -> SlipInForce | None:
    """The owner's slip in force for the room in sentences (None if there is none), with the
    difference from the slip it replaced."""
    current = (
        Slip.objects.filter(owner=owner, room_id=room_id, superseded_at__isnull=True)
        .select_related("key")
        .order_by("-issued_at")
        .first()
    )
    if current is None:
        return None
    warning = None
    if current.key.revoked_at is not None:
        warning = "The key that signed it was revoked, so it shares nothing: sign it again."
    elif current.expires_at <= int((now or timezone.now()).timestamp()):
        warning = "It has expired, so it shares nothing: sign a new one."
    currency = owner_budget_currency(owner_id=owner.pk)
    capabilities = slip_capabilities(slip=current)
    sentences = [
        capability_sentence(c, currency=currency, slip_expires_at=current.expires_at, zone=zone)
        for c in capabilities
    ]
    previous = Slip.objects.filter(superseded_by=current).first()
    changes = None
    if previous is not None:
        changes = slip_changes(
            slip_capabilities(slip=previous),
            capabilities,
            before_expires_at=previous.expires_at,
            after_expires_at=current.expires_at,
            currency=currency,
            zone=zone,
        )
    return SlipInForce(
        signed_at=when_in_words(current.issued_at, zone),
        expires_at=when_in_words(current.expires_at, zone),
        sentences=sentences,
        changes=changes,
        replaced_at=when_in_words(previous.issued_at, zone) if previous else None,
        warning=warning,
    )

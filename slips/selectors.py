"""Reads for device keys, slips, conflicts and the owner's own vault, scoped to who asks."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.contrib.auth.models import User
from django.db.models import QuerySet

from slips.canonical import payload_parse_canonical
from slips.capabilities import Capability
from slips.models import DeviceKey, Slip, SlipConflict, VaultItem
from slips.payload import slip_payload_read
from slips.vault import vault_open


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

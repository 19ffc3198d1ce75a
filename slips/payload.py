"""The signed slip payload and the key-proof payload: their fields and strict readers.

A slip payload (signed as ``SLIP_TAG + canonical JSON``)::

    {"v": 1, "room_id": "<uuid>", "owner_id": "<owner pk as text>", "agent_id": "<uuid>",
     "key_id": "<uuid>", "nonce": "<16-64 base64url chars>", "issued_at": <unix s>,
     "expires_at": <unix s>, "capabilities": [<capability record>, ...]}

Every field is required and no other field is allowed; UUIDs are in their lowercase,
hyphenated form so that one identity has one spelling.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from slips.capabilities import Capability, capability_from_record
from slips.errors import Malformed

PAYLOAD_VERSION = 1
MAX_CAPABILITIES = 64
NONCE = re.compile(r"[A-Za-z0-9_-]{16,64}")
SLIP_FIELDS = frozenset(
    {
        "v",
        "room_id",
        "owner_id",
        "agent_id",
        "key_id",
        "nonce",
        "issued_at",
        "expires_at",
        "capabilities",
    }
)
KEY_PROOF_FIELDS = frozenset({"challenge", "label", "owner_id", "public_key", "purpose"})


@dataclass(frozen=True)
class SlipPayload:
    room_id: UUID
    owner_id: str
    agent_id: UUID
    key_id: UUID
    nonce: str
    issued_at: int
    expires_at: int
    capabilities: tuple[Capability, ...]


def _uuid(value: Any, field: str) -> UUID:
    try:
        parsed = UUID(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None or str(parsed) != value:
        raise Malformed("bad_field", f"{field} must be a lowercase hyphenated UUID.")
    return parsed


def _typed(payload: dict[str, Any], field: str, kind: type) -> Any:
    value = payload[field]
    if type(value) is not kind:
        raise Malformed("bad_field", f"{field} has the wrong type.")
    return value


def slip_payload_read(payload: dict[str, Any]) -> SlipPayload:
    """Check a parsed slip payload's shape and read it (capabilities with narrowest defaults)."""
    unknown = set(payload) - SLIP_FIELDS
    if unknown:
        raise Malformed("unknown_field", f"Unknown slip field {sorted(unknown)[0]!r}.")
    missing = SLIP_FIELDS - set(payload)
    if missing:
        raise Malformed("missing_field", f"The slip lacks {sorted(missing)[0]!r}.")
    if payload["v"] != PAYLOAD_VERSION or type(payload["v"]) is not int:
        raise Malformed("bad_version", f"Only slip payload version {PAYLOAD_VERSION} is known.")
    owner_id = _typed(payload, "owner_id", str)
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", owner_id):
        raise Malformed("bad_field", "owner_id is not an owner id.")
    nonce = _typed(payload, "nonce", str)
    if not NONCE.fullmatch(nonce):
        raise Malformed("bad_field", "nonce must be 16-64 base64url characters.")
    issued_at = _typed(payload, "issued_at", int)
    expires_at = _typed(payload, "expires_at", int)
    if not 0 < issued_at < expires_at:
        raise Malformed("bad_field", "expires_at must come after issued_at.")
    records = _typed(payload, "capabilities", list)
    if len(records) > MAX_CAPABILITIES:
        raise Malformed("too_many_capabilities", f"A slip holds at most {MAX_CAPABILITIES}.")
    capabilities = tuple(capability_from_record(r, slip_expires_at=expires_at) for r in records)
    seen: set[tuple[str, str]] = set()
    for c in capabilities:
        if (c.resource, c.operation) in seen:
            raise Malformed("duplicate_capability", f"{c.resource}/{c.operation} is listed twice.")
        seen.add((c.resource, c.operation))
    return SlipPayload(
        room_id=_uuid(payload["room_id"], "room_id"),
        owner_id=owner_id,
        agent_id=_uuid(payload["agent_id"], "agent_id"),
        key_id=_uuid(payload["key_id"], "key_id"),
        nonce=nonce,
        issued_at=issued_at,
        expires_at=expires_at,
        capabilities=capabilities,
    )


def key_proof_payload(
    *, challenge: str, label: str, owner_id: str, public_key: str, purpose: str
) -> dict[str, Any]:
    """What a new key signs (after ``KEY_PROOF_TAG``) to prove the browser holds it."""
    return {
        "challenge": challenge,
        "label": label,
        "owner_id": owner_id,
        "public_key": public_key,
        "purpose": purpose,
    }

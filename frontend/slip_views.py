"""Owner pages for device keys and a room's permission slip.

Keys and slips are made and signed in the browser (``devicekeys.js``, ``slip.js``) through the
REST API; these views render what the server knows in words: the keys, the checklist (one
sentence per item, built by ``slips.sentences``), what each tier allows of each item (a tier
only narrows the draft), the slip in force and what changed, and where the owners' choices
conflict.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone

from gatekeeper.tools import tools_all
from rooms import selectors as room_selectors
from rooms.errors import RoomError
from slips import selectors as slip_selectors
from slips.capabilities import (
    APPROVALS,
    MAX_USES_LIMIT,
    VAULT_SCOPES,
    Capability,
    capability_under_tier,
)
from slips.models import DeviceKey, KeyCustody, Tier
from slips.sentences import (
    KIND_NAMES,
    KIND_TITLES,
    TIER_EFFECTS,
    TIER_NAMES,
    checklist_sentences,
)
from synapsia.owners import OwnerRequest

# --- the keys page ------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyRow:
    id: UUID  # only in data attributes, for the buttons; never shown
    label: str
    fingerprint: str
    status: str
    meaning: str
    active: bool
    created_at: Any
    last_used_at: Any
    demo: bool


def key_fingerprint(public_key: bytes) -> str:
    """A short, readable fingerprint of a public key (the first 8 bytes of its SHA-256, in
    four groups), so an owner can tell their devices apart without seeing an id."""
    digest = hashlib.sha256(public_key).hexdigest()[:16].upper()
    return " ".join(digest[i : i + 4] for i in range(0, 16, 4))


def _key_status(key: DeviceKey) -> tuple[str, str, bool]:
    """The key's status as a word, what it means, and whether it still signs."""
    if key.revoked_at is not None:
        return "Revoked", "the slips it signed clear nothing any more", False
    if key.retired_at is not None:
        return (
            "Rotated",
            "replaced by a newer key; its slips still count, it signs no new ones",
            (False),
        )
    return "Active", "signs your permission slips", True


@login_required
def keys(request: OwnerRequest) -> HttpResponse:
    rows = []
    for key in slip_selectors.keys_of_owner(owner=request.user).order_by("-created_at"):
        status, meaning, active = _key_status(key)
        rows.append(
            KeyRow(
                id=key.id,
                label=key.label,
                fingerprint=key_fingerprint(bytes(key.public_key)),
                status=status,
                meaning=meaning,
                active=active,
                created_at=key.created_at,
                last_used_at=key.last_used_at,
                demo=key.custody == KeyCustody.DEMO_SEEDING,
            )
        )
    return render(request, "frontend/keys.html", {"keys": rows})


# --- the slip page ------------------------------------------------------------------------------
# Words for the kinds and scopes the slip signs: the scope words are the "How much" options;
# the page also carries both as data (``slip-words``), every kind and scope there is.
SLIP_WORDS: dict[str, dict[str, str]] = {
    "resources": dict(KIND_TITLES),
    "scopes": {
        "free_busy_24h": "Free/busy for the next 24 hours",
        "free_busy_7d": "Free/busy for the next 7 days",
        "free_busy_14d": "Free/busy for the next 14 days",
        "free_busy_30d": "Free/busy for the next 30 days",
        "band": "Share a rough budget band (rounded to 10)",
        "range": "Share the exact budget range",
        "list": "The whole list",
        "name": "The neighbourhood's name",
        "url": "The link",
        "text": "The note's text",
    },
}

# Each checklist row is one capability record: what the owner's own agent may know (``read``)
# or what the other agent may see (``disclose`` to ``peer_agent``), each at its own scope.
AUDIENCES: tuple[tuple[str, str, str, str], ...] = (
    ("own", "read", "own_agent", "Your agent"),
    ("peer", "disclose", "peer_agent", "The other agent"),
)
DEFAULT_SCOPE: dict[tuple[str, str], str] = {
    ("availability", "own"): "free_busy_14d",
    ("availability", "peer"): "free_busy_7d",
    ("budget", "own"): "range",
    ("budget", "peer"): "band",
}
DEFAULT_MAX_USES = 100  # one use per context turn: enough for a long negotiation
DEFAULT_TOOL_USES = 3  # each action done spends one

# What choosing a tier does to the checklist, said next to the tier. A tier only takes away:
# the page unchecks or cuts what the tier does not allow and never checks a box or widens a
# scope (``tier_limits``, applied by ``slip.js``); unchecked stays unshared.
TIER_NARROWS_WORDS: dict[str, str] = {
    Tier.SANDBOX: "Every item from your vault is unchecked below, since under Sandbox none of "
    "it reaches either agent; each action you checked will ask you first.",
    Tier.ROOM_ONLY: "For the other agent, an exact budget is cut to a rough band and free and "
    "busy times to at most 7 days, and nothing may be carried out of the room. Everything "
    "else stays as you set it.",
    Tier.COLLABORATIVE: "Your checklist stays exactly as you set it.",
}


@dataclass(frozen=True)
class ChecklistRow:
    key: str  # "budget-peer": names the row's controls and its tier limits
    resource: str
    operation: str
    recipient: str
    audience: str
    sentence: str
    scopes: list[tuple[str, str]]  # (code, words), narrowest first
    scope: str
    max_uses: int = DEFAULT_MAX_USES
    uses_label: str = "How many turns it may be given"
    uses_help: str = "Each turn of the conversation that includes it counts once."


@dataclass(frozen=True)
class ChecklistKind:
    resource: str
    title: str
    rows: list[ChecklistRow]


def _checklist(kinds: set[str], sentences: dict[str, str]) -> list[ChecklistKind]:
    checklist = []
    for resource, scopes in VAULT_SCOPES.items():
        if resource not in kinds:
            continue
        rows = []
        for who, operation, recipient, audience in AUDIENCES:
            scope = DEFAULT_SCOPE.get((resource, who), scopes[0])
            rows.append(
                ChecklistRow(
                    key=f"{resource}-{who}",
                    resource=resource,
                    operation=operation,
                    recipient=recipient,
                    audience=audience,
                    sentence=sentences[f"{resource}|{operation}|{scope}|{recipient}"],
                    scopes=[(s, SLIP_WORDS["scopes"][s]) for s in scopes],
                    scope=scope,
                )
            )
        checklist.append(ChecklistKind(resource=resource, title=KIND_TITLES[resource], rows=rows))
    return checklist


def slip_tools() -> tuple[str, ...]:
    """The action tools a slip can clear ("tool:<name>"): those that touch the owner's data
    or money (the others need no slip item, so offering them would mean nothing)."""
    return tuple(
        f"tool:{spec.name}" for spec in tools_all() if spec.effective_manifest.touches_owner_data
    )


def _action_rows(tools: tuple[str, ...], sentences: dict[str, str]) -> list[ChecklistRow]:
    return [
        ChecklistRow(
            key=f"tool-{tool.removeprefix('tool:')}",
            resource=tool,
            operation="act",
            recipient="own_agent",
            audience="Your agent",
            sentence=sentences[f"{tool}|act|call|own_agent"],
            scopes=[("call", "")],
            scope="call",
            max_uses=DEFAULT_TOOL_USES,
            uses_label="How many times it may be done",
            uses_help="Each time your agent does it counts once; after that, it asks you.",
        )
        for tool in tools
    ]


def _row_limit(row: ChecklistRow, tier: str) -> dict[str, Any] | None:
    """What ``tier`` lets through of ``row``, by the server's own rule
    (``capability_under_tier`` on the widest record the row can sign): the scopes it allows
    (narrowest first), whether it may leave the room, whether it must ask first; None when
    the tier clears nothing of it."""
    scopes = [code for code, _ in row.scopes]
    widest = Capability(
        resource=row.resource,
        operation=row.operation,
        scope=scopes[-1],
        recipient=row.recipient,
        expires_at=2**62,
        max_uses=MAX_USES_LIMIT,
        onward_disclosure=True,
        approval=APPROVALS[-1],  # the widest: no asking
    )
    effective = capability_under_tier(widest, tier)
    if effective is None:
        return None
    return {
        "scopes": scopes[: scopes.index(effective.scope) + 1],
        "onward": effective.onward_disclosure,
        "ask": effective.approval != APPROVALS[-1],
    }


def tier_limits(rows: list[ChecklistRow]) -> dict[str, dict[str, dict[str, Any] | None]]:
    """Per tier, per row key, what the tier allows (``_row_limit``). ``slip.js`` narrows the
    draft to it when the owner chooses a tier, and only narrows: it unchecks a row the tier
    clears nothing of, cuts a wider scope, unchecks onward disclosure and sets "ask me first"
    where the tier says so, and never checks a box or widens anything. The page only helps the
    owner see it: the server narrows every use by the room's tier whatever was signed."""
    return {tier: {row.key: _row_limit(row, tier) for row in rows} for tier in Tier.values}


@login_required
def slip(request: OwnerRequest, room_id: UUID) -> HttpResponse:
    try:
        seat = room_selectors.room_seat(owner=request.user, room_id=room_id)
    except RoomError:
        return render(request, "frontend/not_found.html", status=404)
    owner = request.user
    zone = timezone.get_current_timezone()
    kinds = slip_selectors.vault_kinds_of_owner(owner_id=owner.pk)
    tools = slip_tools()
    sentences = checklist_sentences(
        slip_selectors.owner_budget_currency(owner_id=owner.pk), tools=tools
    )
    checklist = _checklist(kinds, sentences)
    actions = _action_rows(tools, sentences)
    chosen = slip_selectors.owner_tier(owner_id=owner.pk, room_id=room_id)
    in_force = slip_selectors.slip_in_force_words(owner=owner, room_id=room_id, zone=zone)
    current = slip_selectors.slips_of_owner(owner=owner, room_id=room_id).filter(
        superseded_at__isnull=True
    )
    return render(
        request,
        "frontend/slip.html",
        {
            "room": seat.room,
            "seat": seat,
            "slip_words": SLIP_WORDS,
            "checklist": checklist,
            "actions": actions,
            "missing": [{"kind": k, "name": KIND_NAMES[k]} for k in VAULT_SCOPES if k not in kinds],
            "tiers": [
                {
                    "value": t.value,
                    "name": TIER_NAMES[t.value],
                    "effect": TIER_EFFECTS[t.value],
                    "chosen": chosen == t.value,
                    "narrows": TIER_NARROWS_WORDS[t.value],
                }
                for t in Tier
            ],
            "tier_words": slip_selectors.room_tier_words(room_id, reader_id=owner.pk),
            "conflicts": slip_selectors.conflicts_in_words(room_id=room_id, reader_id=owner.pk),
            "in_force": in_force,
            "signed": request.GET.get("signed") == "1" and in_force is not None,
            "sentences": sentences,
            "tier_limits": tier_limits([r for k in checklist for r in k.rows] + actions),
            # The slip in force's records, so the checklist starts from what is signed now.
            "in_force_issued_at": current[0].issued_at if current else None,
            "current": [
                c.as_record()
                for c in (slip_selectors.slip_capabilities(slip=current[0]) if current else ())
            ],
        },
    )

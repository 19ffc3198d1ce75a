"""The preview of a draft slip: exactly what each agent would receive, in words.

Nothing is signed, stored or recorded. The preview walks the same path a disclosure does
(``gatekeeper.decision`` and ``rooms.context``): for each agent it picks the record that would
clear the item (for the owner's own agent a ``read`` record before a ``disclose`` one; for the
other agent only ``disclose``), narrows it by the room's tier with
``slips.capabilities.capability_under_tier`` and cuts the owner's vault with
``slips.vault.vault_scoped_view`` — the very function a context turn calls — and only then
puts the result into words.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Any, Literal

from slips.capabilities import (
    VAULT_SCOPES,
    Capability,
    capability_from_record,
    capability_under_tier,
    recipient_covers,
)
from slips.config import slips_setting
from slips.errors import Malformed
from slips.money import minor_in_words
from slips.sentences import (
    KIND_TITLES,
    SCOPE_CHOICES,
    TIER_EFFECTS,
    TIER_NAMES,
    TOOL_PHRASES,
    capability_sentence,
    tool_words,
    when_in_words,
)
from slips.vault import vault_scoped_view

Recipient = Literal["own_agent", "peer_agent"]
MAX_BUSY_LINES = 12


@dataclass(frozen=True)
class PreviewItem:
    """One vault kind as one agent would receive it."""

    resource: str
    title: str
    shown: list[str]  # the content, line by line, in words
    note: str = ""  # how the tier or an approval changes when or how much arrives
    # The scoped views exactly as a context turn would carry them (for tests; never sent).
    views: list[dict[str, Any]] = field(default_factory=list, compare=False, repr=False)


@dataclass(frozen=True)
class AgentPreview:
    agent: str  # "Your agent" or "The other agent"
    recipient: Recipient
    items: list[PreviewItem]


@dataclass(frozen=True)
class SlipPreview:
    tier: str
    tier_name: str
    tier_effect: str
    agents: list[AgentPreview]
    held_back: list[str]  # sentences of checked items the tier keeps from every agent


def draft_capabilities(records: Any, *, now: datetime) -> tuple[Capability, ...]:
    """Read a draft's capability records as a signed slip's would be read (narrowest defaults
    for omitted fields, the same refusals); ``Malformed`` names the first problem."""
    if not isinstance(records, list):
        raise Malformed("bad_capability", "The draft's capabilities are a list.")
    longest = int(now.timestamp()) + int(slips_setting("MAX_LIFETIME_DAYS")) * 86_400
    capabilities = tuple(capability_from_record(r, slip_expires_at=longest) for r in records)
    seen: set[tuple[str, str]] = set()
    for c in capabilities:
        if (c.resource, c.operation) in seen:
            raise Malformed("duplicate_capability", "An item is listed twice in the draft.")
        seen.add((c.resource, c.operation))
    return capabilities


def _clearing(
    capabilities: tuple[Capability, ...], *, resource: str, recipient: Recipient, tier: str
) -> tuple[Capability, Capability] | None:
    """The record that would clear ``resource`` for ``recipient`` and its effective form under
    ``tier`` (the first record that clears, in the Gatekeeper's order), or None."""
    operations = ("read", "disclose") if recipient == "own_agent" else ("disclose",)
    for operation in operations:
        granted = next(
            (c for c in capabilities if (c.resource, c.operation) == (resource, operation)), None
        )
        if granted is None or not recipient_covers(granted.recipient, recipient):
            continue
        effective = capability_under_tier(granted, tier)
        if effective is not None:
            return granted, effective
    return None


def _span(start: int, end: int, zone: tzinfo) -> str:
    first, last = when_in_words(start, zone), when_in_words(end, zone)
    same_day = first.split(",")[0] == last.split(",")[0]
    return f"{first} to {last.split(', ')[1] if same_day else last}"


def view_in_words(resource: str, view: dict[str, Any], zone: tzinfo) -> list[str]:
    """One scoped view (what ``vault_scoped_view`` returns for one item) in words."""
    if resource == "availability":
        zone_name = getattr(zone, "key", None) or str(zone)
        lines = [
            f"Free and busy times from {_span(view['from'], view['until'], zone)} ({zone_name})"
        ]
        busy = view["busy"]
        if not busy:
            lines.append("Free the whole time")
        for start, end in busy[:MAX_BUSY_LINES]:
            lines.append(f"Busy {_span(start, end, zone)}")
        if len(busy) > MAX_BUSY_LINES:
            lines.append(f"and {len(busy) - MAX_BUSY_LINES} more busy times")
        return lines
    if resource == "budget":
        currency = view["currency"]
        low, high = minor_in_words(view["min"], currency), minor_in_words(view["max"], currency)
        if view.get("band"):
            return [f"About {low} to {high} {currency} per person (a rough band)"]
        return [f"{low} to {high} {currency} per person"]
    if "items" in view:
        words = [str(i).replace("-", " ") for i in view["items"]]
        return [", ".join(words) if words else "An empty list"]
    for key in ("name", "url", "text"):
        if key in view:
            return [str(view[key])]
    return []


def _item(
    *,
    owner_id: Any,
    granted: Capability,
    effective: Capability,
    tier: str,
    now: datetime,
    zone: tzinfo,
) -> PreviewItem | None:
    views = vault_scoped_view(owner_id=owner_id, capability=effective, now=now)
    if not views:
        return None  # the owner has no such item: nothing to show, nothing would be spent
    notes: list[str] = []
    if effective.scope != granted.scope:
        notes.append(
            f"{TIER_NAMES[tier]} cuts this from {SCOPE_CHOICES[granted.scope].lower()} to "
            f"{SCOPE_CHOICES[effective.scope].lower()}."
        )
    if effective.approval == "per_use":
        notes.append(
            "Only after you approve it: the room asks you when it is first needed, and the "
            "agent goes without it until you answer."
        )
    shown = [line for view in views for line in view_in_words(granted.resource, view, zone)]
    return PreviewItem(
        resource=granted.resource,
        title=KIND_TITLES[granted.resource],
        shown=shown,
        note=" ".join(notes),
        views=views,
    )


def _action_item(granted: Capability, *, tier: str) -> PreviewItem:
    """An action the owner's own agent may take: a permission, not data (no view)."""
    effective = capability_under_tier(granted, tier) or granted  # tiers never drop a tool
    name = tool_words(granted.resource)
    phrase = TOOL_PHRASES.get(granted.resource.removeprefix("tool:"), f"use the “{name}” action")
    times = "once" if effective.max_uses == 1 else f"up to {effective.max_uses} times"
    note = ""
    if effective.approval == "per_use":
        note = "It asks you in the room before each time."
        if granted.approval != "per_use":
            note = f"{TIER_NAMES[tier]} makes it ask you in the room before each time."
    return PreviewItem(
        resource=granted.resource,
        title=f"Action: {name}",
        shown=[f"May {phrase}, {times}"],
        note=note,
    )


def slip_preview(
    *,
    owner_id: Any,
    capabilities: tuple[Capability, ...],
    tier: str,
    now: datetime,
    zone: tzinfo = UTC,
    currency: str | None = None,
) -> SlipPreview:
    """What each agent would receive of ``owner_id``'s vault under a slip of ``capabilities``
    in a room running under ``tier``, at ``now``. Reads only."""
    agents: list[AgentPreview] = []
    audiences: tuple[tuple[Recipient, str], ...] = (
        ("own_agent", "Your agent"),
        ("peer_agent", "The other agent"),
    )
    for recipient, name in audiences:
        items: list[PreviewItem] = []
        for resource in VAULT_SCOPES:
            cleared = _clearing(capabilities, resource=resource, recipient=recipient, tier=tier)
            if cleared is None:
                continue
            item = _item(
                owner_id=owner_id,
                granted=cleared[0],
                effective=cleared[1],
                tier=tier,
                now=now,
                zone=zone,
            )
            if item is not None:
                items.append(item)
        if recipient == "own_agent":
            items.extend(_action_item(c, tier=tier) for c in capabilities if not c.is_vault)
        agents.append(AgentPreview(agent=name, recipient=recipient, items=items))
    held_back = [
        capability_sentence(c, currency=currency, details=False)
        for c in capabilities
        if c.is_vault and capability_under_tier(c, tier) is None
    ]
    return SlipPreview(
        tier=tier,
        tier_name=TIER_NAMES[tier],
        tier_effect=TIER_EFFECTS[tier],
        agents=agents,
        held_back=held_back,
    )

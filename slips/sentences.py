"""A slip in words: one sentence per capability record, the privacy tiers' effects, and what
changed between two slips.

Everything an owner reads about a slip is built here, from the typed records, so the checklist
they sign, the slip in force, the diff and the room page all say the same thing. No code (a
scope, a recipient, an operation) ever reaches a sentence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo

from slips.capabilities import VAULT_SCOPES, Capability
from slips.models import Tier
from slips.money import BAND_STEP_UNITS

# What each vault kind is called when the owner lacks it ("Add your budget to your vault").
KIND_NAMES: dict[str, str] = {
    "availability": "your busy times",
    "budget": "your budget",
    "food_likes": "the food you like",
    "food_dislikes": "the food you would rather not eat",
    "allergies": "your allergies",
    "neighbourhood": "your home neighbourhood",
    "link": "a link",
    "note": "a note",
}

# The checklist's heading for each kind.
KIND_TITLES: dict[str, str] = {
    "availability": "When you are free",
    "budget": "Your budget",
    "food_likes": "Food you like",
    "food_dislikes": "Food you would rather not eat",
    "allergies": "Your allergies",
    "neighbourhood": "Your home neighbourhood",
    "link": "Your links",
    "note": "Your notes",
}

# How much of a kind a scope shares, as the scope chooser offers it.
SCOPE_CHOICES: dict[str, str] = {
    "free_busy_24h": "The next 24 hours",
    "free_busy_7d": "The next 7 days",
    "free_busy_14d": "The next 14 days",
    "free_busy_30d": "The next 30 days",
    "band": "A rough band (rounded out to tens)",
    "range": "The exact range",
    "list": "The whole list",
    "name": "Its name",
    "url": "The link",
    "text": "The whole note",
}

_DAYS = {"free_busy_7d": 7, "free_busy_14d": 14, "free_busy_30d": 30}


def _thing(resource: str, scope: str, currency: str | None) -> str:
    """What of ``resource`` a record at ``scope`` shares, as the object of a sentence."""
    if resource == "availability":
        span = "24 hours" if scope == "free_busy_24h" else f"{_DAYS[scope]} days"
        return f"when I am free in the next {span}, without titles"
    if resource == "budget":
        if scope == "range":
            return "my exact budget range per person"
        unit = f"{BAND_STEP_UNITS} {currency}" if currency else f"{BAND_STEP_UNITS}"
        return f"a rough band of my budget per person (rounded out to {unit})"
    return {
        "food_likes": "the food I like",
        "food_dislikes": "the food I would rather not eat",
        "allergies": "my allergies",
        "neighbourhood": "the name of my home neighbourhood",
        "link": "my links",
        "note": "my notes",
    }[resource]


# What an action tool lets the owner's agent do, as the end of "Let my agent …". A tool not
# listed here reads as "use the “<name>” action for me".
TOOL_PHRASES: dict[str, str] = {
    "propose_time": "propose a time to the other side",
    "book_table": "book tables at venues, within my budget",
    "spend": "pay for things, within my budget",
    "send_invitation": "send calendar invitations for the event",
    "publish_artifact": "publish documents to the room",
}


def tool_words(resource: str) -> str:
    """An action tool's name as a person reads it ("tool:book_table" -> "book table")."""
    name = resource.removeprefix("tool:")
    return " ".join(name.replace("_", " ").replace("-", " ").replace(".", " ").split())


# Publishing: the record's recipient also says who reads what the agent publishes
# (gatekeeper.sharing): ``both`` and ``peer_agent`` share it with the other agent, ``own_agent``
# keeps it with the two owners; only ``own_agent`` and ``both`` let the agent publish at all.
PUBLISH_SENTENCES: dict[str, str] = {
    "own_agent": (
        "Let my agent publish documents to the room (only the two owners see them; the other "
        "agent is not given them)"
    ),
    "both": "Let my agent publish documents to the room and share them with the other agent",
    "peer_agent": (
        "Let the other agent read the documents my agent publishes (this item does not let my "
        "agent publish: each publish asks me first)"
    ),
}


def _base(capability: Capability, currency: str | None) -> str:
    if capability.resource == "tool:publish_artifact" and capability.recipient in PUBLISH_SENTENCES:
        return PUBLISH_SENTENCES[capability.recipient]
    if not capability.is_vault:
        phrase = TOOL_PHRASES.get(capability.resource.removeprefix("tool:"))
        return (
            f"Let my agent {phrase or f'use the “{tool_words(capability.resource)}” action for me'}"
        )
    thing = _thing(capability.resource, capability.scope, currency)
    recipient = capability.recipient
    if capability.operation == "disclose":
        if recipient == "own_agent":
            return f"Let my agent know {thing}"
        if recipient == "peer_agent":
            return f"Let the other agent see {thing}"
        return f"Let my agent know {thing}, and let the other agent see it too"
    # "read": only ever the owner's own agent (the other agent is shown only what it may see).
    if recipient == "own_agent":
        return f"Let my agent know {thing}"
    if recipient == "both":
        return f"Let my agent know {thing} (the other agent is not shown it)"
    return (
        f"Show {thing} to neither agent (this item names the other agent but does not let it "
        "see anything)"
    )


def when_in_words(stamp: int, zone: tzinfo) -> str:
    """A unix time as an owner reads it, in their time zone ("Tue 1 Dec, 19:00")."""
    moment = datetime.fromtimestamp(stamp, tz=UTC).astimezone(zone)
    return f"{moment:%a} {moment.day} {moment:%b}, {moment:%H:%M}"


def capability_sentence(
    capability: Capability,
    *,
    currency: str | None = None,
    slip_expires_at: int | None = None,
    zone: tzinfo = UTC,
    details: bool = True,
) -> str:
    """One sentence for one capability record. ``details`` adds the options that differ from
    the checklist's defaults (uses, approval, onward disclosure, an earlier end)."""
    sentence = _base(capability, currency)
    if not details:
        return sentence + "."
    extras: list[str] = []
    extras.append("once" if capability.max_uses == 1 else f"up to {capability.max_uses} times")
    if capability.approval == "per_use":
        extras.append("asking me before each use")
    if capability.onward_disclosure:
        extras.append("it may be carried out of the room")
    if slip_expires_at is not None and capability.expires_at < slip_expires_at:
        extras.append(f"until {when_in_words(capability.expires_at, zone)}")
    return f"{sentence} ({'; '.join(extras)})."


def checklist_sentences(currency: str | None = None, tools: tuple[str, ...] = ()) -> dict[str, str]:
    """The short sentence for every (resource, operation, scope, recipient) the checklist can
    offer for a vault kind, and for each action tool in ``tools`` ("tool:<name>"), keyed
    ``resource|operation|scope|recipient`` (the page swaps the sentence as the owner changes
    the scope)."""
    sentences: dict[str, str] = {}
    for tool in tools:
        # Publishing's recipient changes what it means (who reads the documents): all three.
        recipients = PUBLISH_SENTENCES if tool == "tool:publish_artifact" else ("own_agent",)
        for recipient in recipients:
            capability = Capability(tool, "act", "call", recipient, 0, 1, False, "none")
            sentences[f"{tool}|act|call|{recipient}"] = capability_sentence(
                capability, details=False
            )
    for resource, scopes in VAULT_SCOPES.items():
        for operation in ("read", "disclose"):
            for scope in scopes:
                for recipient in ("own_agent", "peer_agent", "both"):
                    capability = Capability(
                        resource=resource,
                        operation=operation,
                        scope=scope,
                        recipient=recipient,
                        expires_at=0,
                        max_uses=1,
                        onward_disclosure=False,
                        approval="none",
                    )
                    key = f"{resource}|{operation}|{scope}|{recipient}"
                    sentences[key] = capability_sentence(
                        capability, currency=currency, details=False
                    )
    return sentences


# --- tiers -------------------------------------------------------------------------------------

TIER_NAMES: dict[str, str] = {t.value: str(t.label) for t in Tier}

# Shown next to each choice on the slip page: what the tier does to *this owner's* items.
TIER_EFFECTS: dict[str, str] = {
    Tier.SANDBOX: (
        "Nothing from your vault reaches either agent, whatever you check below. Every action "
        "an agent wants to take waits for your approval."
    ),
    Tier.ROOM_ONLY: (
        "The other agent gets the least of each item: your budget only as a rough band, your "
        "free and busy times for at most the next 7 days. Nothing may be carried out of the "
        "room. Your own agent gets what you check."
    ),
    Tier.COLLABORATIVE: (
        "Each agent gets exactly what you check below, nothing held back, and an item you "
        "allow to leave the room may be carried out of it."
    ),
}

# The same effect said of the whole room (for the room page and the conflicts list).
TIER_ROOM_EFFECTS: dict[str, str] = {
    Tier.SANDBOX: (
        "nothing from either vault reaches any agent, and every action waits for its "
        "owner's approval"
    ),
    Tier.ROOM_ONLY: (
        "each agent sees the least of the other owner's items (a budget only as a rough "
        "band, free and busy times for at most the next 7 days), and nothing may be carried "
        "out of the room"
    ),
    Tier.COLLABORATIVE: "each agent gets exactly what the owners' slips say",
}


# --- what changed between two slips ------------------------------------------------------------


@dataclass(frozen=True)
class SlipChanges:
    """What a new slip shares that the one it replaced did not, and the other way round."""

    now_shared: list[str] = field(default_factory=list)
    no_longer_shared: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)

    @property
    def any(self) -> bool:
        return bool(self.now_shared or self.no_longer_shared or self.changed)


def slip_changes(
    before: tuple[Capability, ...],
    after: tuple[Capability, ...],
    *,
    before_expires_at: int,
    after_expires_at: int,
    currency: str | None = None,
    zone: tzinfo = UTC,
) -> SlipChanges:
    """The difference between two slips, item by item (an item is a resource and operation;
    a slip holds at most one of each), in sentences."""

    def say(c: Capability, expires_at: int) -> str:
        return capability_sentence(c, currency=currency, slip_expires_at=expires_at, zone=zone)

    old = {(c.resource, c.operation): c for c in before}
    new = {(c.resource, c.operation): c for c in after}
    changes = SlipChanges()
    for key, c in new.items():
        if key not in old:
            changes.now_shared.append(say(c, after_expires_at))
            continue
        was, now = say(old[key], before_expires_at), say(c, after_expires_at)
        if was != now:
            changes.changed.append(f"{now.removesuffix('.')} (before: {was.removesuffix('.')}).")
    for key, c in old.items():
        if key not in new:
            changes.no_longer_shared.append(say(c, before_expires_at))
    return changes

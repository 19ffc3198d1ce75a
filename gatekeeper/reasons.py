"""Rule ids and ledger events in words: the one catalogue every page and receipt reads.

The server records short rule ids ("beyond_slip.not_in_slip", "catalogue.closed",
"policy.deny:db:<agent>") because they are stable and fit the ledger's identifier pattern.
People read sentences instead. ``rule_sentence`` turns any rule id the server can record into
one plain sentence; ``event_sentence`` does the same for a ledger event, naming owners and
agents from a mapping of ids to names the page builds from the room's seats.

Nothing here ever returns an id: a rule this catalogue does not know gets a neutral sentence
(and a log line, so the gap is fixed here), an id with no name gets "an owner" / "an agent".
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any

from synapsia_protocol import VAULT_KIND_WORDS

logger = logging.getLogger(__name__)

# Said for a rule id this catalogue does not know yet; it never shows the id itself.
UNKNOWN_RULE_SENTENCE = "The server applied one of its safety rules here."

# --- how sentences name the owner -------------------------------------------------------------
# Sentences about an owner's own slip, budget or grant are written with {your}/{you}: second
# person by default (the owner reading their grant), third person when a name is given (the
# other owner reading the ledger). {You}/{Your} start a sentence.


def _person(template: str, owner: str | None) -> str:
    if owner is None:
        words = {"you": "you", "your": "your", "You": "You", "Your": "Your"}
    else:
        words = {"you": owner, "your": f"{owner}'s", "You": owner, "Your": f"{owner}'s"}
    return template.format_map(words)


# --- slip verdicts ----------------------------------------------------------------------------
# Why a permission slip does not clear something (slips.verification). Each is a clause that
# reads on its own and after "beyond_slip." (the room then asks the owner instead).
_SLIP_CLAUSES: dict[str, str] = {
    "no_slip": "There is no signed permission slip for this agent in this room",
    "foreign_key": "The permission slip was signed with a device key of someone else",
    "key_revoked": "The permission slip was signed with a device key that has been revoked",
    "bad_signature": "The permission slip's signature does not check out",
    "binding_mismatch": "The permission slip was signed for a different room, agent or owner",
    "slip_expired": "The permission slip has expired",
    "slip_not_yet_valid": "The permission slip is not valid yet",
    "not_in_slip": "This is not on {your} permission slip",
    "recipient_not_cleared": "{Your} permission slip does not allow sharing this with them",
    "capability_expired": "This permission on {your} slip has expired",
    "uses_exhausted": "{Your} permission slip's uses for this are all spent",
    "tier_forbids": "The room's privacy tier does not allow this",
    "verification_error": "The permission slip could not be checked",
}

# --- everything else, by exact id ---------------------------------------------------------------
_SENTENCES: dict[str, str] = {
    # Decisions that allowed.
    "cleared": "{Your} permission slip allows this.",
    "granted": "{You} approved this with a signed grant.",
    # Needs a grant: the room stops and asks the agent's owner.
    "approval_per_use": "{Your} permission slip says to ask each time, so the room asked {you}"
    " first.",
    "no_budget_known": "This costs money and {your} vault has no budget, so the room asked {you}"
    " first.",
    "over_budget": "This costs more than {your} budget allows, so the room asked {you} first.",
    # Grants.
    "grant_expired": "Nobody answered the request in time, so it expired and nothing happened.",
    "grant_denied": "{You} said no to this request, so nothing happened.",
    "owner_denied": "{You} said no to this request, so nothing happened.",
    "grant_key_not_usable": "The approval was signed with a device key that is not enrolled or"
    " was revoked, so it did not count.",
    "grant_bad_signature": "The approval's signature does not check out, so it did not count.",
    # The request itself.
    "unknown_tool": "The agent asked for a tool that does not exist; it was told, and nothing"
    " happened.",
    "tool.unknown": "The agent asked for a tool that does not exist; it was told, and nothing"
    " happened.",
    "invalid_arguments": "The agent's request was not filled in correctly; it was told, and"
    " nothing happened.",
    "idempotency_key_reused": "The agent reused a request number for a different request, so it"
    " was refused.",
    "contradiction": "The agent asked for the opposite of what it had just asked for, so the"
    " room stopped to ask its owner.",
    # The agent and the room.
    "agent_revoked": "This agent's access has been revoked, so it may not act.",
    "agent_withdrawn": "Its owner muted or blocked this agent, or stepped in, so it may not act.",
    "agent.advisor_only": "This agent only gives advice, so it may not take actions.",
    "agent.not_declared": "This agent did not list this tool when it joined, so it may not use it.",
    "room_not_open": "The room was paused or closed, so nothing happened.",
    "owner_request": "An owner paused the room.",
    "ledger_unavailable": "The ledger could not record this, so the room paused and nothing"
    " happened.",
    "slip_verification_error": "The permission slip could not be checked, so the server said no"
    " to be safe.",
    # The server's tool policy.
    "policy.not_allowed": "The server's tool policy lists the tools this agent may use, and this"
    " is not one of them.",
    "policy.default.deny_all": "The server allows a tool only when its policy names it, and this"
    " one is not named.",
    "policy.default.allow_all": "The server's tool policy allows this tool.",
    "policy.default_misconfigured": "The server's tool policy is misconfigured, so every tool"
    " is refused to be safe.",
    "policy.unreadable": "The server's tool policy could not be read, so every tool is refused"
    " to be safe.",
    # The venue catalogue (dining).
    "catalogue.no_terms": "This room has no dinner terms, so there is no venue catalogue to"
    " check a booking against.",
    "catalogue.terms_invalid": "This room's dinner terms cannot be read, so the booking was"
    " refused.",
    "catalogue.unavailable": "The room's venue catalogue cannot be read right now, so the booking"
    " was refused.",
    "catalogue.unknown_venue": "That venue is not in the room's catalogue, so it cannot be booked.",
    "catalogue.closed": "The venue is not open for the whole dinner at that time.",
    "catalogue.no_table": "The venue has no table for that many people.",
    "catalogue.price_mismatch": "The price in the booking does not match the venue's price in"
    " the catalogue.",
    # Disclosures an agent asked for.
    "disclosure.not_cleared": "The agent asked about the other owner's details; nothing of that"
    " kind was cleared for it.",
    "disclosure.room_not_open": "The agent asked about the other owner's details while the room"
    " was not open, so nothing was shared.",
    # Checks that failed (they always deny, and pause the room).
    "gatekeeper.error": "A safety check failed, so the server said no and paused the room.",
    "gatekeeper.ambiguous": "A safety check gave no clear answer, so the server said no and"
    " paused the room.",
    "gatekeeper.timeout": "A safety check took too long, so the server said no and paused the"
    " room.",
    "gatekeeper.clock_jump": "The server's clock jumped during a check, so it said no and paused"
    " the room.",
    "gatekeeper.unknown_request": "The server did not recognise the request, so it said no.",
    "gatekeeper.database_error": "The server could not read what it needed to check, so it"
    " shared nothing and paused the room.",
    # Flares (an agent, or the server on its behalf, stops and asks its owner).
    "flare.loop": "An agent seemed stuck in a loop and raised a flare; the room paused for its"
    " owner.",
    "flare.contradiction": "An agent contradicted itself and a flare was raised; the room paused"
    " for its owner.",
    "flare.distress": "An agent raised a flare asking its owner for help; the room paused.",
    "flare.repeated_denials": "An agent was refused several times in a row, so a flare was"
    " raised and the room paused for its owner.",
    # Suspected injection in peer text (rooms.untrusted.SuspicionRule).
    "role_token": "The message contained chat-control tokens, which were removed.",
    "hidden_text": "The message contained hidden characters, which were removed.",
    "fence_forgery": "The message tried to fake the end of its quoted section.",
    "instruction_to_reader": "The message gave orders to the agent reading it.",
    "fake_notice": "The message pretended to be a notice from the system or the room.",
    "reads_as_instruction": "The message reads like an instruction to the agent reading it.",
    # A slip the server refused when it was sent (slips.services, slips.errors codes).
    "bad_capability": "One of the slip's permissions is not valid.",
    "bad_field": "One of the slip's fields has a value that is not allowed.",
    "bad_label": "The device label is not valid.",
    "bad_proof": "The device key's proof does not check out.",
    "bad_purpose": "The stated purpose is not one the server accepts.",
    "bad_request": "The request was not understood.",
    "bad_signature": "The signature does not check out.",
    "bad_tier": "The privacy tier is not one the server knows.",
    "bad_version": "The slip was written in a format version the server does not accept.",
    "challenge_expired": "The key enrolment challenge expired; start again.",
    "challenge_unknown": "The key enrolment challenge is not known; start again.",
    "challenge_used": "The key enrolment challenge was already used; start again.",
    "duplicate_capability": "The slip lists the same permission twice.",
    "duplicate_key": "That device key is already enrolled.",
    "float_number": "The slip contains a decimal number where only whole numbers are allowed.",
    "foreign_key": "The device key belongs to someone else.",
    "ics_invalid": "The calendar file cannot be read.",
    "ics_oversized": "The calendar file is too large.",
    "ics_too_many": "The calendar file has too many events.",
    "integer_out_of_range": "The slip contains a number that is too large.",
    "invalid_json": "The slip is not readable data.",
    "invalid_vault_item": "The vault item is not valid.",
    "issued_in_future": "The slip's signing time is ahead of the server's clock.",
    "key_already_enrolled": "That device key is already enrolled.",
    "key_retired": "The device key has been replaced by a newer one.",
    "key_revoked": "The device key has been revoked.",
    "lifetime_too_long": "The slip would last longer than the server allows.",
    "lone_surrogate": "The slip contains a broken character.",
    "missing_field": "The slip is missing a field it needs.",
    "non_finite_number": "The slip contains a number that is not a real number.",
    "nonce_reused": "The slip reuses a one-time number, so it looks like a replay.",
    "not_an_object": "The slip is not in the expected shape.",
    "not_canonical": "The slip was not written in the exact form that is signed.",
    "not_nfc": "The text is not in the standard Unicode form.",
    "oversized": "The slip is too large.",
    "stale_issued_at": "The slip was signed too long ago; sign it again.",
    "stale_slip": "A newer slip replaced this one.",
    "too_deep": "The slip is nested too deeply.",
    "too_many_capabilities": "The slip lists more permissions than the server allows.",
    "unknown_field": "The slip contains a field the server does not know.",
    "unknown_key": "The device key is not enrolled.",
    "unknown_resource": "The slip names something the server does not know.",
    "unsupported_value": "The slip contains a value the server does not support.",
    "wrong_agent": "The slip was signed for a different agent.",
    "wrong_owner": "The slip was signed by a different owner.",
    "wrong_room": "The slip was signed for a different room.",
    "malformed_base64": "A key or signature is not in the expected encoding.",
    "invalid_utf8": "The slip contains bytes that are not valid text.",
    "slip_key_revoked": "The device key that signed the slip was revoked, so the slip no longer"
    " counts.",
    # Vault and server refusals an owner can meet while setting things up.
    "busy_too_many": "The vault holds too many busy times; clear some first.",
    "busy_unordered": "A busy time ends before it starts.",
    "cities_unavailable": "The list of cities cannot be read right now; try again later.",
    "unknown_allergen": "That allergen is not one the server knows.",
    "unknown_neighbourhood": "That neighbourhood is not one the server knows.",
    "vault_key": "The server's vault is not set up, so nothing could be read or stored.",
    "vault_sealed": "A vault item could not be opened with the server's key.",
    "ledger_key_unavailable": "The server has no ledger signing key, so it cannot sign the"
    " ledger right now.",
}

# Prefixes whose tail is a detail the sentence does not need (policy rules name their entry:
# "policy.deny:db:<agent id or *>", recorded as "policy.deny.db.<...>").
_PREFIX_SENTENCES: dict[str, str] = {
    "policy.deny": "The server's tool policy does not allow this agent to use this tool.",
    "policy.allow": "The server's tool policy allows this tool.",
    "gatekeeper.": "A safety check could not finish, so the server said no and paused the room.",
}


def _beyond_slip(inner: str) -> str | None:
    # Beyond the slip is always about an action the agent asked to take.
    clause = "This action is not on {your} permission slip" if inner == "not_in_slip" else None
    clause = clause or _SLIP_CLAUSES.get(inner)
    if clause is None:
        return None
    return clause + ", so the room asked {you} first."


def _template(rule: str) -> str | None:
    """The sentence template for ``rule`` ({you}/{your} unfilled), or None if unknown."""
    if rule in _SENTENCES:
        return _SENTENCES[rule]
    if rule.startswith("beyond_slip."):
        return _beyond_slip(rule.removeprefix("beyond_slip."))
    if rule in _SLIP_CLAUSES:
        return _SLIP_CLAUSES[rule] + ", so the server said no."
    for prefix, sentence in _PREFIX_SENTENCES.items():
        if (
            rule == prefix
            or rule.startswith((prefix + ":", prefix + "."))
            or (prefix.endswith(".") and rule.startswith(prefix))
        ):
            return sentence
    return None


@functools.cache
def _unknown_rule_logged(rule: str) -> None:
    # Once per rule and process: the page keeps working, the gap is visible in the logs.
    logger.warning("no sentence for rule id %r; add it to gatekeeper.reasons", rule[:80])


def rule_known(rule: str) -> bool:
    """Whether the catalogue has words for ``rule`` (its own, not the neutral fallback)."""
    return _template(rule) is not None


def rule_sentence(rule: str, *, owner: str | None = None) -> str:
    """One plain sentence saying what ``rule`` means for a person.

    ``owner`` names the owner whose slip, budget or grant the rule is about ("Alice"); without
    it the sentence speaks to that owner ("your permission slip", "asked you first"). An
    unknown rule gives ``UNKNOWN_RULE_SENTENCE`` and a log line; the id is never shown.
    """
    template = _template(rule)
    if template is None:
        _unknown_rule_logged(rule)
        return UNKNOWN_RULE_SENTENCE
    return _capitalised(_person(template, owner))


# --- tools and small vocabularies ----------------------------------------------------------------

_TOOL_WORDS: dict[str, str] = {
    "venues_search": "search the venue catalogue",
    "declare_no_plan": "declare that no plan works",
    "propose_time": "propose a time",
    "book_table": "book a table",
    "spend": "make a payment",
    "send_invitation": "send a calendar invitation",
    "publish_artifact": "publish a document to the room",
}


def tool_words(tool: str) -> str:
    """What using ``tool`` does, as a verb phrase ("book a table"); never the tool's id."""
    return _TOOL_WORDS.get(tool, "use one of the room's tools")


_NO_PLAN_WORDS: dict[str, str] = {
    "time": "no time suited both sides",
    "venue": "no venue suited both sides",
    "budget": "the budgets did not meet",
    "allergy": "no venue was safe for everyone's diet",
    "distance": "the places were too far apart",
    "cuisine": "no cuisine suited both sides",
    "rounds": "the rounds ran out",
    "no_reply": "the other side stopped answering",
}

# Why a flare was raised, for the room page's flare card and the ledger's digest alike.
_FLARE_WORDS: dict[str, str] = {
    "loop": "it seems stuck in a loop, saying the same thing again and again",
    "contradiction": (
        "it asked for something that contradicts what it already did here (a second booking "
        "or a different spend), so the room stopped it"
    ),
    "distress": "it says it is in trouble and needs its owner",
    "repeated_denials": (
        "the room refused its requests several times in a few minutes; it may keep trying "
        "something its slip does not allow"
    ),
}


def flare_reason_words(reason: object) -> str:
    """Why a flare was raised, as a clause: "it seems stuck in a loop, ..."."""
    return _FLARE_WORDS.get(str(reason), "it asked its owner to decide what happens next")


_RESOLUTION_WORDS: dict[str, str] = {
    "approved": "{by} approved, so the room went on.",
    "denied": "{by} said no, so nothing happened.",
    "expired": "Nobody answered in time, so the request expired and nothing happened.",
    "reset_resume": "{by} reset the agent and the room went on.",
    "mute": "{by} muted the agent and the room went on.",
    "block": "{by} blocked the agent; the room stays paused for the owners.",
    "step_in": "{by} stepped in to speak in person and the room went on.",
}


def vault_kind_words(kind: str) -> str:
    """A vault item's kind as a noun ("budget", "busy times"); never the kind's id."""
    return VAULT_KIND_WORDS.get(kind, "vault item")


# --- ledger events ----------------------------------------------------------------------------


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


class _Words:
    """Names for the ids in one event; an id with no name gets a neutral noun."""

    def __init__(
        self, data: Mapping[str, Any], names: Mapping[str, str], agent_owners: Mapping[str, str]
    ) -> None:
        self.data = data
        self.names = names
        self.agent_owners = agent_owners

    def whose(self, field: str) -> str:
        """The owner an event's rule is about, by name, for a third-person sentence: the
        owner of the agent in ``field`` (or the owner it names); "the owner" if unknown."""
        value = str(self.data.get(field, ""))
        return self.agent_owners.get(value) or self.names.get(value) or "the owner"

    def id(self, field: str, fallback: str) -> str:
        value = self.data.get(field)
        return self.names.get(str(value), fallback) if value is not None else fallback

    def owner(self, field: str = "owner_id") -> str:
        return self.id(field, "an owner")

    def agent(self, field: str = "agent_id") -> str:
        return self.id(field, "an agent")

    def by(self, field: str = "by") -> str:
        value = str(self.data.get(field, ""))
        return {
            "server": "the server",
            "gatekeeper": "the server's checks",
            "agent": "the agent",
        }.get(value, self.names.get(value, "an owner"))

    def action(self) -> str:
        """The action an event is about: the page's description of it ("book a table at
        Osteria Kanal") when it gave one, else what its tool does."""
        for field in ("action_id", "grant_id"):
            value = self.data.get(field)
            if value is not None and str(value) in self.names:
                return self.names[str(value)]
        tool = self.data.get("tool")
        if tool is not None:
            return tool_words(str(tool))
        if self.data.get("action_id") is None and "grant_id" in self.data:
            # A disclosure grant: which item and to whom stay with the asking owner.
            owner = self.names.get(str(self.data.get("owner_id")))
            whose = f"{owner}'s" if owner else "their"
            return f"share one of {whose} vault items"
        return "take an action"

    def count(self, field: str) -> int:
        value = self.data.get(field, 0)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one}" if n == 1 else f"{n} {many or one + 's'}"


def _join(w: _Words) -> str:
    who = w.id(
        "participant_id", "an owner" if w.data.get("participant_kind") == "owner" else "an agent"
    )
    return f"{who} joined the room."


def _leave(w: _Words) -> str:
    who = w.id(
        "participant_id", "an owner" if w.data.get("participant_kind") == "owner" else "an agent"
    )
    return f"{who} left the room."


def _slip_signed(w: _Words) -> str:
    n = w.count("capability_count")
    text = f"{w.owner()} signed a permission slip for {w.agent()} ({_plural(n, 'permission')})."
    if w.data.get("key_custody") == "demo_seeding":
        text += " The server held the signing key (a practice owner)."
    return text


def _slip_rejected(w: _Words) -> str:
    reason = rule_sentence(str(w.data.get("reason", "")), owner=w.owner())
    return f"A permission slip from {w.owner()} for {w.agent()} was refused. {reason}"


def _key_enrolled(w: _Words) -> str:
    after = " after losing the previous one" if w.data.get("after_key_loss") else ""
    return f"{w.owner()} enrolled a device key{after}."


def _disclosure(w: _Words) -> str:
    item = w.id("item_id", f"one of {w.owner()}'s vault items")
    turn = w.count("turn")
    # The item last: its name may be singular or plural ("budget", "allergies").
    return f"Disclosed to {w.agent('recipient_agent_id')} (turn {turn}): {item}."


def _denial(w: _Words) -> str:
    resource = w.data.get("resource_id")
    about = ""
    if resource is not None:
        resource = str(resource)
        if resource in w.names:
            about = f" ({w.names[resource]})"
        elif resource in _TOOL_WORDS:
            about = f" when asking to {_TOOL_WORDS[resource]}"
        elif resource in VAULT_KIND_WORDS:
            about = f" when asking for the other owner's {VAULT_KIND_WORDS[resource]}"
    subject = w.id("subject_id", "someone")
    reason = rule_sentence(str(w.data.get("rule", "")), owner=w.whose("subject_id"))
    return f"{subject} was refused{about}. {reason}"


def _action_requested(w: _Words) -> str:
    return f"{w.agent()} asked to {w.action()}."


def _grant_requested(w: _Words) -> str:
    return f"{w.owner()} was asked to approve a request to {w.action()}."


def _grant_approved(w: _Words) -> str:
    text = f"A grant to {w.action()} was approved by {w.owner()}."
    if w.data.get("key_custody") == "demo_seeding":
        text += " The server signed it for this practice owner."
    return text


def _grant_denied(w: _Words) -> str:
    return f"A grant to {w.action()} was refused by {w.owner()}."


def _grant_expired(w: _Words) -> str:
    return f"The request to {w.action()} expired unanswered, so nothing happened."


def _action_executed(w: _Words) -> str:
    if w.data.get("outcome") == "ok":
        return f"Carried out: the request by {w.agent()} to {w.action()}."
    return f"Tried and failed: the request by {w.agent()} to {w.action()}."


def _fork_opened(w: _Words) -> str:
    owner_id = w.data.get("owner_id")
    owner = w.names.get(str(owner_id)) if owner_id is not None else None
    whom = f" for {owner}" if owner else ""
    reason = rule_sentence(str(w.data.get("reason_rule", "")), owner=owner or "the owner")
    return f"The room stopped at a fork{whom}. {reason}"


def _fork_resolved(w: _Words) -> str:
    template = _RESOLUTION_WORDS.get(str(w.data.get("resolution", "")))
    if template is None:
        return f"{w.by()} decided at a fork."
    return _capitalised(template.format(by=w.by()))


def _outcome_recorded(w: _Words) -> str:
    if w.data.get("outcome") == "agreed":
        return f"Agreement: {w.owner()}'s agent booked the plan."
    reason = _NO_PLAN_WORDS.get(str(w.data.get("reason")))
    because = f" ({reason})" if reason else ""
    return f"No agreement: {w.owner()}'s agent declared that no plan works{because}."


def _offers_revealed(w: _Words) -> str:
    ids = w.data.get("agent_ids")
    agents = [w.names.get(str(a), "an agent") for a in ids] if isinstance(ids, list) else []
    whose = " and ".join(agents) or "the agents"
    if w.data.get("complete"):
        return f"The sealed offers of {whose} were revealed to both at once."
    return f"The deadline passed before every agent sealed; the offer of {whose} was revealed."


def _flare_raised(w: _Words) -> str:
    why = flare_reason_words(w.data.get("reason"))
    return f"{w.agent()} raised a flare: {why}. The room paused for its owner."


def _injection_suspected(w: _Words) -> str:
    what = rule_sentence(str(w.data.get("rule", "")))
    if w.data.get("artifact_id") is not None:
        # A shared artifact, judged once when it was published: named by who published it
        # ("a document Alice's agent published"), never by its title.
        document = w.id("artifact_id", f"a document {w.agent('source_agent_id')} published")
        return (
            f"{_capitalised(document)} looked like an attempt to steer the other agent; it "
            f"is flagged to both owners, and the other agent only ever gets it fenced. {what}"
        )
    return (
        f"Message #{w.count('message_seq')} from {w.agent('source_agent_id')} looked like an "
        f"attempt to steer the other agent; it was delivered fenced and flagged. {what}"
    )


def _room_paused(w: _Words) -> str:
    rule = str(w.data.get("reason_rule", ""))
    if rule == "owner_request":
        return f"{w.by()} paused the room."
    return f"{w.by()} paused the room. {rule_sentence(rule, owner='the owner')}"


_DELETED_CONTENT = (
    ("messages_deleted", "message"),
    ("whispers_deleted", "whisper"),
    ("snapshots_deleted", "fork snapshot"),
    ("artifacts_deleted", "document"),
    ("notes_deleted", "exit note"),
)


def _room_content_deleted(w: _Words) -> str:
    counted = [_plural(w.count(f), one) for f, one in _DELETED_CONTENT if w.count(f)]
    what = (
        ", ".join(counted[:-1]) + " and " + counted[-1] if len(counted) > 1 else "".join(counted)
    ) or "nothing was left to delete"
    reason = w.data.get("reason")
    if reason == "retention":
        return (
            f"Room content past its {w.count('window_days')}-day retention window was "
            f"deleted: {what}."
        )
    if reason == "account_deleted":
        return f"{w.by()} deleted their account, and with it this room for both sides: {what}."
    if reason == "reapplied":
        return f"A deletion of this room was applied again after a restore from backup: {what}."
    return f"{w.by()} deleted the room for both sides: {what}."


def _retention_purge(w: _Words) -> str:
    return (
        f"Events up to #{w.count('through_seq')} "
        f"({_plural(w.count('events_purged'), 'event')}) were purged after the "
        f"{w.count('window_days')}-day retention window; a checkpoint keeps the chain "
        "verifiable."
    )


_REPORT_REASON_WORDS: dict[str, str] = {
    "harassment": "harassment",
    "manipulation": "manipulation",
    "deception": "deception",
    "privacy": "a privacy concern",
    "spam": "spam",
    "other": "another reason",
}


def _abuse_reported(w: _Words) -> str:
    why = _REPORT_REASON_WORDS.get(str(w.data.get("reason")), "a concern")
    return f"{w.owner('reporter_id')} reported this room to the operator for {why}."


_EVENT_WORDS: dict[str, Callable[[_Words], str]] = {
    "join": _join,
    "leave": _leave,
    "slip_signed": _slip_signed,
    "slip_rejected": _slip_rejected,
    "key_enrolled": _key_enrolled,
    "key_rotated": lambda w: f"{w.owner()} replaced a device key with a new one.",
    "key_revoked": lambda w: f"{w.owner()} revoked a device key.",
    "disclosure": _disclosure,
    "denial": _denial,
    "action_requested": _action_requested,
    "grant_requested": _grant_requested,
    "grant_approved": _grant_approved,
    "grant_denied": _grant_denied,
    "grant_expired": _grant_expired,
    "action_executed": _action_executed,
    "fork_opened": _fork_opened,
    "fork_resolved": _fork_resolved,
    "outcome_recorded": _outcome_recorded,
    "offer_sealed": lambda w: f"{w.agent()} sealed its offer.",
    "offers_revealed": _offers_revealed,
    "flare_raised": _flare_raised,
    "injection_suspected": _injection_suspected,
    "room_paused": _room_paused,
    "room_resumed": lambda w: f"{w.by()} resumed the room.",
    "room_closed": lambda w: f"{w.by()} closed the room.",
    "room_content_deleted": _room_content_deleted,
    "retention_purge": _retention_purge,
    "abuse_reported": _abuse_reported,
    "abuse_report_resolved": lambda w: "The operator resolved a report about this room.",
}

# Every event kind with words (tests compare it with ledger.events.EVENT_KINDS).
EVENT_KINDS_WITH_WORDS: frozenset[str] = frozenset(_EVENT_WORDS)


def event_sentence(
    kind: str,
    data: Mapping[str, Any],
    names: Mapping[str, str],
    *,
    agent_owners: Mapping[str, str] | None = None,
) -> str:
    """A ledger event in words ("Bob's agent joined the room.").

    ``names`` maps the ids that appear in events (owner ids, agent ids, vault item ids,
    action ids) to what a person calls them: "Alice", "Bob's agent", "Alice's budget",
    "book a table at Osteria Kanal". Ids without a name become "an owner", "an agent" and so
    on; the sentence never contains an id. ``agent_owners`` maps agent ids to their owners'
    names, so a rule about an agent's slip or budget names whose ("Bob's permission slip").
    Both owners read the ledger, so its sentences are in the third person.
    """
    words = _EVENT_WORDS.get(kind)
    if not isinstance(data, Mapping):  # a tampered row; the chain check says where
        return "This event cannot be read."
    if words is None:
        logger.warning("no words for ledger event kind %r; add it to gatekeeper.reasons", kind[:80])
        return "The server recorded an event this page cannot describe yet."
    return _capitalised(words(_Words(data, names, agent_owners or {})))

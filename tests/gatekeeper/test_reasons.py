"""Every rule id the server can record has a sentence, and every ledger event kind has words.

The rule ids are found by reading the code (a static scan), not by a list kept next to the
catalogue: a new ``deny("...")`` anywhere without a sentence fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any, get_args

import pytest

from gatekeeper.policy import DEFAULTS
from gatekeeper.reasons import (
    EVENT_KINDS_WITH_WORDS,
    UNKNOWN_RULE_SENTENCE,
    event_sentence,
    rule_known,
    rule_sentence,
    tool_words,
    vault_kind_words,
)
from gatekeeper.tools.registry import tool_names
from ledger.events import EVENT_KINDS, event_record_parse, rule_id_from
from rooms.models import FlareReason
from rooms.untrusted import SuspicionRule
from slips.vault import VaultContent

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("gatekeeper", "slips", "rooms", "ledger", "dining", "practice")
SLUG = re.compile(r"^[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*$")
# Calls whose string arguments are rule ids (the decision, the verdicts, the refusals, the
# ledger events that carry a rule).
RULE_CALLS = frozenset(
    {
        "deny",
        "_deny",
        "Decision",
        "PolicyVerdict",
        "CapabilityVerdict",
        "GrantCheck",
        "ActionResult",
        "BookingProblem",
        "SlipError",
        "Malformed",
        "Rejected",
        "Misconfigured",
        "Denial",
        "RoomPaused",
        "ForkOpened",
        "InjectionSuspected",
        "SlipRejected",
        "GrantDenied",
        "room_pause_fail_safe",
        "pause_at_fork",
    }
)
RULE_KEYWORDS = frozenset({"rule", "reason_rule", "code"})
RULE_NAMES = frozenset({"rule", "needs_grant", "errors"})
# Namespaced rule ids are recognised wherever they occur as a string.
NAMESPACES = ("gatekeeper.", "catalogue.", "disclosure.", "policy.", "beyond_slip.", "flare.")
# Rules built with an f-string: the constant head, and the tails the code can put after it.
SLIP_VERDICT_RULES = (
    "no_slip",
    "foreign_key",
    "key_revoked",
    "bad_signature",
    "binding_mismatch",
    "slip_expired",
    "slip_not_yet_valid",
    "not_in_slip",
    "recipient_not_cleared",
    "capability_expired",
    "uses_exhausted",
    "tier_forbids",
    "verification_error",
)
FSTRING_TAILS: dict[str, tuple[str, ...]] = {
    "beyond_slip.": SLIP_VERDICT_RULES,
    "flare.": tuple(r.value for r in FlareReason),
    "policy.default.": DEFAULTS,
    "policy.deny:": ("db:*", "file:3f6c0d52-8f57-4c3e-a7c8-2b1f0e9d4a11"),
    "policy.allow:": ("db:*", "file:3f6c0d52-8f57-4c3e-a7c8-2b1f0e9d4a11"),
}


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _strings(node: ast.AST | None) -> list[str]:
    """Slug-shaped string constants ``node`` can be (through if-expressions and lists), not
    strings used inside it (a subscript's key, a call's arguments)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value] if SLUG.match(node.value) else []
    if isinstance(node, ast.IfExp):
        return _strings(node.body) + _strings(node.orelse)
    if isinstance(node, ast.List | ast.Tuple):
        return [s for element in node.elts for s in _strings(element)]
    return []


def _scan() -> tuple[set[str], set[str]]:
    """(rule ids written as strings, heads of rule ids built with f-strings)."""
    rules: set[str] = set()
    heads: set[str] = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts or path.name == "reasons.py":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Call):
                    name = _name(node.func)
                    if name in RULE_CALLS:
                        for arg in node.args:
                            rules.update(_strings(arg))
                        for kw in node.keywords:
                            if kw.arg in RULE_KEYWORDS | {"reason"}:
                                rules.update(_strings(kw.value))
                    else:
                        for kw in node.keywords:
                            if kw.arg in RULE_KEYWORDS:
                                rules.update(_strings(kw.value))
                elif isinstance(node, ast.Assign | ast.AnnAssign):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
                    if names & RULE_NAMES:
                        rules.update(_strings(node.value))
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    if node.value.startswith(NAMESPACES) and SLUG.match(node.value):
                        rules.add(node.value)
                elif isinstance(node, ast.JoinedStr) and node.values:
                    head = node.values[0]
                    if (
                        isinstance(head, ast.Constant)
                        and isinstance(head.value, str)
                        and head.value.startswith(NAMESPACES)
                    ):
                        heads.add(head.value)
    return rules, heads


RULES, HEADS = _scan()
# Rule vocabularies defined as enums rather than written at a call.
ENUM_RULES = {r.value for r in SuspicionRule} | {f"flare.{r.value}" for r in FlareReason}


def _all_rules() -> list[str]:
    built = {head + tail for head, tails in FSTRING_TAILS.items() for tail in tails}
    found = RULES | ENUM_RULES | built
    # The ledger records a sanitised form (``rule_id_from``); both must read.
    return sorted(found | {rule_id_from(r) for r in found})


def test_the_scan_finds_the_rules_we_know_of() -> None:
    # Guards the scan itself: if these went missing, the scan would be silently blind.
    for rule in (
        "not_in_slip",
        "catalogue.closed",
        "approval_per_use",
        "over_budget",
        "gatekeeper.timeout",
        "owner_request",
        "grant_expired",
        "owner_denied",
        "policy.unreadable",
        "nonce_reused",
        "gatekeeper.database_error",
        "ledger_unavailable",
    ):
        assert rule in RULES, rule
    assert {"beyond_slip.", "flare.", "policy.deny:"} <= HEADS


def test_every_f_string_rule_head_has_known_tails() -> None:
    unknown = HEADS - set(FSTRING_TAILS)
    assert not unknown, f"a rule built by an f-string this test has no tails for: {unknown}"


@pytest.mark.parametrize("rule", _all_rules())
def test_every_rule_has_a_sentence_without_the_id(rule: str) -> None:
    assert rule_known(rule), f"no sentence for {rule!r} in gatekeeper/reasons.py"
    for owner in (None, "Alice"):
        sentence = rule_sentence(rule, owner=owner)
        assert sentence != UNKNOWN_RULE_SENTENCE
        assert rule not in sentence
        assert "_" not in sentence and "{" not in sentence
        assert sentence[0].isupper() and sentence.endswith(".")


def test_prefixes_compose_and_speak_to_or_about_the_owner() -> None:
    assert (
        rule_sentence("beyond_slip.not_in_slip")
        == "This action is not on your permission slip, so the room asked you first."
    )
    assert rule_sentence("beyond_slip.uses_exhausted", owner="Alice").endswith(
        "so the room asked Alice first."
    )
    assert "Alice's budget" in rule_sentence("over_budget", owner="Alice")
    # A composed id whose tail is unknown is not guessed at.
    assert not rule_known("beyond_slip.something_new")


def test_an_unknown_rule_is_logged_and_never_shown(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="gatekeeper.reasons"):
        sentence = rule_sentence("brand_new_rule_xyz")
    assert sentence == UNKNOWN_RULE_SENTENCE
    assert "brand_new_rule_xyz" not in sentence
    assert "brand_new_rule_xyz" in caplog.text


def test_every_tool_has_words() -> None:
    for tool in tool_names():
        words = tool_words(tool)
        assert tool not in words and words != tool_words("no_such_tool_at_all"), tool


def test_every_vault_kind_has_words() -> None:
    members = get_args(get_args(VaultContent)[0])  # Annotated[Union[...], discriminator]
    kinds = [get_args(m.model_fields["kind"].annotation)[0] for m in members]
    assert "budget" in kinds
    for kind in kinds:  # every kind slips.vault stores
        assert vault_kind_words(kind) != vault_kind_words("no_such_kind"), kind
        assert "_" not in vault_kind_words(kind)


# --- ledger events ----------------------------------------------------------------------------

ALICE, BOB = "41", "42"
A_AGENT, B_AGENT = "0b6f3c1e-4f7a-4d2b-9c55-1a2b3c4d5e6f", "7e1d9a20-3b4c-4e5f-8a9b-0c1d2e3f4a5b"
ITEM, ACTION, GRANT = (
    "5c2e8f10-9a1b-4c3d-8e7f-6a5b4c3d2e1f",
    "9d8c7b6a-5f4e-4d3c-9b2a-1f0e9d8c7b6a",
    "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d",
)
KEY = "2f3e4d5c-6b7a-4980-a1b2-c3d4e5f6a7b8"
NAMES = {
    ALICE: "Alice",
    BOB: "Bob",
    A_AGENT: "Alice's agent",
    B_AGENT: "Bob's agent",
    ITEM: "Alice's budget",
    ACTION: "book a table at Osteria Kanal",
}
HEX = "ab" * 32
SAMPLES: dict[str, dict[str, Any]] = {
    "join": {"participant_id": B_AGENT, "participant_kind": "agent"},
    "leave": {"participant_id": ALICE, "participant_kind": "owner"},
    "slip_signed": {
        "owner_id": ALICE,
        "agent_id": A_AGENT,
        "slip_id": GRANT,
        "key_id": KEY,
        "capability_count": 3,
        "key_custody": "device",
    },
    "slip_rejected": {"owner_id": ALICE, "agent_id": A_AGENT, "reason": "nonce_reused"},
    "key_enrolled": {"owner_id": ALICE, "key_id": KEY, "after_key_loss": True},
    "key_rotated": {"owner_id": ALICE, "old_key_id": KEY, "new_key_id": GRANT},
    "key_revoked": {"owner_id": ALICE, "key_id": KEY},
    "disclosure": {"owner_id": ALICE, "item_id": ITEM, "recipient_agent_id": B_AGENT, "turn": 3},
    "denial": {"rule": "policy.deny.db.any", "subject_id": B_AGENT, "resource_id": "spend"},
    "action_requested": {"action_id": ACTION, "agent_id": A_AGENT, "tool": "book_table"},
    "grant_requested": {"grant_id": GRANT, "action_id": ACTION, "owner_id": ALICE},
    "grant_approved": {"grant_id": GRANT, "action_id": ACTION, "owner_id": ALICE, "key_id": KEY},
    "grant_denied": {
        "grant_id": GRANT,
        "action_id": ACTION,
        "owner_id": ALICE,
        "reason": "owner_denied",
    },
    "grant_expired": {"grant_id": GRANT, "action_id": ACTION},
    "action_executed": {
        "action_id": ACTION,
        "agent_id": A_AGENT,
        "tool": "book_table",
        "grant_id": GRANT,
        "outcome": "ok",
    },
    "fork_opened": {"fork_id": GRANT, "reason_rule": "over_budget", "owner_id": ALICE},
    "fork_resolved": {"fork_id": GRANT, "by": ALICE, "resolution": "approved"},
    "outcome_recorded": {
        "outcome": "no_agreement",
        "action_id": ACTION,
        "owner_id": BOB,
        "reason": "budget",
    },
    "offer_sealed": {"agent_id": A_AGENT, "commitment": HEX},
    "offers_revealed": {"agent_ids": [A_AGENT, B_AGENT], "complete": True},
    "flare_raised": {"agent_id": B_AGENT, "reason": "loop"},
    "injection_suspected": {"source_agent_id": B_AGENT, "message_seq": 12, "rule": "fake_notice"},
    "room_paused": {"by": "gatekeeper", "reason_rule": "flare.loop"},
    "room_resumed": {"by": ALICE},
    "room_closed": {"by": BOB},
    "room_content_deleted": {"by": ALICE, "messages_deleted": 12, "artifacts_deleted": 1},
    "retention_purge": {
        "through_seq": 40,
        "through_hash": HEX,
        "events_purged": 40,
        "window_days": 30,
    },
    "abuse_reported": {"report_id": GRANT, "reporter_id": ALICE, "reason": "harassment"},
    "abuse_report_resolved": {"report_id": GRANT},
}
IDS = (ALICE, BOB, A_AGENT, B_AGENT, ITEM, ACTION, GRANT, KEY, HEX)


def test_every_event_kind_has_words_and_a_sample() -> None:
    assert set(EVENT_KINDS) == EVENT_KINDS_WITH_WORDS
    assert set(EVENT_KINDS) == set(SAMPLES)


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_event_words_name_people_and_never_show_ids(kind: str) -> None:
    data = SAMPLES[kind]
    event_record_parse(kind=kind, data=data)  # the sample is a real event of its kind
    for names in (NAMES, {}):  # with names, and with none known
        sentence = event_sentence(kind, data, names)
        for value in IDS:
            assert value not in sentence, (kind, sentence)
        assert "_" not in sentence and "{" not in sentence, sentence
        assert sentence[0].isupper(), sentence
        assert "safety rules here" not in sentence, sentence  # no unknown rule inside


def test_event_words_read_as_a_person_would_say_them() -> None:
    assert event_sentence("join", SAMPLES["join"], NAMES) == "Bob's agent joined the room."
    assert (
        event_sentence("disclosure", SAMPLES["disclosure"], NAMES)
        == "Disclosed to Bob's agent (turn 3): Alice's budget."
    )
    assert (
        event_sentence("grant_approved", SAMPLES["grant_approved"], NAMES)
        == "A grant to book a table at Osteria Kanal was approved by Alice."
    )
    assert "Message #12" in event_sentence(
        "injection_suspected", SAMPLES["injection_suspected"], NAMES
    )
    assert "asked Alice first" in event_sentence("fork_opened", SAMPLES["fork_opened"], NAMES)


def test_a_suspected_injection_in_a_shared_artifact_names_the_document_not_a_message() -> None:
    data = {"source_agent_id": B_AGENT, "message_seq": None, "rule": "fake_notice"}
    data["artifact_id"] = ITEM
    event_record_parse(kind="injection_suspected", data=data)
    named = {**NAMES, ITEM: "a document Bob's agent published"}
    for names, document in ((named, "A document Bob's agent published"), ({}, "A document")):
        sentence = event_sentence("injection_suspected", data, names)
        assert sentence.startswith(f"{document} ") and "Message" not in sentence, sentence
        assert "flagged to both owners" in sentence and ITEM not in sentence, sentence
        assert "safety rules here" not in sentence, sentence


def test_a_disclosure_grant_keeps_which_item_to_its_owner() -> None:
    # No action: the grant is for one disclosure, whose item and recipient stay in the grant.
    data = {"grant_id": GRANT, "owner_id": ALICE}
    event_record_parse(kind="grant_requested", data=data)
    assert event_sentence("grant_requested", data, NAMES) == (
        "Alice was asked to approve a request to share one of Alice's vault items."
    )
    assert "budget" not in event_sentence("grant_approved", data, NAMES)

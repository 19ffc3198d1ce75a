"""The fixed vocabularies of exit notes and abuse reports, in the product's words.

Codes are what is stored (and what an agent sends); the words are what people read. A code
never appears on a page.
"""

from __future__ import annotations

from typing import Final

# Exit-note themes: what the room was like, from one side. Owners and agents choose from the
# same list, so the operator's counts add up across both.
EXIT_NOTE_THEMES: Final[dict[str, str]] = {
    "reached_plan": "We reached a plan",
    "no_plan_possible": "No plan was possible",
    "plan_felt_fair": "The plan felt fair",
    "other_agent_pushy": "The other agent was pushy",
    "privacy_respected": "Privacy felt respected",
    "shared_too_much": "More was shared than felt right",
    "took_too_long": "It took too long",
    "asked_too_often": "The room asked its owner too often",
    "suspected_manipulation": "Suspected manipulation",
    "flare_helped": "A Signal Flare helped",
    "something_confusing": "Something was confusing",
}

# Free text of an exit note: bounded, and only ever shown to the note's own side.
EXIT_NOTE_MAX_CHARS: Final = 1_000
EXIT_NOTE_MAX_THEMES: Final = len(EXIT_NOTE_THEMES)

# Why an owner reports a room. The codes are ledger.events.ReportReason's (the ledger records
# the code, never the report's text).
REPORT_REASONS: Final[dict[str, str]] = {
    "harassment": "Harassment or abuse",
    "manipulation": "Manipulation or pressure",
    "deception": "Deception or fraud",
    "privacy": "A privacy concern",
    "spam": "Spam",
    "other": "Something else",
}

REPORT_MAX_CHARS: Final = 2_000


def theme_words(code: str) -> str:
    """An exit-note theme in words; an unknown code (a retired theme) reads neutrally."""
    return EXIT_NOTE_THEMES.get(code, "A theme no longer offered")


def report_reason_words(code: str) -> str:
    return REPORT_REASONS.get(code, "Something else")

"""The starter tools for negotiating a dinner: their typed arguments, results and manifests.

Rules every tool here keeps:

* Arguments are typed data: slugs, enums, bounded integers, timezone-aware datetimes. Money is
  an integer amount in minor units (cents) plus a currency enum; floats are refused anywhere.
* Free text (an artifact's title and body) is room content: it is stored and shown fenced as
  untrusted, and no free-text field ever selects, routes or limits anything.
* Validation is strict: no type coercion ("10" is not 10, 10.0 is not 10), no extra fields.
"""

from __future__ import annotations

import unicodedata
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
)

from dining.formats import Allergen, City, Venue
from gatekeeper.tools.manifest import CapabilityManifest
from gatekeeper.tools.spec import ToolSpec

# Largest amount one call may carry: 100,000.00 in major units. The slip's budget scope is the
# real limit (enforced by the decision code); this bound only keeps numbers sane and < 2^53.
MAX_AMOUNT_MINOR = 10_000_000
MAX_TITLE_CHARS = 120
MAX_BODY_CHARS = 20_000
# An artifact's body is also bounded in bytes (what is stored and fenced): 20,000 characters
# of a script that needs 3-4 bytes each would otherwise be 80 KB.
MAX_BODY_BYTES = 32_000

Slug = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")]
Currency = Literal["EUR", "USD", "GBP", "CHF", "CAD", "AUD", "JPY", "SEK", "NOK", "DKK"]
AmountMinor = Annotated[int, Field(ge=0, le=MAX_AMOUNT_MINOR)]


class ToolModel(BaseModel):
    """Base of every tool's input and output: strict, closed, immutable."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# --- propose_time ------------------------------------------------------------------------------


class ProposeTimeIn(ToolModel):
    start: AwareDatetime = Field(description="Proposed start, ISO 8601 with a UTC offset.")
    duration_minutes: int = Field(ge=15, le=8 * 60, description="Length of the meeting.")


class ProposeTimeOut(ToolModel):
    proposal_id: Slug
    start: AwareDatetime
    end: AwareDatetime


# --- book_table --------------------------------------------------------------------------------


class BookTableIn(ToolModel):
    venue_id: Slug = Field(description="Venue identifier (a venue id from venues_search).")
    party_size: int = Field(ge=1, le=20)
    start: AwareDatetime
    cost_cents: AmountMinor = Field(
        description=(
            "Total for the party in integer minor units: the catalogue's price per person x "
            "party_size. In a room with dinner terms the server refuses any other amount."
        )
    )
    currency: Currency


class BookTableOut(ToolModel):
    booking_reference: Slug
    venue_id: Slug
    party_size: int
    start: AwareDatetime
    cost_cents: int
    currency: Currency


# --- spend -------------------------------------------------------------------------------------


class SpendIn(ToolModel):
    amount_cents: int = Field(ge=1, le=MAX_AMOUNT_MINOR, description="Integer minor units.")
    currency: Currency
    payee_id: Slug
    purpose: Slug = Field(description="A purpose code such as 'dinner-deposit'.")


class SpendOut(ToolModel):
    payment_reference: Slug
    amount_cents: int
    currency: Currency
    payee_id: Slug


# --- send_invitation ---------------------------------------------------------------------------


class SendInvitationIn(ToolModel):
    recipient: Literal["self", "peer"] = Field(description="The agent's own owner, or the peer's.")
    event_start: AwareDatetime
    venue_id: Slug


class SendInvitationOut(ToolModel):
    invitation_id: Slug
    recipient: Literal["self", "peer"]


# --- publish_artifact --------------------------------------------------------------------------


def _refuse_unencodable(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text (it holds a lone surrogate)") from None


def _artifact_title_checked(title: str) -> str:
    _refuse_unencodable(title)
    if any(unicodedata.category(ch) in ("Cc", "Zl", "Zp") for ch in title):
        raise ValueError("must be one line without control characters")
    if not title.strip():
        raise ValueError("must not be blank")
    return title


# Control characters other than tab, line feed and carriage return are never document text.
_BODY_CONTROLS_ALLOWED = frozenset("\t\n\r")


def _artifact_body_checked(body: str) -> str:
    _refuse_unencodable(body)
    size = len(body.encode("utf-8"))
    if size > MAX_BODY_BYTES:
        raise ValueError(
            f"is {size:,} bytes in UTF-8; an artifact's body may be at most {MAX_BODY_BYTES:,}"
        )
    if any(unicodedata.category(ch) == "Cc" and ch not in _BODY_CONTROLS_ALLOWED for ch in body):
        raise ValueError("must not contain control characters (other than tabs and line breaks)")
    if not body.strip():
        raise ValueError("must not be blank")
    return body


class PublishArtifactIn(ToolModel):
    # Room content (stored sealed, shown escaped, given to the other agent only fenced as
    # untrusted text): checked for shape here, never interpreted.
    title: Annotated[
        str,
        Field(min_length=1, max_length=MAX_TITLE_CHARS),
        AfterValidator(_artifact_title_checked),
    ]
    body: Annotated[
        str,
        Field(min_length=1, max_length=MAX_BODY_CHARS),
        AfterValidator(_artifact_body_checked),
    ]
    # The artifact's media type, from the allowed list: text/plain or text/markdown.
    format: Literal["markdown", "plain"]


class PublishArtifactOut(ToolModel):
    artifact_id: Slug
    body_sha256: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


# --- venues_search -----------------------------------------------------------------------------

MAX_SEARCH_PAGE = 200
MAX_FILTER_ITEMS = 50


class VenuesSearchIn(ToolModel):
    cuisines: list[Slug] = Field(default_factory=list, max_length=MAX_FILTER_ITEMS)
    neighbourhoods: list[Slug] = Field(default_factory=list, max_length=MAX_FILTER_ITEMS)
    max_price_per_person_minor: AmountMinor | None = Field(
        default=None, description="Highest price per person, in the catalogue's minor units."
    )
    safe_for: list[Allergen] = Field(
        default_factory=list, description="Keep venues safe for every one of these allergens."
    )
    limit: int = Field(default=MAX_SEARCH_PAGE, ge=1, le=MAX_SEARCH_PAGE)
    offset: int = Field(default=0, ge=0, le=1_000_000)


class VenuesSearchOut(ToolModel):
    catalogue: Slug
    city: City
    venues: list[Venue]
    total: int
    next_offset: int | None


# --- declare_no_plan ---------------------------------------------------------------------------

NoPlanReason = Literal[
    "time", "venue", "budget", "allergy", "distance", "cuisine", "rounds", "no_reply"
]


class DeclareNoPlanIn(ToolModel):
    reason: NoPlanReason = Field(description="The coarse reason no plan is possible.")


class DeclareNoPlanOut(ToolModel):
    reason: NoPlanReason


STARTER_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="venues_search",
        title="Search the room's venues",
        description=(
            "List venues of the room's venue catalogue (closed-world, read-only), filtered by "
            "cuisine, neighbourhood, price per person and allergen safety, with the city's "
            "neighbourhoods and travel minutes. Pages of up to 200."
        ),
        input_model=VenuesSearchIn,
        output_model=VenuesSearchOut,
        manifest=CapabilityManifest(
            read_only=True,
            destructive=False,
            idempotent=True,
            open_world=False,
            required_scopes=("tool:venues_search:call",),
            touches_owner_data=False,
            server_executed=True,
        ),
    ),
    ToolSpec(
        name="declare_no_plan",
        title="Declare that no plan is possible",
        description=(
            "Say, for this side, that no plan can be agreed, with a coarse reason (time, "
            "venue, budget, allergy, distance, cuisine, rounds, no_reply). Reveals nothing else."
        ),
        input_model=DeclareNoPlanIn,
        output_model=DeclareNoPlanOut,
        manifest=CapabilityManifest(
            read_only=False,
            destructive=False,
            idempotent=True,
            open_world=False,
            required_scopes=("tool:declare_no_plan:call",),
            touches_owner_data=False,
            server_executed=True,
        ),
    ),
    ToolSpec(
        name="propose_time",
        title="Propose a time",
        description="Propose a start time and duration to the other side. Changes nothing.",
        input_model=ProposeTimeIn,
        output_model=ProposeTimeOut,
        manifest=CapabilityManifest(
            read_only=True,
            destructive=False,
            idempotent=True,
            open_world=False,
            required_scopes=("tool:propose_time:call",),
        ),
    ),
    ToolSpec(
        name="book_table",
        title="Book a table",
        description="Hold or book a table at a venue, paying cost_cents (minor units).",
        input_model=BookTableIn,
        output_model=BookTableOut,
        manifest=CapabilityManifest(
            read_only=False,
            destructive=False,
            idempotent=False,
            open_world=True,
            required_scopes=("tool:book_table:call", "budget:range"),
            money_argument="cost_cents",
            currency_argument="currency",
        ),
    ),
    ToolSpec(
        name="spend",
        title="Spend within the budget",
        description="Pay amount_cents (minor units) to a payee for a stated purpose code.",
        input_model=SpendIn,
        output_model=SpendOut,
        manifest=CapabilityManifest(
            read_only=False,
            # Money that has left does not come back by calling again.
            destructive=True,
            idempotent=False,
            open_world=True,
            required_scopes=("tool:spend:call", "budget:range"),
            money_argument="amount_cents",
            currency_argument="currency",
        ),
    ),
    ToolSpec(
        name="send_invitation",
        title="Send an invitation",
        description="Send a calendar invitation for the event to this agent's owner or the peer.",
        input_model=SendInvitationIn,
        output_model=SendInvitationOut,
        manifest=CapabilityManifest(
            read_only=False,
            destructive=False,
            idempotent=False,
            open_world=True,
            required_scopes=("tool:send_invitation:call",),
        ),
    ),
    ToolSpec(
        name="publish_artifact",
        title="Publish a shared artifact",
        description="Publish a titled document (plain text or Markdown) to the room.",
        input_model=PublishArtifactIn,
        output_model=PublishArtifactOut,
        manifest=CapabilityManifest(
            read_only=False,
            destructive=False,
            idempotent=False,
            open_world=False,
            required_scopes=("tool:publish_artifact:call",),
            # It acts only inside the room (the artifact is stored there, sealed), so the
            # server runs it: an owner's webhook is never sent a publish, and the artifact is
            # stored whatever adapter the owner configured. It still needs a slip item.
            server_executed=True,
        ),
    ),
)

"""Every frame of the room WebSocket protocol, either way, and every body it carries.

Every frame is ``{"v": 1, "type": ..., "id": ..., "body": {...}}``. The server validates with
these models and the SDK decodes with them, so the two cannot drift; ``docs/schemas/*.json``
and ``docs/asyncapi.yaml`` are generated from them (``make schemas``).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, Any, Literal, Required, get_args
from uuid import UUID

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    with_config,
)
from typing_extensions import TypedDict

from synapsia_protocol.codes import ErrorCode

PROTOCOL_VERSION = 1
MAX_MESSAGE_CHARS = 8_000
FrameId = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._:-]+$")]
# The kinds of vault item an owner can clear (slips.capabilities.VAULT_KINDS; a test keeps the
# two equal), spelled out here so the published schema names them.
VaultKind = Literal[
    "availability",
    "budget",
    "food_likes",
    "food_dislikes",
    "allergies",
    "neighbourhood",
    "link",
    "note",
]
# Each kind as a person says it, after an owner's name ("Alice's budget", "Bob's busy times"):
# the room's words for them (gatekeeper.reasons) and the SDK's, never the kind's id.
VAULT_KIND_WORDS: dict[str, str] = {
    "availability": "busy times",
    "budget": "budget",
    "food_likes": "food likes",
    "food_dislikes": "food dislikes",
    "allergies": "allergies",
    "neighbourhood": "home neighbourhood",
    "link": "link",
    "note": "note",
}


def _exact_version(value: Any) -> Any:
    # Python (and pydantic's lax Literal) takes true and 1.0 for 1; the envelope's version is
    # the JSON integer 1 and nothing that merely compares equal to it (docs/protocol.md).
    if type(value) is not int:
        raise ValueError("v must be the integer 1")
    return value


class _Frame(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    v: Annotated[Literal[1], BeforeValidator(_exact_version)] = 1
    id: FrameId


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- agent → server -----------------------------------------------------------------------


# A message's sequence number as an agent acknowledges it (a JSON-safe integer).
AckSeq = Annotated[int, Field(ge=1, le=2**53 - 1)]


class SayBody(_Body):
    # No U+0000: PostgreSQL cannot store it, and no message needs it.
    text: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS, pattern=r"^[^\x00]*$")
    # An acknowledgement riding this frame: exactly an ``ack`` of this seq sent just before it,
    # so an agent that answers what it was handed sends one frame, not two. A seq the room does
    # not have refuses the whole frame (``invalid_ack``). The client's, never a model's
    # (``body_schema`` leaves it out).
    ack: AckSeq | None = None


class AckBody(_Body):
    seq: AckSeq


class EmptyBody(_Body):
    pass


class ActBody(_Body):
    tool: str = Field(min_length=1, max_length=64)
    # Typed arguments, validated against the tool's input schema by the Gatekeeper.
    arguments: dict[str, Any]


class SayFrame(_Frame):
    """Say something to the room. Resending the same ``id`` never stores it twice."""

    type: Literal["say"]
    body: SayBody


class AckFrame(_Frame):
    """Acknowledge every message up to and including ``seq``."""

    type: Literal["ack"]
    body: AckBody


class PingFrame(_Frame):
    """Check the connection; answered with a ``pong`` of the same ``id``."""

    type: Literal["ping"]
    body: EmptyBody


class ContextRequestBody(_Body):
    # Kinds of the other owner's vault items the agent asks for. Whatever the other owner's
    # slip clears is in the answer anyway; each asked kind it does not clear is a denial in
    # the ledger (both owners see the ask), and a trusted notice in the answer.
    ask: list[VaultKind] = Field(default_factory=list, max_length=8)
    # An acknowledgement riding this frame, as on ``say``: recorded before the turn starts;
    # one the room refuses refuses the request whole (no turn, no slip use).
    ack: AckSeq | None = None


class ContextRequestFrame(_Frame):
    """Ask for this turn's assembled context; answered with a ``context`` frame. Each request
    is a new turn: every vault item in the answer was cleared, spent and recorded for it."""

    type: Literal["context_request"]
    body: ContextRequestBody


FlareReason = Literal["loop", "contradiction", "distress"]
FLARE_REASONS: tuple[str, ...] = get_args(FlareReason)


class FlareBody(_Body):
    reason: FlareReason


class FlareFrame(_Frame):
    """Raise a Signal Flare: stop, pause the room, and ask your owner (reset and resume, mute
    or block you, or step in personally). Answered with a ``room_state`` of ``paused``."""

    type: Literal["flare"]
    body: FlareBody


class ActFrame(_Frame):
    """Ask for a typed action (a tool call). The frame ``id`` is its idempotency key: resending
    it never runs the action twice."""

    type: Literal["act"]
    body: ActBody


def _iso_text(value: Any) -> Any:
    # JSON has no datetime: only ISO 8601 text is a start (never a number of seconds).
    if not isinstance(value, str):
        raise ValueError("start must be ISO 8601 text with a UTC offset")
    return value


class OfferPlan(_Body):
    """One typed plan an agent seals: a venue of the room's catalogue, a start with its UTC
    offset, the party, and the price per person in minor units (cents) of ``currency``."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    venue_id: str = Field(max_length=63, pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    start: Annotated[AwareDatetime, BeforeValidator(_iso_text), Field(strict=False)]
    party_size: int = Field(ge=1, le=20)
    price_per_person_minor: int = Field(ge=0, le=10_000_000)
    currency: str = Field(pattern=r"^[A-Z]{3}$")


class SealOfferBody(_Body):
    offer: OfferPlan


class SealOfferFrame(_Frame):
    """Seal your offer: nobody sees it until both agents have sealed (or the deadline passes),
    then both are revealed at once (``offers_revealed``). One per agent per room; resending the
    same ``id`` is harmless."""

    type: Literal["seal_offer"]
    body: SealOfferBody


AnyClientFrame = (
    SayFrame | AckFrame | PingFrame | ActFrame | ContextRequestFrame | FlareFrame | SealOfferFrame
)
ClientFrame = Annotated[AnyClientFrame, Field(discriminator="type")]
CLIENT_FRAME_TYPES = frozenset(
    {"say", "ack", "ping", "act", "context_request", "flare", "seal_offer"}
)
_client_frame: TypeAdapter[AnyClientFrame] = TypeAdapter(ClientFrame)


# --- server → agent -----------------------------------------------------------------------


# One tool an agent may request, as an MCP tool definition (the ``act`` frame's ``tool`` is its
# ``name``, its ``arguments`` must match ``inputSchema``). A plain dict at run time, so it reads
# as the JSON it is; keys beyond these (an MCP client may know more) are kept as sent.
@with_config(ConfigDict(extra="allow"))
class ToolDefinition(TypedDict, total=False):
    """One tool an agent may request, as an MCP tool definition: an ``act`` frame's ``tool``
    is its ``name`` and its ``arguments`` must match ``inputSchema``. A plain dict at run time
    (it reads as the JSON it is); keys beyond these are kept as sent."""

    name: Required[str]
    inputSchema: Required[dict[str, Any]]
    title: str
    description: str
    outputSchema: dict[str, Any]
    # MCP hints from the tool's capability manifest (readOnlyHint, destructiveHint,
    # idempotentHint, openWorldHint, title).
    annotations: dict[str, Any]
    # The rest of the manifest, under ``synapsia.dev/`` keys (docs/agents.md).
    _meta: dict[str, Any]


class RoomSummary(_Body):
    id: UUID
    purpose: str
    charter: str
    state: str
    # The room's dinner terms (docs/dining.md): catalogue, time_zone, horizon_days,
    # dinner_minutes, first_start, last_start, start_step_minutes, party_size,
    # travel_limit_minutes. Null for a room that is not a dinner. Trusted.
    terms: dict[str, Any] | None = None


class WelcomeBody(_Body):
    room: RoomSummary
    participant: Literal["agent", "owner"]
    agent_id: UUID | None
    acked_seq: int
    max_frame_bytes: int
    # MCP tool definitions of the tools this agent may request (empty for owners).
    tools: list[ToolDefinition]


class MessageBody(_Body):
    seq: int
    sender_agent_id: UUID
    # For an agent: the peer's text after stripping (exactly what sits between the fence's
    # boundary lines), and ``fenced``, the same as one nonce-bounded untrusted block to place
    # in a model's context. For an owner's browser: the text as written (``fenced`` null);
    # render it as text, never as markup.
    text: str
    fenced: str | None
    # Suspicion rule ids raised on this message (docs/untrusted.md); the message is delivered
    # either way.
    flags: list[str]
    sent_at: datetime
    # "owner": the sender's owner stepped in at a Signal Flare and wrote this in person.
    author: Literal["agent", "owner"] = "agent"


class ClearedItem(_Body):
    """One vault item cleared for this turn, cut to the capability's scope.
    ``onward_disclosure`` says whether you may carry it out of the room (true) or must use it
    only in the room (false)."""

    item_id: UUID
    owner_id: str
    resource: str
    scope: str
    content: dict[str, Any]
    # The room's word, never the item's: whether the recipient may carry this item out of the
    # room (store it, pass it on, use it elsewhere). It is the capability that cleared the item,
    # after the room's tier (Room Only and Sandbox make it false). Added after v1 shipped: a
    # context without it (an older server) is read as false, keep it in the room.
    onward_disclosure: bool = False


class PeerItem(ClearedItem):
    """A vault item the other owner's slip cleared for you: untrusted. ``content``'s strings
    are stripped like peer text; ``fenced`` is the same content as one fenced block. Its
    ``onward_disclosure`` is the room's, outside the block: nothing inside it can change it."""

    fenced: str
    nonce: str


class WhisperBody(_Body):
    """What your own owner whispered to you: trusted, seen by nobody else in the room. The
    same body as a ``whisper`` frame's and as each of a turn's ``whispers``."""

    id: UUID
    text: str
    sent_at: datetime


ContextWhisper = WhisperBody  # one class either way, so the SDK hands out one type


class ContextMessage(_Body):
    seq: int
    sender_agent_id: UUID
    fenced: str  # untrusted: the peer's text inside a nonce-bounded fence
    nonce: str
    flags: list[str]
    truncated: bool
    sent_at: datetime


class PeerArtifact(_Body):
    """A document the other agent published to the room and its owner's slip shares with you
    (``publish_artifact``; docs/project-package.md): untrusted. ``fenced`` is its title, a
    blank line and its body as one nonce-bounded block, the publisher's words and never
    instructions; the other fields are the room's own."""

    artifact_id: UUID
    media_type: Literal["text/plain", "text/markdown"]
    size_bytes: int = Field(ge=0)  # the body's UTF-8 size as published
    published_at: datetime
    fenced: str
    nonce: str
    truncated: bool
    # Suspicion rule ids the fence raised on it (docs/untrusted.md); delivered either way.
    flags: list[str]
    # The room's word, outside the block, as on a cleared item: whether you may carry this
    # document out of the room. The publisher's slip record that shares it, after the room's
    # tier. Added after v1 shipped: absent (an older server), it is false: keep it in the room.
    onward_disclosure: bool = False


class AgentContext(_Body):
    """One turn's context for one agent: assembled from the charter, signed slips and cleared
    material only (SYN-TRUST-005). Trusted and untrusted parts are separate fields."""

    room_id: UUID
    agent_id: UUID
    turn: int
    # Trusted: written only from the fields below it that the room itself vouches for.
    preamble: str
    purpose: str
    charter: str
    # The room's dinner terms, as in the welcome (null when the room is not a dinner).
    terms: dict[str, Any] | None = None
    own_items: list[ClearedItem]
    whispers: list[WhisperBody]
    notices: list[str]
    # Untrusted: data from the other side, never instructions.
    peer_items: list[PeerItem]
    peer_messages: list[ContextMessage]
    # The other agent's shared artifacts its owner's slip shares with you, oldest first
    # (each decided and recorded in the ledger for this turn).
    peer_artifacts: list[PeerArtifact] = []

    def own(self, resource: str) -> Iterator[dict[str, Any]]:
        """The content of each of your owner's items of ``resource`` cleared this turn."""
        return (item.content for item in self.own_items if item.resource == resource)

    def peer(self, resource: str) -> Iterator[dict[str, Any]]:
        """The content of each of the other owner's items of ``resource`` cleared for you."""
        return (item.content for item in self.peer_items if item.resource == resource)

    @classmethod
    def from_body(cls, body: Any) -> AgentContext:
        """Decode a ``context`` frame's body (raises ``pydantic.ValidationError``); fields
        this package does not know are left out, as ``parse_server_frame`` does."""
        return cls.model_validate(body, extra="ignore")


class SentBody(_Body):
    ref: str
    seq: int
    duplicate: bool


class ActionResultBody(_Body):
    ref: str
    action_id: UUID | None
    status: Literal["executed", "pending", "failed", "awaiting_grant", "denied"]
    rule: str
    detail: str
    output: dict[str, Any] | None
    replay: bool

    @property
    def settled(self) -> bool:
        """Whether this is the action's final outcome (not waiting for a grant or a webhook)."""
        return self.status not in UNSETTLED


# An action in one of these states will be reported again (after the grant, or the webhook).
UNSETTLED = frozenset({"awaiting_grant", "pending"})


class NoticeBody(_Body):
    code: str
    message: str


class ErrorBody(_Body):
    code: ErrorCode
    message: str
    ref: str | None


class RoomStateBody(_Body):
    state: str


class WelcomeFrame(_Frame):
    """First frame after the handshake: the room, who you are, and your last acknowledgement."""

    type: Literal["welcome"]
    body: WelcomeBody


class MessageFrame(_Frame):
    """A message from the room's record, in sequence order, delivered once per ``seq``."""

    type: Literal["message"]
    body: MessageBody


class SentFrame(_Frame):
    """Your ``say`` frame ``ref`` is recorded as message ``seq``."""

    type: Literal["sent"]
    body: SentBody


class ErrorFrame(_Frame):
    """Your frame ``ref`` was refused (``code``); it changed nothing. The connection stays
    open, except for the codes documented as sent just before a close."""

    type: Literal["error"]
    body: ErrorBody


class RoomStateFrame(_Frame):
    """The room is now ``open``, ``paused`` or ``closed`` (a pause: a fork or a flare)."""

    type: Literal["room_state"]
    body: RoomStateBody


class PongFrame(_Frame):
    """The answer to a ``ping``, with its ``id``."""

    type: Literal["pong"]
    body: EmptyBody


class ActionResultFrame(_Frame):
    """What became of an ``act`` frame (``ref``). ``awaiting_grant``: the room pauses until the
    owner decides; a later ``action_result`` with the same ``ref`` reports the outcome."""

    type: Literal["action_result"]
    body: ActionResultBody


class ContextFrame(_Frame):
    """This turn's assembled context (answer to ``context_request``, same ``id``)."""

    type: Literal["context"]
    body: AgentContext


class WhisperFrame(_Frame):
    """Your own owner whispered to you. Trusted; nobody else in the room sees it."""

    type: Literal["whisper"]
    body: WhisperBody


class NoticeFrame(_Frame):
    """A trusted system notice from the room itself (never from the other agent)."""

    type: Literal["notice"]
    body: NoticeBody


class RevealedOffer(_Body):
    agent_id: UUID
    offer: OfferPlan
    # The random salt of the ledger's ``offer_sealed`` commitment: SHA-256 of the RFC 8785 form
    # of ``{"offer": offer, "salt": salt}``. Unsalted, a plan this small could be guessed from
    # its hash before the reveal.
    salt: str


class OffersRevealedBody(_Body):
    offers: list[RevealedOffer]
    # False: the deadline passed with only some agents sealed; those are all there is.
    complete: bool


class OffersRevealedFrame(_Frame):
    """The room's sealed offers, revealed to both agents at once (sent again after a
    reconnect). The frame ``id`` is the same every time for a room."""

    type: Literal["offers_revealed"]
    body: OffersRevealedBody


AnyServerFrame = (
    WelcomeFrame
    | MessageFrame
    | SentFrame
    | ErrorFrame
    | RoomStateFrame
    | PongFrame
    | ActionResultFrame
    | NoticeFrame
    | ContextFrame
    | WhisperFrame
    | OffersRevealedFrame
)
ServerFrame = Annotated[AnyServerFrame, Field(discriminator="type")]
SERVER_FRAME_TYPES = frozenset(
    {
        "welcome",
        "message",
        "sent",
        "error",
        "room_state",
        "pong",
        "action_result",
        "notice",
        "context",
        "whisper",
        "offers_revealed",
    }
)
_server_frame: TypeAdapter[AnyServerFrame] = TypeAdapter(ServerFrame)

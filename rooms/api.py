"""REST API for owners (session auth): agents, rooms, invites, transcript.

Thin: every endpoint calls one service or selector. ``RoomError``s become
``{"code": ..., "message": ...}`` with the error's HTTP status.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any, Literal
from uuid import UUID

from django.http import HttpRequest
from django.utils import timezone
from ninja import Field, Router, Schema, Status
from ninja.security import django_auth
from pydantic import AwareDatetime, BeforeValidator

from gatekeeper.actions import ActionResult
from gatekeeper.add_keys import add_key_header, add_once, add_request
from gatekeeper.grants import grants_of_owner
from rooms import context, flares, forks, notifications, selectors, services
from rooms.models import Agent, FlareChoice, Room, RoomMember, RoomState
from rooms.protocol import MAX_MESSAGE_CHARS
from stewards.agent_api import AgentToken, ExitNoteIn, ExitNoteOut
from stewards.exit_notes import exit_note_leave_as_agent
from synapsia.owners import request_owner

router = Router(auth=django_auth, tags=["rooms"])


# --- schemas ------------------------------------------------------------------------------


class AgentIn(Schema):
    name: str
    advisor_only: bool = False
    declared_tools: list[str] | None = None


class AgentOut(Schema):
    id: UUID
    name: str
    advisor_only: bool
    declared_tools: list[str] | None
    token_prefix: str
    token_issued_at: datetime
    token_last_used_at: datetime | None
    revoked_at: datetime | None
    created_at: datetime


class IssuedAgentOut(Schema):
    agent: AgentOut
    token: str  # shown once; only its hash is stored


class RoomIn(Schema):
    purpose: str
    charter: str = ""
    # Dinner terms (docs/protocol.md, "Room terms"): any fields given override the defaults
    # of the named (or default) catalogue; ``dinner: false`` makes a room without terms.
    terms: dict[str, Any] | None = None
    dinner: bool = True


class SeatOut(Schema):
    owner: str
    role: str
    agent_id: UUID | None
    agent_name: str | None


class RoomOut(Schema):
    id: UUID
    purpose: str
    charter: str
    state: str
    created_at: datetime
    seats: list[SeatOut]
    terms: dict[str, Any] | None


class InviteOut(Schema):
    token: str  # shown once
    expires_at: datetime
    accept_path: str


class InviteAcceptIn(Schema):
    token: str


class BindIn(Schema):
    agent_id: UUID


class TransitionIn(Schema):
    to: Literal["open", "paused", "closed"]


class MessageOut(Schema):
    seq: int
    sender_agent_id: UUID
    text: str
    sent_at: datetime


class SnapshotLineOut(Schema):
    label: str
    value: str


class GrantRequestOut(Schema):
    grant_id: UUID
    # "action": one action (tool, arguments); "disclosure": one use of one of the owner's
    # vault items (resource, scope, recipient, summary; tool "" and arguments {}).
    kind: Literal["action", "disclosure"] = "action"
    action_id: UUID | None
    tool: str
    arguments: dict[str, Any]
    derived_from_peer: bool  # an argument repeats what the other agent wrote
    reason_rule: str
    status: str
    expires_at: datetime
    payload: dict[str, Any]  # sign GRANT_TAG + RFC 8785(payload) to approve (docs/gatekeeper.md)
    resource: str = ""  # disclosure: the vault item kind ("allergies")
    scope: str = ""  # disclosure: how much of it ("list", "free_busy_7d")
    recipient: str = ""  # disclosure: "own_agent" (yours) or "peer_agent" (the other owner's)
    summary: str = ""  # disclosure: what approving shows, to whom, in one sentence
    # In words for the owner at the fork: why it waits for them (the rule's sentence), and
    # what the agent asked for (tool, venue, time, party, price), one labelled line each.
    reason: str = ""
    snapshot: list[SnapshotLineOut] = []


class GrantDecisionIn(Schema):
    decision: Literal["approve", "deny"]
    key_id: UUID | None = None
    signature: str = ""


class ActionResultOut(Schema):
    action_id: UUID | None
    status: str
    rule: str
    detail: str
    output: dict[str, Any] | None


def _result_out(result: ActionResult) -> ActionResultOut:
    return ActionResultOut(
        action_id=result.action_id,
        status=result.status,
        rule=result.rule,
        detail=result.detail,
        output=result.output,
    )


def _agent_out(agent: Agent) -> AgentOut:
    return AgentOut.model_validate(agent, from_attributes=True)


def _room_out(room: Room) -> RoomOut:
    seats: list[RoomMember] = selectors.room_seats(room=room)
    return RoomOut(
        id=room.id,
        purpose=room.purpose,
        charter=room.charter,
        state=room.state,
        created_at=room.created_at,
        terms=room.terms,
        seats=[
            SeatOut(
                owner=seat.owner.get_username(),
                role=seat.role,
                agent_id=seat.agent_id,
                agent_name=seat.agent.name if seat.agent else None,
            )
            for seat in seats
        ],
    )


# --- agents -------------------------------------------------------------------------------


@router.get("/agents", response=list[AgentOut])
def agents_list(request: HttpRequest) -> list[AgentOut]:
    return [_agent_out(a) for a in selectors.agents_of_owner(owner=request_owner(request))]


@router.post("/agents", response={201: IssuedAgentOut})
def agents_register(
    request: HttpRequest, payload: AgentIn, idempotency_key: str = add_key_header("agent")
) -> Status[IssuedAgentOut]:
    owner = request_owner(request)
    issued = add_once(
        owner=owner,
        what="agent",
        key=idempotency_key,
        request=add_request(request.path, payload.model_dump()),
        make=lambda: services.agent_register(
            owner=owner,
            name=payload.name,
            advisor_only=payload.advisor_only,
            declared_tools=payload.declared_tools,
        ),
        made_id=lambda issued: issued.agent.id,
    )
    return Status(201, IssuedAgentOut(agent=_agent_out(issued.agent), token=issued.token))


@router.post("/agents/{agent_id}/token", response=IssuedAgentOut)
def agents_rotate_token(request: HttpRequest, agent_id: UUID) -> IssuedAgentOut:
    issued = services.agent_rotate_token(owner=request_owner(request), agent_id=agent_id)
    return IssuedAgentOut(agent=_agent_out(issued.agent), token=issued.token)


@router.post("/agents/{agent_id}/revoke", response=AgentOut)
def agents_revoke(request: HttpRequest, agent_id: UUID) -> AgentOut:
    return _agent_out(services.agent_revoke(owner=request_owner(request), agent_id=agent_id))


# --- rooms --------------------------------------------------------------------------------


@router.get("/rooms", response=list[RoomOut])
def rooms_list(request: HttpRequest) -> list[RoomOut]:
    return [_room_out(r) for r in selectors.rooms_of_owner(owner=request_owner(request))]


@router.post("/rooms", response={201: RoomOut})
def rooms_create(
    request: HttpRequest, payload: RoomIn, idempotency_key: str = add_key_header("room")
) -> Status[RoomOut]:
    owner = request_owner(request)
    room = add_once(
        owner=owner,
        what="room",
        key=idempotency_key,
        request=add_request(request.path, payload.model_dump()),
        make=lambda: services.room_create(
            owner=owner,
            purpose=payload.purpose,
            charter=payload.charter,
            terms=payload.terms,
            dinner=payload.dinner,
        ),
        made_id=lambda room: room.id,
    )
    return Status(201, _room_out(room))


@router.get("/rooms/{room_id}", response=RoomOut)
def rooms_detail(request: HttpRequest, room_id: UUID) -> RoomOut:
    return _room_out(selectors.room_seat(owner=request_owner(request), room_id=room_id).room)


@router.post("/rooms/{room_id}/invites", response={201: InviteOut})
def rooms_invite(
    request: HttpRequest, room_id: UUID, idempotency_key: str = add_key_header("invite")
) -> Status[InviteOut]:
    owner = request_owner(request)
    issued = add_once(
        owner=owner,
        what="invite",
        key=idempotency_key,
        request=add_request(request.path),
        make=lambda: services.invite_create(owner=owner, room_id=room_id),
        made_id=lambda issued: None,
    )
    invite = InviteOut(
        token=issued.token,
        expires_at=issued.invite.expires_at,
        accept_path=f"/invites/{issued.token}/",
    )
    return Status(201, invite)


@router.post("/invites/accept", response=RoomOut)
def invites_accept(request: HttpRequest, payload: InviteAcceptIn) -> RoomOut:
    seat = services.invite_accept(owner=request_owner(request), token=payload.token)
    return _room_out(seat.room)


@router.post("/rooms/{room_id}/agent", response=RoomOut)
def rooms_bind_agent(request: HttpRequest, room_id: UUID, payload: BindIn) -> RoomOut:
    seat = services.room_bind_agent(
        owner=request_owner(request), room_id=room_id, agent_id=payload.agent_id
    )
    return _room_out(seat.room)


@router.post("/rooms/{room_id}/state", response=RoomOut)
def rooms_transition(request: HttpRequest, room_id: UUID, payload: TransitionIn) -> RoomOut:
    room = services.room_transition(
        owner=request_owner(request), room_id=room_id, to=RoomState(payload.to)
    )
    return _room_out(room)


@router.get("/rooms/{room_id}/messages", response=list[MessageOut])
def rooms_messages(
    request: HttpRequest, room_id: UUID, after: int = 0, limit: int = 100
) -> list[MessageOut]:
    seat = selectors.room_seat(owner=request_owner(request), room_id=room_id)
    messages = selectors.messages_after(
        room_id=seat.room_id, after_seq=max(after, 0), limit=min(max(limit, 1), 500)
    )
    return [
        MessageOut(seq=m.seq, sender_agent_id=m.sender_id, text=m.text, sent_at=m.created_at)
        for m in messages
    ]


# --- whispers and turns -------------------------------------------------------------------


class WhisperIn(Schema):
    text: str


class WhisperOut(Schema):
    id: UUID
    text: str
    sent_at: datetime


class TurnItemOut(Schema):
    ledger_seq: int
    owner_id: str
    item_id: str
    recorded_at: datetime


class TurnOut(Schema):
    agent_id: UUID
    turn: int
    items: list[TurnItemOut]


@router.post("/rooms/{room_id}/whispers", response={201: WhisperOut})
def rooms_whisper(
    request: HttpRequest,
    room_id: UUID,
    payload: WhisperIn,
    idempotency_key: str = add_key_header("whisper"),
) -> Status[WhisperOut]:
    """Whisper to your own agent in this room; nobody else sees it."""
    owner = request_owner(request)
    whisper = add_once(
        owner=owner,
        what="whisper",
        key=idempotency_key,
        request=add_request(request.path, payload.text),
        make=lambda: services.whisper_send(owner=owner, room_id=room_id, text=payload.text),
        made_id=lambda whisper: whisper.id,
    )
    return Status(201, WhisperOut(id=whisper.id, text=whisper.text, sent_at=whisper.created_at))


@router.get("/rooms/{room_id}/turns/{turn}", response=TurnOut)
def rooms_turn(request: HttpRequest, room_id: UUID, turn: int, agent: UUID) -> TurnOut:
    """Which vault items fed one of this room's agents' turns (both owners read the ledger)."""
    seat = selectors.room_seat(owner=request_owner(request), room_id=room_id)
    items = context.context_turn_items(room_id=seat.room_id, agent_id=agent, turn=turn)
    return TurnOut(
        agent_id=agent,
        turn=turn,
        items=[TurnItemOut.model_validate(i, from_attributes=True) for i in items],
    )


# --- forks: grant requests waiting for this owner ----------------------------------------


@router.get("/rooms/{room_id}/grants", response=list[GrantRequestOut])
def rooms_grants(request: HttpRequest, room_id: UUID) -> list[GrantRequestOut]:
    seat = selectors.room_seat(owner=request_owner(request), room_id=room_id)
    return [
        GrantRequestOut.model_validate(view, from_attributes=True).model_copy(
            update={
                "reason": selectors.grant_reason_sentence(view.reason_rule),
                # A disclosure request has no tool: its ``summary`` already says it in words.
                "snapshot": [
                    SnapshotLineOut(label=label, value=value)
                    for label, value in selectors.action_in_words(
                        room=seat.room, tool=view.tool, arguments=view.arguments
                    )
                ]
                if view.tool
                else [],
            }
        )
        for view in grants_of_owner(owner=seat.owner, room_id=seat.room_id)
    ]


@router.post("/rooms/{room_id}/grants/{grant_id}", response=ActionResultOut)
def rooms_grant_decide(
    request: HttpRequest, room_id: UUID, grant_id: UUID, payload: GrantDecisionIn
) -> ActionResultOut:
    result = forks.grant_decide(
        owner=request_owner(request),
        room_id=room_id,
        grant_id=grant_id,
        approve=payload.decision == "approve",
        key_id=payload.key_id,
        signature=payload.signature,
    )
    return _result_out(result)


# --- Signal Flares: the agent's owner answers; both owners see them ------------------------


class FlareOut(Schema):
    id: UUID
    agent_id: UUID
    reason: str
    raised_by: str
    raised_at: str
    resolved: bool
    choice: str
    # In words for the reading owner (rooms.flares): whose agent, why, and the answer.
    agent_label: str
    reason_sentence: str
    raised_by_words: str
    choice_words: str
    owner_name: str


class FlareAnswerIn(Schema):
    choice: Literal["reset_resume", "mute", "block", "step_in"]


class InPersonIn(Schema):
    client_id: str = Field(min_length=1, max_length=48, pattern=r"^[A-Za-z0-9._:-]+$")
    text: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS, pattern=r"^[^\x00]*$")


class InPersonOut(Schema):
    seq: int


@router.get("/rooms/{room_id}/flares", response=list[FlareOut])
def rooms_flares(request: HttpRequest, room_id: UUID) -> list[FlareOut]:
    views = flares.flares_of_room(owner=request_owner(request), room_id=room_id)
    return [FlareOut.model_validate(v, from_attributes=True) for v in views]


@router.post("/rooms/{room_id}/flares/{flare_id}", response=FlareOut)
def rooms_flare_answer(
    request: HttpRequest, room_id: UUID, flare_id: UUID, payload: FlareAnswerIn
) -> FlareOut:
    view = flares.flare_resolve(
        owner=request_owner(request),
        room_id=room_id,
        flare_id=flare_id,
        choice=FlareChoice(payload.choice),
    )
    return FlareOut.model_validate(view, from_attributes=True)


@router.post("/rooms/{room_id}/in-person", response={201: InPersonOut})
def rooms_say_in_person(
    request: HttpRequest, room_id: UUID, payload: InPersonIn
) -> Status[InPersonOut]:
    seq = flares.owner_say_in_person(
        owner=request_owner(request),
        room_id=room_id,
        client_id=payload.client_id,
        text=payload.text,
    )
    return Status(201, InPersonOut(seq=seq))


# --- notifications ------------------------------------------------------------------------


class RoomDigestOut(Schema):
    room_id: UUID
    purpose: str
    counts: dict[str, int]


class NotificationsOut(Schema):
    urgent_flares: int
    forks_waiting: int
    digest_enabled: bool
    digest: list[RoomDigestOut]


class NotificationPreferenceIn(Schema):
    digest: bool


def _iso_moment_only(value: Any) -> Any:
    """Refuse what pydantic's lax datetime would also take (a number as Unix seconds): the
    API documents an ISO 8601 date-time, and only that is accepted."""
    if not isinstance(value, str) or not value[:4].isdigit() or value[4:5] != "-":
        raise ValueError("since must be an ISO 8601 date-time, e.g. 2026-12-01T09:00:00Z")
    return value


IsoMoment = Annotated[AwareDatetime, BeforeValidator(_iso_moment_only)]


@router.get("/notifications", response=NotificationsOut)
def owner_notifications(request: HttpRequest, since: IsoMoment | None = None) -> NotificationsOut:
    """Urgent flares, forks waiting, and the opt-in digest since ``since`` (default: a day)."""
    moment = since or timezone.now() - timedelta(days=1)
    found = notifications.notifications_for(owner=request_owner(request), since=moment)
    return NotificationsOut.model_validate(found, from_attributes=True)


@router.put("/notifications/preferences", response=NotificationsOut)
def owner_notification_preferences(
    request: HttpRequest, payload: NotificationPreferenceIn
) -> NotificationsOut:
    owner = request_owner(request)
    notifications.notification_preference_set(owner=owner, digest=payload.digest)
    found = notifications.notifications_for(owner=owner, since=timezone.now() - timedelta(days=1))
    return NotificationsOut.model_validate(found, from_attributes=True)


# --- exit notes: the agent's own, with its bearer token (docs/protocol.md) -----------------


@router.post(
    "/rooms/{room_id}/exit-note", response={201: ExitNoteOut}, auth=AgentToken(), tags=["agents"]
)
def rooms_agent_exit_note(
    request: HttpRequest, room_id: UUID, payload: ExitNoteIn
) -> Status[ExitNoteOut]:
    """The calling agent's exit note on a closed room it sat in; leaving one again replaces it."""
    agent = getattr(request, "auth", None)  # set by AgentToken
    assert isinstance(agent, Agent)
    note = exit_note_leave_as_agent(
        agent=agent, room_id=room_id, themes=payload.themes, text=payload.text
    )
    themes = sorted(t.theme for t in note.themes.all())
    return Status(201, ExitNoteOut(themes=themes, text=note.text, left_at=note.left_at))

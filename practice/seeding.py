"""Seeding the practice room, and answering its forks headlessly (DEMO ONLY).

``practice_seed`` makes (idempotently) two demo owners with server-held keys, vaults, agents
and tool policy, then a new open room in which their slips are signed: everything through the
same services a person's browser would use, so the room's ledger records each join and slip.
It runs in one transaction: a failure leaves nothing half-written.

``demo_grant_approve`` answers a fork for a demo owner with the demo-held key, through the real
grant path (``rooms.forks.grant_decide``): signature check, consumption, ledger, resume,
execution. Both owners can see in the ledger that the approval was made with a server-held key.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import rfc8785
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from gatekeeper.actions import ActionResult
from gatekeeper.grants import GrantView, grant_signed_bytes, grants_of_owner
from gatekeeper.policy import tool_policy_rule_put
from gatekeeper.records import Grant
from practice import scenario
from practice.custody import DemoSigner, demo_key_ensure, demo_signer
from practice.errors import NotADemoOwner, PracticeError
from practice.login_links import login_link_issue
from practice.models import AgentRole, PracticeAgent, PracticeOwner, PracticeRoom
from rooms import services as rooms
from rooms.forks import grant_decide
from rooms.models import Agent, RoomState
from slips import vault
from slips.canonical import SLIP_TAG
from slips.models import VaultItem
from slips.services import slip_submit
from slips.signatures import b64url_encode

GuestAgent = Literal["negotiator", "adversary"]
BOOK_TABLE = "book_table"
# The room's own tools every negotiator needs: reading the venue catalogue and saying that
# no plan is possible. Neither touches an owner's data, so no slip item is needed for them.
ROOM_TOOLS = ("venues_search", "declare_no_plan")
HOST_TOOLS = (BOOK_TABLE, *ROOM_TOOLS)
POLICY_NOTE = "Practice room demo agent (practice.seeding)"


@dataclass(frozen=True)
class PracticeSeat:
    owner: User
    agent_id: UUID
    token: str  # the agent's fresh API token (rotated at every seeding)
    login_path: str  # "/practice/login/<one-time token>/"


@dataclass(frozen=True)
class Practice:
    room_id: UUID
    host: PracticeSeat  # demo-alice
    guest: PracticeSeat  # demo-bob (his negotiator or his adversarial agent)


# --- owners, vaults, agents --------------------------------------------------------------------


def _demo_owner(username: str, name: str) -> PracticeOwner:
    """The demo owner ``username``, made on first use, named ``name`` where pages and receipts
    name an owner ("Alice's agent"). A user of that name who is not a demo owner is never
    adopted: seeding would replace their vault and sign them in by link."""
    user, created = User.objects.get_or_create(username=username)
    if created:
        user.set_unusable_password()  # they sign in only with one-time links
        user.save(update_fields=["password"])
    found = PracticeOwner.objects.select_related("owner", "device_key").filter(owner=user).first()
    if found is None and not created:
        raise PracticeError(
            f"A user named {username!r} already exists and is not a demo owner; "
            "refusing to turn it into one. Rename or remove it, then seed again."
        )
    practice_owner = found or PracticeOwner.objects.create(owner=user)
    owner = practice_owner.owner
    if name and owner.first_name != name:  # also a demo owner seeded before names were given
        owner.first_name = name
        owner.save(update_fields=["first_name"])
    return practice_owner


def _vault_replace(owner: User, items: list[dict[str, Any]]) -> None:
    for item_id in VaultItem.objects.filter(owner=owner).values_list("id", flat=True):
        vault.vault_item_delete(owner=owner, item_id=item_id)
    for content in items:
        vault.vault_item_create(owner=owner, content=content)


def _agent_with_token(
    practice_owner: PracticeOwner, role: AgentRole, name: str, declared_tools: list[str] | None
) -> tuple[Agent, str]:
    """The owner's agent for ``role`` (registered once) with a freshly rotated token."""
    owner = practice_owner.owner
    row = (
        PracticeAgent.objects.select_related("agent")
        .filter(practice_owner=practice_owner, role=role)
        .first()
    )
    if row is not None and row.agent.revoked_at is None:
        issued = rooms.agent_rotate_token(owner=owner, agent_id=row.agent.id)
    else:
        # First seeding, or someone revoked the demo agent: register a new one for the role.
        issued = rooms.agent_register(owner=owner, name=name, declared_tools=declared_tools)
        PracticeAgent.objects.update_or_create(
            practice_owner=practice_owner, role=role, defaults={"agent": issued.agent}
        )
    return issued.agent, issued.token


def _policy_allow_only(agent: Agent, tools: tuple[str, ...]) -> None:
    # An allow entry puts the agent in allow-list mode: these tools and nothing else, whatever
    # the profile's TOOL_POLICY_DEFAULT.
    for tool in tools:
        tool_policy_rule_put(agent_id=agent.id, tool=tool, effect="allow", note=POLICY_NOTE)


def _policy_deny_all(agent: Agent) -> None:
    tool_policy_rule_put(agent_id=agent.id, tool="*", effect="deny", note=POLICY_NOTE)


# --- the room ----------------------------------------------------------------------------------


def _close_earlier_rooms() -> None:
    """End every earlier practice room through the normal transition (ledger, signed head)."""
    for practice_room in PracticeRoom.objects.select_related("room").exclude(
        room__state=RoomState.CLOSED
    ):
        room = practice_room.room
        rooms.room_transition(owner=room.created_by, room_id=room.id, to=RoomState.CLOSED)


def _slip_sign_and_submit(
    *, signer: DemoSigner, owner: User, room_id: UUID, agent_id: UUID, records: list[dict[str, Any]]
) -> None:
    issued_at = int(timezone.now().timestamp())
    payload: dict[str, Any] = {
        "v": 1,
        "room_id": str(room_id),
        "owner_id": str(owner.pk),
        "agent_id": str(agent_id),
        "key_id": str(signer.key.id),
        "nonce": b64url_encode(secrets.token_bytes(18)),
        "issued_at": issued_at,
        "expires_at": issued_at + scenario.SLIP_LIFETIME_SECONDS,
        "capabilities": records,
    }
    text = rfc8785.dumps(payload).decode()
    slip_submit(
        owner=owner,
        room_id=room_id,
        seated_agent_id=agent_id,
        payload=text,
        signature=signer.sign(SLIP_TAG + text.encode()),
    )


@dataclass(frozen=True)
class SeatPlan:
    """One side of a seeded room: its demo owner, what their vault holds, what their slip
    clears, and which of their agents (by role) takes the seat."""

    username: str
    vault: list[dict[str, Any]]
    records: list[dict[str, Any]]
    role: AgentRole
    name: str = ""  # what pages call the owner (their username when empty)


def _seat(practice_owner: PracticeOwner, room_id: UUID, agent_id: UUID, token: str) -> PracticeSeat:
    owner = practice_owner.owner
    return PracticeSeat(
        owner=owner,
        agent_id=agent_id,
        token=token,
        login_path=login_link_issue(owner=owner, room_id=room_id),
    )


@transaction.atomic
def room_seed(
    *,
    host: SeatPlan,
    guest: SeatPlan,
    purpose: str,
    charter: str,
    terms: dict[str, Any] | None = None,
    close_earlier: bool = True,
) -> Practice:
    """Seed two demo owners (idempotently) and open a new room for them with these vaults and
    slips (DEMO ONLY: their keys are held by the server). The host's agent may book and use
    the room's tools; the guest's negotiator only the room's tools; an adversary nothing.
    One transaction: a failure leaves nothing half-written."""
    if host.username == guest.username:
        raise PracticeError("A room needs two different owners.")
    owners = {plan.username: _demo_owner(plan.username, plan.name) for plan in (host, guest)}
    signers = {name: demo_key_ensure(owner) for name, owner in owners.items()}
    agents: dict[str, tuple[Agent, str]] = {}
    for plan in (host, guest):
        owner = owners[plan.username]
        _vault_replace(owner.owner, plan.vault)
        if plan is host:
            agents[plan.username] = _agent_with_token(
                owner, AgentRole.HOST, scenario.HOST_AGENT_NAME, list(HOST_TOOLS)
            )
            _policy_allow_only(agents[plan.username][0], HOST_TOOLS)
            continue
        for role in (AgentRole.NEGOTIATOR, AgentRole.ADVERSARY):
            # Both are registered (and their tokens rotated) every time, so switching the
            # guest agent only changes which one is bound, and the other's old token stops.
            agent, token = _agent_with_token(
                owner, role, scenario.GUEST_AGENT_NAMES[role.value], None
            )
            if role == AgentRole.NEGOTIATOR:
                _policy_allow_only(agent, ROOM_TOOLS)
            else:
                _policy_deny_all(agent)
            if role == plan.role:
                agents[plan.username] = (agent, token)

    if close_earlier:
        _close_earlier_rooms()
    host_owner, guest_owner = owners[host.username].owner, owners[guest.username].owner
    room = rooms.room_create(owner=host_owner, purpose=purpose, charter=charter, terms=terms)
    invite = rooms.invite_create(owner=host_owner, room_id=room.id)
    rooms.invite_accept(owner=guest_owner, token=invite.token)
    for plan in (host, guest):
        user, (agent, _) = owners[plan.username].owner, agents[plan.username]
        rooms.room_bind_agent(owner=user, room_id=room.id, agent_id=agent.id)
    for plan in (host, guest):
        user, (agent, _) = owners[plan.username].owner, agents[plan.username]
        _slip_sign_and_submit(
            signer=signers[plan.username],
            owner=user,
            room_id=room.id,
            agent_id=agent.id,
            records=plan.records,
        )
    rooms.room_transition(owner=host_owner, room_id=room.id, to=RoomState.OPEN)
    PracticeRoom.objects.create(room=room)
    (host_agent, host_token), (guest_agent, guest_token) = (
        agents[host.username],
        agents[guest.username],
    )
    return Practice(
        room_id=room.id,
        host=_seat(owners[host.username], room.id, host_agent.id, host_token),
        guest=_seat(owners[guest.username], room.id, guest_agent.id, guest_token),
    )


def practice_seed(
    *,
    guest_agent: GuestAgent = "negotiator",
    guest_shares_budget: bool = True,
    now: datetime | None = None,
) -> Practice:
    """Seed the demo owners (idempotently) and open a new practice room for them.

    ``now`` anchors the scenario's calendar (vault availability); slips, tokens and login
    links always use the server clock, which is what verifies them. Earlier practice rooms
    are closed, so the agents' old tokens and rooms are retired cleanly.
    """
    if guest_agent not in ("negotiator", "adversary"):
        raise PracticeError(f"Unknown guest agent {guest_agent!r}.")
    anchor = now or timezone.now()
    return room_seed(
        host=SeatPlan(
            username=scenario.HOST_USERNAME,
            name=scenario.HOST_NAME,
            vault=scenario.vault_items("host", anchor),
            records=scenario.slip_capabilities("host"),
            role=AgentRole.HOST,
        ),
        guest=SeatPlan(
            username=scenario.GUEST_USERNAME,
            name=scenario.GUEST_NAME,
            vault=scenario.vault_items("guest", anchor),
            records=scenario.slip_capabilities("guest", guest_shares_budget=guest_shares_budget),
            role=AgentRole(guest_agent),
        ),
        purpose=scenario.ROOM_PURPOSE,
        charter=scenario.ROOM_CHARTER,
    )


# --- forks, answered headlessly ------------------------------------------------------------------


def _demo_grant(room_id: UUID, grant_id: UUID) -> tuple[Grant, PracticeOwner]:
    grant = Grant.objects.select_related("action").filter(id=grant_id, room_id=room_id).first()
    if grant is None:
        raise PracticeError("No such grant request in this room.")
    practice_owner = (
        PracticeOwner.objects.select_related("owner", "device_key")
        .filter(owner_id=grant.owner_id)
        .first()
    )
    if practice_owner is None:
        raise NotADemoOwner(
            "This grant belongs to an owner who is not a demo owner: only they can decide it."
        )
    return grant, practice_owner


def demo_grant_approve(*, room_id: UUID, grant_id: UUID) -> ActionResult:
    """Approve a pending grant on the demo owner's behalf with the demo-held key (headless demo).

    Signs exactly the grant's payload (``gatekeeper.grants.grant_signed_bytes``) and goes
    through ``rooms.forks.grant_decide``. Refuses (``NotADemoOwner``) a grant whose owner is
    not a demo owner, and (``DemoKeyUnavailable``) when the demo key cannot be opened.
    """
    grant, practice_owner = _demo_grant(room_id, grant_id)
    signer = demo_signer(practice_owner)
    return grant_decide(
        owner=practice_owner.owner,
        room_id=room_id,
        grant_id=grant_id,
        approve=True,
        key_id=signer.key.id,
        signature=signer.sign(grant_signed_bytes(grant)),
    )


def demo_grant_deny(*, room_id: UUID, grant_id: UUID) -> ActionResult:
    """Deny a pending grant on the demo owner's behalf (headless demo): the action never runs
    and the room stays paused, as when an owner says no. Needs no key; refuses a grant whose
    owner is not a demo owner (``NotADemoOwner``)."""
    _, practice_owner = _demo_grant(room_id, grant_id)
    return grant_decide(
        owner=practice_owner.owner, room_id=room_id, grant_id=grant_id, approve=False
    )


def demo_room_resume(*, room_id: UUID, grant_id: UUID) -> None:
    """Resume the room on behalf of the demo owner who decided ``grant_id`` (headless demo),
    as that owner would after saying no. Refuses (``NotADemoOwner``) for anyone else."""
    _, practice_owner = _demo_grant(room_id, grant_id)
    rooms.room_transition(owner=practice_owner.owner, room_id=room_id, to=RoomState.OPEN)


def demo_pending_grants(*, room_id: UUID) -> list[GrantView]:
    """The demo owners' pending grant requests in the room, oldest deadline first."""
    owners = User.objects.filter(practice_owner__isnull=False, seats__room_id=room_id)
    views = [view for owner in owners for view in grants_of_owner(owner=owner, room_id=room_id)]
    return sorted(views, key=lambda v: v.expires_at)

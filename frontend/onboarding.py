"""The first-run checklist on the rooms page: what a new owner still has to do before their
agent can negotiate for them, read from the owner's real state (never from a "done" flag the
page could get out of step with).

The order is the order things depend on each other: a device key signs the slip; the vault
holds what the slip can share; an agent is what gets bound to a seat; the slip is signed for
an agent in a room; a room opens only with both owners' agents bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from rooms.models import Agent, Room, RoomState
from slips.models import DeviceKey, Slip, VaultItem

StepKey = Literal["key", "vault", "agent", "room", "slip", "open"]


@dataclass(frozen=True)
class OnboardingStep:
    key: StepKey
    title: str  # what to do, as a short imperative
    why: str  # one sentence: why it matters
    done: bool
    url: str  # where it is done
    link_text: str


def _first_room(owner: User, *, states: tuple[str, ...]) -> Room | None:
    return (
        Room.objects.filter(members__owner=owner, state__in=states).order_by("-created_at").first()
    )


def onboarding_steps(*, owner: User) -> tuple[OnboardingStep, ...]:
    """The checklist for ``owner``, in order; each step done or not from what exists now."""
    now = timezone.now()
    has_key = DeviceKey.objects.filter(
        owner=owner, revoked_at__isnull=True, retired_at__isnull=True
    ).exists()
    has_vault = VaultItem.objects.filter(owner=owner).exists()
    has_agent = Agent.objects.filter(owner=owner, revoked_at__isnull=True).exists()
    has_room = Room.objects.filter(members__owner=owner).exists()
    # A slip in force: not replaced, not expired, signed by a key that still counts.
    has_slip = Slip.objects.filter(
        owner=owner,
        superseded_at__isnull=True,
        expires_at__gt=int(now.timestamp()),
        key__revoked_at__isnull=True,
    ).exists()
    has_opened = Room.objects.filter(
        members__owner=owner, state__in=[RoomState.OPEN, RoomState.PAUSED, RoomState.CLOSED]
    ).exists()

    # Where the room steps are done: the newest room still being set up, if there is one.
    draft = _first_room(owner, states=(RoomState.DRAFT,))
    setup_room = draft or _first_room(owner, states=(RoomState.OPEN, RoomState.PAUSED))
    slip_url = (
        reverse("room-slip", kwargs={"room_id": setup_room.id})
        if setup_room is not None
        else reverse("dashboard") + "#create-room"
    )
    open_url = (
        reverse("room", kwargs={"room_id": draft.id})
        if draft is not None
        else reverse("dashboard") + "#create-room"
    )
    return (
        OnboardingStep(
            key="key",
            title="Enrol a device key",
            why="The key made in your browser signs your permission slips; nobody else holds it.",
            done=has_key,
            url=reverse("keys"),
            link_text="Go to Keys",
        ),
        OnboardingStep(
            key="vault",
            title="Fill your vault",
            why="Your agent can only share what your vault holds, and only what a slip allows.",
            done=has_vault,
            url=reverse("vault"),
            link_text="Go to Vault",
        ),
        OnboardingStep(
            key="agent",
            title="Register an agent",
            why="Your agent negotiates for you in the room; it connects with a token you copy.",
            done=has_agent,
            url=reverse("agents"),
            link_text="Go to Agents",
        ),
        OnboardingStep(
            key="room",
            title="Create or join a room",
            why="A room is where your agent and the other owner's agent meet.",
            done=has_room,
            url=reverse("dashboard") + "#create-room",
            link_text="Create a room",
        ),
        OnboardingStep(
            key="slip",
            title="Sign the permission slip",
            why="Nothing from your vault reaches the other agent unless your slip says so.",
            done=has_slip,
            url=slip_url,
            link_text="Sign the slip" if setup_room is not None else "Create a room first",
        ),
        OnboardingStep(
            key="open",
            title="Open the room",
            why="Once both agents are bound, opening the room lets them start talking.",
            done=has_opened,
            url=open_url,
            link_text="Go to the room" if draft is not None else "Create a room first",
        ),
    )


def onboarding_complete(steps: tuple[OnboardingStep, ...]) -> bool:
    return all(step.done for step in steps)

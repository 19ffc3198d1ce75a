"""How much one owner may hold at once: agents not revoked, rooms not closed, vault items,
device keys in use, invitations waiting to be used, webhooks on (``SYNAPSIA["OWNER_LIMITS"]``,
each its own setting).

Nobody needs more than these to use Synapsia; without them one signed-in account (or a script
behind one) could fill the database through the pages, which, unlike the API, are not
rate-limited. A refusal says in words what is held and what to do to add more, and nothing is
written. The count is taken inside the transaction that adds, under a lock on the owner's row,
so two adds at once are counted one after the other (PostgreSQL; SQLite's IMMEDIATE
transactions already run writers one at a time) and cannot both pass the limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import QuerySet


@dataclass(frozen=True)
class Held:
    """One kind of thing an owner holds, as a refusal names it."""

    one: str  # "agent that is not revoked"
    many: str  # "agents that are not revoked"
    to_add_more: str  # what the owner does first: "Revoke one you no longer use"
    adding: str  # "registering another"


HELD: dict[str, Held] = {
    "agents": Held(
        "agent that is not revoked",
        "agents that are not revoked",
        "Revoke one you no longer use",
        "registering another",
    ),
    "rooms": Held(
        "room that is not closed",
        "rooms that are not closed",
        "Close or delete one you no longer need",
        "creating another",
    ),
    "vault_items": Held(
        "item in your vault",
        "items in your vault",
        "Delete some you no longer need",
        "adding more",
    ),
    "device_keys": Held(
        "device key in use",
        "device keys in use",
        "Revoke one you no longer use (a lost or old device's)",
        "enrolling another",
    ),
    "invites": Held(
        "invitation waiting to be used",
        "invitations waiting to be used",
        "Wait until one you made is used or expires (each works for a few days)",
        "making another",
    ),
    "webhooks": Held(
        "webhook on",
        "webhooks on",
        "Switch one off",
        "adding another",
    ),
}


class OwnerLimitReached(Exception):
    """The owner holds as many of ``held`` as one owner may; nothing was added."""

    status = 409

    def __init__(self, held: str, limit: int) -> None:
        words = HELD[held]
        self.code = f"{held}_limit_reached"
        self.message = (
            f"You have {limit} {words.one if limit == 1 else words.many}, the most one owner "
            f"may have. {words.to_add_more} before {words.adding}."
        )
        super().__init__(self.message)


def owner_limit(held: str) -> int:
    """How many of ``held`` one owner may have (read on every add: a changed setting applies
    at once)."""
    return int(settings.SYNAPSIA["OWNER_LIMITS"][held])


def owner_row_lock(owner: User) -> None:
    """Lock the owner's row until the transaction ends: what is read of theirs after it is
    not changed by another add of theirs meanwhile (taken again at no harm)."""
    assert transaction.get_connection().in_atomic_block, "count and add in one transaction"
    User.objects.select_for_update().filter(pk=owner.pk).values_list("pk").first()


def owner_limit_check(owner: User, held: str, holding: QuerySet[Any]) -> None:
    """Refuse (``OwnerLimitReached``) if ``holding``, the owner's ``held`` that count, is at
    the limit. Call inside the transaction that then adds the new one."""
    owner_row_lock(owner)
    limit = owner_limit(held)
    if holding.count() >= limit:
        raise OwnerLimitReached(held, limit)

"""An add sent twice makes one thing: the REST API's optional ``Idempotency-Key``.

A client that sends an add (register an agent, create a room, make an invitation, add a vault
item, whisper to its agent) and loses the answer cannot tell whether it was made; sent again
it would make a second. With a key (16 to 64 of ``A-Z a-z 0-9 - _``, new for each add), the
add is remembered under the owner for the ``add_keys`` retention row's days (one):

* the same key with the same request makes nothing more: it is answered 409
  ``<what>_already_added`` with the ``id`` of what the first made. The first answer may have
  held a secret (an agent's token, an invitation's link), which is never kept to be shown
  again: rotate the agent's token, or make a new invitation;
* the same key with another request (another path, body or room) is refused 422
  ``idempotency_key_reused`` and makes nothing: one key is one add;
* a key that is not 16 to 64 of those characters is refused 422 ``idempotency_key_invalid``.

The key is looked up and the add made and remembered in one transaction, under the lock on
the owner's row that their limits take (``gatekeeper.owner_limits``), so the same add sent
twice at once makes one. What is kept is digests (HMACs under the server's secret, so a room's
purpose or a vault item's content cannot be guessed from them), the kind of add and the id of
what it made. A webhook's add keeps its own key with its address
(``gatekeeper.webhooks.webhook_endpoint_create``): there the owner's form sends its key again
with another address after going back, which is another add.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal, TypeVar
from uuid import UUID

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from django.utils.crypto import salted_hmac
from ninja import Header

from gatekeeper.models import AddKey
from gatekeeper.owner_limits import owner_row_lock
from rooms.retention import Purged, RetentionRow, retention_row

ADD_KEY = re.compile(r"[A-Za-z0-9_-]{16,64}")
HEADER = "Idempotency-Key"
RETENTION_ROW = "add_keys"

What = Literal["agent", "room", "invite", "vault_item", "whisper"]
# What the first answer of an add held that is not kept to be shown again, and what to do.
NOT_SHOWN_AGAIN: dict[str, str] = {
    "agent": "Its token was in the first answer only: rotate it for a new one.",
    "invite": "Its link was in the first answer only: make a new invitation.",
}

Made = TypeVar("Made")


class AddKeyRefused(Exception):
    """The key is not one an add may carry, or was used for another add; nothing was made."""

    status = 422

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class AddKeyReused(AddKeyRefused):
    def __init__(self) -> None:
        super().__init__(
            "idempotency_key_reused",
            f"This {HEADER} was sent with another add; nothing was added. Use a new key for "
            "each add.",
        )


class AlreadyAdded(Exception):
    """This add (its key and request) has made its ``what`` already: ``made_id`` (None for
    an invitation, which a client knows by its link only)."""

    status = 409

    def __init__(self, what: What, made_id: UUID | None) -> None:
        self.code = f"{what}_already_added"
        made = f"This add (its {HEADER} and request) was made already."
        self.message = " ".join(filter(None, (made, NOT_SHOWN_AGAIN.get(what))))
        self.made_id = made_id
        super().__init__(self.message)


def add_key_valid(key: str) -> bool:
    """Whether ``key`` is a one-time key an add may carry (here and for webhooks)."""
    return ADD_KEY.fullmatch(key) is not None


def add_key_check(key: str) -> None:
    """Refuse (``AddKeyRefused``, 422 ``idempotency_key_invalid``) a key an add may not carry;
    no key at all is an add without one."""
    if key and not add_key_valid(key):
        raise AddKeyRefused(
            "idempotency_key_invalid",
            f"An {HEADER} is 16 to 64 letters, digits, '-' or '_'; nothing was added.",
        )


def add_key_header(what: What) -> Any:
    """The API operation's optional ``Idempotency-Key`` header parameter, documented."""
    return Header(
        "",
        alias=HEADER,
        description=(
            "Optional, 16 to 64 of A-Z a-z 0-9 - _, new for each add: sent again with the same "
            f"request, the add makes nothing more and is answered 409 {what}_already_added "
            "(with the id of what it made, but for an invitation); with another request, 422 "
            "idempotency_key_reused. Remembered for a day (SYNAPSIA_ADD_KEY_RETENTION_DAYS)."
        ),
    )


def add_request(path: str, body: object = None) -> str:
    """What identifies an add's request for ``add_once``: its path (the request's own) and its
    body, as canonical JSON (the keys sorted, so that a retry serialised afresh is the same
    request)."""
    return f"{path}\n{json.dumps(body, sort_keys=True, separators=(',', ':'), default=str)}"


def _digest(purpose: str, value: str) -> str:
    return salted_hmac(f"synapsia.add_keys.{purpose}", value, algorithm="sha256").hexdigest()


def _since(now: datetime) -> datetime:
    return retention_row(RETENTION_ROW).cutoff(now)


def add_once(
    *,
    owner: User,
    what: What,
    key: str,
    request: str,
    make: Callable[[], Made],
    made_id: Callable[[Made], UUID | None],
) -> Made:
    """``make()`` once for this add: with no ``key``, simply ``make()``; with one, refused as
    the module says if it was seen already, else made and remembered in one transaction.
    ``request``: what identifies the request (``add_request``; digested here).
    ``made_id``: the id of what ``make`` returned, to name in a repeat's answer (None: it has
    none a client could use; an invitation is its link)."""
    add_key_check(key)
    if not key:
        return make()
    key_digest = _digest("key", key)
    request_digest = _digest("request", f"{what}\n{request}")
    now = timezone.now()
    with transaction.atomic():
        owner_row_lock(owner)  # the same add sent twice at once: the second waits, then sees it
        mine = AddKey.objects.filter(owner=owner, key_digest=key_digest)
        since = _since(now)
        seen = mine.filter(created_at__gte=since).first()
        if seen is not None:
            if seen.what == what and seen.request_digest == request_digest:
                raise AlreadyAdded(what, seen.made_id)
            raise AddKeyReused()
        made = make()
        mine.filter(created_at__lt=since).delete()  # past its day, not yet purged
        AddKey.objects.create(
            owner=owner,
            key_digest=key_digest,
            what=what,
            request_digest=request_digest,
            made_id=made_id(made),
            created_at=now,
        )
        return made


def add_keys_purge_expired(now: datetime) -> Purged:
    """The ``add_keys`` retention row's purge: keys past their day (none of them counts for a
    repeat any more: ``add_once`` reads only those within it)."""
    row = retention_row(RETENTION_ROW)
    rows = AddKey.objects.filter(created_at__lt=row.cutoff(now)).delete()[0]
    return Purged(
        key=row.key,
        rows=rows,
        rooms=0,
        summary=f"add keys: deleted {rows} older than {row.period}",
    )


def add_keys_retention_row() -> RetentionRow:
    """The schedule's row for the keys (registered by the gatekeeper app)."""
    return RetentionRow(
        key=RETENTION_ROW,
        label="Keys your API client sent to make an add once",
        setting="ADD_KEY_RETENTION_DAYS",
        default_days=1,
        starts="",
        note=(
            "Only a digest of each key and of its request, with what the add made, so that "
            "a retry makes nothing twice; never what was sent."
        ),
        purge=add_keys_purge_expired,
        in_rooms=False,
    )

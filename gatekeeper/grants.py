"""Grants: the affected owner's signed, single-use, expiring approval of one thing.

An **action grant** is bound to exactly one recorded action: its tool and the hash of its
validated arguments. A **disclosure grant** is bound to exactly one use of a slip item whose
approval is ``per_use``: the owner's item kind and scope, the agent that would receive it and
the signed slip it is shown under. It is asked for by context assembly the first time the item
is needed (``disclosure_approval_ask``) and, once approved, used by the recipient's next
assembly (``disclosure_grant_claim`` then ``disclosure_grant_consume``, in the transaction that
discloses).

The owner's browser signs ``GRANT_TAG + RFC 8785(grant_payload)`` with a device key; the
server rebuilds the payload from its own rows and verifies the signature, the key (the
owner's, neither revoked nor retired), the expiry and that the grant is still pending, and
records the decision in the same locked transaction, so two workers racing on one grant act
once. Grants are decided one by one: there is no "approve all".
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import rfc8785
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.models import Case, F, Field, Value, When
from django.utils import timezone

from gatekeeper.records import (
    OPEN_GRANT_STATUSES,
    ActionRecord,
    ActionStatus,
    Grant,
    GrantKind,
    GrantStatus,
)
from gatekeeper.signals import grant_expired
from ledger.events import (
    Denial,
    ForkResolved,
    GrantApproved,
    GrantDenied,
    GrantExpired,
    GrantRequested,
    LedgerEventRecord,
)
from ledger.services import ledger_append
from slips.canonical import GRANT_TAG
from slips.errors import Malformed
from slips.models import DeviceKey
from slips.services import key_custody_recorded
from slips.signatures import b64url_decode, signature_valid
from slips.verification import capability_verdict
from synapsia.db.statements import statement_cursor


class GrantUnusable(Exception):
    """The grant cannot be decided: unknown, not yours, already decided or used."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class GrantCheck:
    ok: bool
    rule: str
    record_id: UUID | None  # the action an action grant clears; None for a disclosure grant


@dataclass(frozen=True)
class GrantView:
    """What the owner sees at the fork, and the payload their device key signs."""

    grant_id: UUID
    action_id: UUID | None
    room_id: UUID
    owner_id: int  # the owner who decides (the acting agent's owner, or the item's owner)
    tool: str
    arguments: dict[str, Any]
    derived_from_peer: bool
    reason_rule: str
    status: str
    expires_at: datetime
    payload: dict[str, Any]
    kind: str = "action"  # or "disclosure"
    # Disclosure grants: which of the owner's items, how much of it, to whom; in words too.
    resource: str = ""
    scope: str = ""
    recipient: str = ""  # own_agent (the owner's agent) or peer_agent (the other owner's)
    summary: str = ""


# What a disclosure grant would show, in the owner's words (the item's content never is).
_KIND_WORDS: dict[str, str] = {
    "availability": "when you are busy (free/busy only, never titles)",
    "budget": "your budget",
    "food_likes": "the food you like",
    "food_dislikes": "the food you would rather not eat",
    "allergies": "your allergies",
    "neighbourhood": "your home neighbourhood",
    "link": "your links",
    "note": "your notes",
}
_SCOPE_WORDS: dict[str, str] = {
    "free_busy_24h": "for the next 24 hours",
    "free_busy_7d": "for the next 7 days",
    "free_busy_14d": "for the next 14 days",
    "free_busy_30d": "for the next 30 days",
    "band": "as a rough band, rounded out to tens",
    "range": "as the exact range",
    "list": "the whole list",
    "name": "its name",
    "url": "the link",
    "text": "the whole note",
}
_RECIPIENT_WORDS = {"own_agent": "your own agent", "peer_agent": "the other owner's agent"}


def disclosure_summary(*, resource: str, scope: str, recipient: str) -> str:
    """One sentence saying what approving a disclosure grant shows, and to whom."""
    what = _KIND_WORDS.get(resource, "one of your vault items")
    how = _SCOPE_WORDS.get(scope, "as your permission slip limits it")
    whom = _RECIPIENT_WORDS.get(recipient, "an agent in this room")
    return f"Let {whom} see {what} ({how}), once, on its next turn."


def grant_payload(grant: Grant) -> dict[str, Any]:
    """The exact document an approval signs (integers and strings only)."""
    if grant.kind == GrantKind.DISCLOSURE:
        return {
            "decision": "approve",
            "kind": "disclosure",
            "grant_id": str(grant.id),
            "room_id": str(grant.room_id),
            "owner_id": str(grant.owner_id),
            "recipient_agent_id": str(grant.recipient_agent_id),
            "resource": grant.resource,
            "scope": grant.scope,
            "slip_id": str(grant.slip_id),
            "expires_at": int(grant.expires_at.timestamp()),
        }
    assert grant.action is not None  # the check constraint: an action grant names its action
    return {
        "decision": "approve",
        "grant_id": str(grant.id),
        "room_id": str(grant.room_id),
        "action_id": str(grant.action_id),
        "tool": grant.action.tool,
        "arguments_sha256": grant.action.arguments_hash,
        "owner_id": str(grant.owner_id),
        "expires_at": int(grant.expires_at.timestamp()),
    }


def grant_signed_bytes(grant: Grant) -> bytes:
    return GRANT_TAG + rfc8785.dumps(grant_payload(grant))


def _view(grant: Grant) -> GrantView:
    action = grant.action
    if action is None:
        return GrantView(
            grant_id=grant.id,
            action_id=None,
            room_id=grant.room_id,
            owner_id=grant.owner_id,
            tool="",
            arguments={},
            derived_from_peer=False,
            reason_rule=grant.reason_rule,
            status=grant.status,
            expires_at=grant.expires_at,
            payload=grant_payload(grant),
            kind=GrantKind.DISCLOSURE.value,
            resource=grant.resource,
            scope=grant.scope,
            recipient=grant.recipient,
            summary=disclosure_summary(
                resource=grant.resource, scope=grant.scope, recipient=grant.recipient
            ),
        )
    return GrantView(
        grant_id=grant.id,
        action_id=action.id,
        room_id=grant.room_id,
        owner_id=grant.owner_id,
        tool=action.tool,
        arguments=action.arguments,
        derived_from_peer=action.derived_from_peer,
        reason_rule=grant.reason_rule,
        status=grant.status,
        expires_at=grant.expires_at,
        payload=grant_payload(grant),
    )


def grants_of_owner(
    *, owner: User, room_id: UUID | None = None, pending_only: bool = True
) -> list[GrantView]:
    """The owner's grant requests (the "Waiting for you" list): actions and disclosures."""
    grants = Grant.objects.filter(owner=owner).select_related("action").order_by("created_at")
    if room_id is not None:
        grants = grants.filter(room_id=room_id)
    if pending_only:
        grants = grants.filter(status=GrantStatus.PENDING)
    return [_view(g) for g in grants]


# A request already answered, said to the owner who tries to answer it again (another tab, a
# double click, a late page): what became of it, and that nothing more is needed.
_ALREADY_WORDS: dict[str, str] = {
    GrantStatus.APPROVED: "This request was already answered: approved, and the item is shared"
    " once, on the agent's next turn. Nothing more to do.",
    GrantStatus.CONSUMED: "This request was already answered: approved and used. Nothing more to"
    " do.",
    GrantStatus.DENIED: "This request was already answered: denied, so nothing was done. Nothing"
    " more to do.",
    GrantStatus.EXPIRED: "This request has already ended unanswered (it expired, or what it was"
    " asked under changed), so nothing was done. Nothing more to do.",
}
_ALREADY_UNKNOWN = "This request was already answered. Reload the page to see where it stands."


def _pending_locked(*, owner: User, grant_id: UUID) -> Grant:
    grant = (
        Grant.objects.select_for_update(of=("self",))
        .select_related("action")
        .filter(id=grant_id, owner=owner)
        .first()
    )
    if grant is None:
        raise GrantUnusable("No such grant request.")
    if grant.status != GrantStatus.PENDING:
        raise GrantUnusable(_ALREADY_WORDS.get(grant.status, _ALREADY_UNKNOWN))
    return grant


def _expire(grant: Grant) -> None:
    """End an open grant unused (its deadline passed, or what it was asked under changed)."""
    grant.status = GrantStatus.EXPIRED
    grant.decided_at = grant.decided_at or timezone.now()
    grant.save(update_fields=["status", "decided_at"])
    if grant.kind == GrantKind.DISCLOSURE:
        # No fork was opened and the room was not paused for it: the item stays withheld.
        ledger_append(room_id=grant.room_id, event=GrantExpired(grant_id=str(grant.id)))
        return
    ActionRecord.objects.filter(grant__id=grant.id).update(
        status=ActionStatus.DENIED, rule="grant_expired"
    )
    ledger_append(
        room_id=grant.room_id,
        event=GrantExpired(grant_id=str(grant.id), action_id=str(grant.action_id)),
    )
    # The fork ends unanswered; the room stays paused (the safe default at a fork).
    ledger_append(
        room_id=grant.room_id,
        event=ForkResolved(fork_id=str(grant.id), by="server", resolution="expired"),
    )
    action = grant.action
    assert action is not None
    transaction.on_commit(
        lambda: grant_expired.send(
            sender=Grant,
            room_id=grant.room_id,
            agent_id=action.agent_id,
            ref=action.idempotency_key,
        )
    )


def _void(grant: Grant, *, rule: str) -> None:
    """End an open disclosure grant that can no longer be used, saying why in the ledger."""
    ledger_append(
        room_id=grant.room_id,
        event=Denial(rule=rule, subject_id=str(grant.owner_id), resource_id=str(grant.id)),
    )
    _expire(grant)


def _disclosure_refusal(grant: Grant, *, now: datetime) -> str | None:
    """Why the owner's live slip no longer clears exactly this use asking per use, or None:
    it must be the same slip (not replaced, its key not revoked, not expired), item kind,
    record, scope and recipient."""
    assert grant.source_agent_id is not None
    verdict = capability_verdict(
        room_id=grant.room_id,
        owner_id=grant.owner_id,
        agent_id=grant.source_agent_id,
        resource=grant.resource,
        operation=grant.operation,
        recipient=grant.recipient,
        now=now,
    )
    if verdict.rule == "verification_error":
        return "grant_check_failed"  # the check failed, not the slip: the request stays
    if (
        verdict.allowed
        and verdict.approval_required
        and verdict.capability is not None
        and verdict.slip_id == grant.slip_id
        and verdict.capability.scope == grant.scope
    ):
        return None
    return "grant_slip_changed"


def grant_approve(*, owner: User, grant_id: UUID, key_id: UUID, signature: str) -> GrantCheck:
    """Verify a signed approval and record it; call inside the caller's transaction.

    An action grant is consumed here (the caller executes the action); a disclosure grant
    becomes ``approved`` and is consumed by the recipient's next context assembly, which
    discloses the item once. A bad signature, a key that is not the owner's live key, or an
    expired grant is recorded and refused (``ok=False``); so is a disclosure grant whose slip
    was replaced or revoked, or no longer clears that item at that scope (it ends); a grant
    already decided raises ``GrantUnusable``.
    """
    grant = _pending_locked(owner=owner, grant_id=grant_id)
    subject = str(owner.pk)
    if grant.expires_at <= timezone.now():
        _expire(grant)
        return GrantCheck(False, "grant_expired", grant.action_id)
    key = DeviceKey.objects.filter(
        id=key_id, owner=owner, revoked_at__isnull=True, retired_at__isnull=True
    ).first()
    try:
        raw_signature = b64url_decode(signature, field="signature", length=64)
    except Malformed:
        raw_signature = b""
    if key is None or not signature_valid(
        public_key=bytes(key.public_key), message=grant_signed_bytes(grant), signature=raw_signature
    ):
        rule = "grant_key_not_usable" if key is None else "grant_bad_signature"
        ledger_append(
            room_id=grant.room_id,
            event=Denial(rule=rule, subject_id=subject, resource_id=str(grant.id)),
        )
        return GrantCheck(False, rule, grant.action_id)
    now = timezone.now()
    disclosure = grant.kind == GrantKind.DISCLOSURE
    refusal = _disclosure_refusal(grant, now=now) if disclosure else None
    if refusal == "grant_check_failed":
        ledger_append(
            room_id=grant.room_id,
            event=Denial(rule=refusal, subject_id=subject, resource_id=str(grant.id)),
        )
        return GrantCheck(False, refusal, None)
    if refusal is not None:
        _void(grant, rule=refusal)  # asked under a slip no longer in force: it ends
        return GrantCheck(False, refusal, None)
    grant.status = GrantStatus.APPROVED if disclosure else GrantStatus.CONSUMED
    grant.payload = rfc8785.dumps(grant_payload(grant))
    grant.signature = raw_signature
    grant.key = key
    grant.decided_at = now
    if not disclosure:
        grant.consumed_at = now
    grant.save(update_fields=["status", "payload", "signature", "key", "decided_at", "consumed_at"])
    DeviceKey.objects.filter(id=key.id).update(last_used_at=now)
    ledger_append(
        room_id=grant.room_id,
        event=GrantApproved(
            grant_id=str(grant.id),
            action_id=str(grant.action_id) if grant.action_id else None,
            owner_id=subject,
            key_id=str(key.id),
            key_custody=key_custody_recorded(key),
        ),
    )
    return GrantCheck(True, "granted", grant.action_id)


@transaction.atomic
def grant_deny(*, owner: User, grant_id: UUID) -> GrantView:
    """The owner says no. An action never runs (the room stays paused for the owners); a
    disclosure is not made, and that item is not asked for again under this slip."""
    grant = _pending_locked(owner=owner, grant_id=grant_id)
    grant.status = GrantStatus.DENIED
    grant.decided_at = timezone.now()
    grant.save(update_fields=["status", "decided_at"])
    if grant.action_id is not None:
        ActionRecord.objects.filter(id=grant.action_id).update(
            status=ActionStatus.DENIED, rule="grant_denied"
        )
    ledger_append(
        room_id=grant.room_id,
        event=GrantDenied(
            grant_id=str(grant.id),
            action_id=str(grant.action_id) if grant.action_id else None,
            owner_id=str(owner.pk),
            reason="owner_denied",
        ),
    )
    return _view(grant)


def grants_expire(*, now: datetime | None = None) -> int:
    """End every open grant past its deadline unused (run by Celery beat): pending ones as a
    denial, and disclosure approvals that no turn used in time."""
    now = now or timezone.now()
    expired = 0
    for grant_id in Grant.objects.filter(
        status__in=OPEN_GRANT_STATUSES, expires_at__lte=now
    ).values_list("id", flat=True):
        with transaction.atomic():
            grant = (
                Grant.objects.select_for_update(of=("self",))
                .select_related("action")
                .filter(id=grant_id, status__in=OPEN_GRANT_STATUSES)
                .first()
            )
            if grant is not None:
                _expire(grant)
                expired += 1
    return expired


# --- disclosure grants: asked for and used by context assembly (rooms.context) --------------


@dataclass(frozen=True)
class DisclosureAsk:
    """One use of a slip item that the decision point cleared but for its owner's approval
    (``approval_per_use``): whose item, of which kind, at which scope, to which agent, under
    which signed slip and record."""

    room_id: UUID
    owner_id: int
    source_agent_id: UUID  # the owner's own agent: the one the slip was signed for
    recipient_agent_id: UUID
    recipient: str  # own_agent or peer_agent
    resource: str
    operation: str  # the slip record that clears it, and pays the use
    scope: str
    slip_id: UUID


class AskState(enum.StrEnum):
    WAITING = "waiting"  # a request is open for the owner (asked now or earlier)
    DENIED = "denied"  # the owner said no under this slip: not asked again


def _same_use(grant: Grant, ask: DisclosureAsk) -> bool:
    return (
        grant.source_agent_id,
        grant.recipient,
        grant.operation,
        grant.scope,
        grant.slip_id,
    ) == (ask.source_agent_id, ask.recipient, ask.operation, ask.scope, ask.slip_id)


class GrantsChanged(Exception):
    """A turn's grants changed under its lock after all: the turn must disclose nothing."""


class TurnGrants:
    """A recipient's disclosure grants in one room, read and locked once for a context turn
    (``turn_grants_lock``); the turn's claims, asks and consumptions are decided against them
    in memory, their ledger events added to the caller's list in the order they happen, and
    written by ``write`` in at most two statements (one update, one insert).

    The rules are those of one ask at a time: an approval is re-checked at use (signature
    over the payload rebuilt from the row, the owner's key neither revoked nor retired, not
    expired), no second request while one is open, an open one past its deadline or asked
    under another slip, scope or record ends, a denial under a slip is remembered. Whether
    anything is asked depends on the owner's slip only, never on their vault.
    """

    def __init__(self, grants: list[Grant]) -> None:
        self._grants = grants
        self._changed: dict[UUID, Grant] = {}
        self._created: list[Grant] = []

    def _of(self, ask: DisclosureAsk, *statuses: str) -> list[Grant]:
        return [
            g
            for g in self._grants
            if g.owner_id == ask.owner_id and g.resource == ask.resource and g.status in statuses
        ]

    def _expire(self, grant: Grant, *, now: datetime, events: list[LedgerEventRecord]) -> None:
        # No fork was opened and the room was not paused for it: the item stays withheld.
        grant.status = GrantStatus.EXPIRED
        grant.decided_at = grant.decided_at or now
        self._changed[grant.id] = grant
        events.append(GrantExpired(grant_id=str(grant.id)))

    def _void(
        self, grant: Grant, *, rule: str, now: datetime, events: list[LedgerEventRecord]
    ) -> None:
        events.append(Denial(rule=rule, subject_id=str(grant.owner_id), resource_id=str(grant.id)))
        self._expire(grant, now=now, events=events)

    def claim(
        self, ask: DisclosureAsk, *, now: datetime, events: list[LedgerEventRecord]
    ) -> Grant | None:
        """The owner's approved, unexpired grant for exactly this use, else None (an approval
        that fails its re-check ends unused and discloses nothing)."""
        approved = self._of(ask, GrantStatus.APPROVED)
        grant = approved[0] if approved else None
        if grant is None or not _same_use(grant, ask):
            return None
        if grant.expires_at <= now:
            self._expire(grant, now=now, events=events)
            return None
        key = grant.key
        if (
            key is None
            or key.owner_id != grant.owner_id
            or key.revoked_at is not None
            or key.retired_at is not None
        ):
            self._void(grant, rule="grant_key_not_usable", now=now, events=events)
            return None
        signed = grant_signed_bytes(grant)
        if bytes(grant.payload or b"") != signed[len(GRANT_TAG) :] or not signature_valid(
            public_key=bytes(key.public_key),
            message=signed,
            signature=bytes(grant.signature or b""),
        ):
            self._void(grant, rule="grant_bad_signature", now=now, events=events)
            return None
        return grant

    def ask(
        self, ask: DisclosureAsk, *, now: datetime, events: list[LedgerEventRecord]
    ) -> AskState:
        """Ask the item's owner, once, to approve this use (see the class docstring)."""
        for grant in self._of(ask, *OPEN_GRANT_STATUSES):
            if grant.expires_at > now and _same_use(grant, ask):
                return AskState.WAITING
            self._expire(grant, now=now, events=events)
        if any(g.slip_id == ask.slip_id for g in self._of(ask, GrantStatus.DENIED)):
            return AskState.DENIED
        grant = Grant(
            kind=GrantKind.DISCLOSURE,
            room_id=ask.room_id,
            owner_id=ask.owner_id,
            reason_rule="approval_per_use",
            status=GrantStatus.PENDING,
            expires_at=now + timedelta(seconds=settings.SYNAPSIA["GRANT_TTL_SECONDS"]),
            recipient_agent_id=ask.recipient_agent_id,
            source_agent_id=ask.source_agent_id,
            recipient=ask.recipient,
            resource=ask.resource,
            operation=ask.operation,
            scope=ask.scope,
            slip_id=ask.slip_id,
        )
        self._grants.append(grant)
        self._created.append(grant)
        events.append(GrantRequested(grant_id=str(grant.id), owner_id=str(ask.owner_id)))
        return AskState.WAITING

    def consume(self, grant: Grant, *, now: datetime) -> None:
        """Spend a claimed grant; written with the turn's disclosures."""
        grant.status = GrantStatus.CONSUMED
        grant.consumed_at = now
        self._changed[grant.id] = grant

    def write(self) -> None:
        """Write what the turn changed: one UPDATE for every grant that ended or was used
        (each was open when locked; if any is not, ``GrantsChanged``), one INSERT for every
        new request. In the turn's transaction, after its ledger events."""
        changed = list(self._changed.values())
        if changed:
            cases = {
                name: Case(
                    *[When(id=g.id, then=Value(getattr(g, name))) for g in changed],
                    default=F(name),
                    output_field=Grant._meta.get_field(name),  # type: ignore[arg-type]
                )
                for name in ("status", "decided_at", "consumed_at")
            }
            updated = Grant.objects.filter(
                id__in=[g.id for g in changed], status__in=OPEN_GRANT_STATUSES
            ).update(**cases)
            if updated != len(changed):
                raise GrantsChanged(f"{len(changed) - updated} grants changed under the lock")
        if self._created:
            Grant.objects.bulk_create(self._created)


# A context turn that asks per use reads its grants on every turn: the ORM's compilation of
# that read was a quarter of such a turn's CPU (issue 17). The statement is written once per
# process; the values go through each field's own converters, as the ORM's would.
_Converter = Callable[[Any, Any, Any], Any]


@dataclass(frozen=True)
class _GrantsRead:
    sql: str
    grant_fields: tuple[tuple[str, tuple[_Converter, ...], Any], ...]
    key_fields: tuple[tuple[str, tuple[_Converter, ...], Any], ...]


def _converted(model: Any, alias: str) -> tuple[tuple[str, tuple[_Converter, ...], Any], ...]:
    fields: list[tuple[str, tuple[_Converter, ...], Any]] = []
    for field in model._meta.concrete_fields:
        col = field.get_col(alias)
        converters = connection.ops.get_db_converters(col) + col.get_db_converters(connection)
        fields.append((field.attname, tuple(converters), col))
    return tuple(fields)


def _field(model: Any, name: str) -> Field[Any, Any]:
    field = model._meta.get_field(name)
    assert isinstance(field, Field)  # a concrete field, not a reverse relation
    return field


def _column(model: Any, name: str) -> str:
    column = _field(model, name).column
    assert column is not None  # concrete fields have a column
    return connection.ops.quote_name(column)


@functools.cache
def _turn_grants_read(vendor: str) -> _GrantsRead:
    """``turn_grants_lock``'s statement and each column's converters, once per process.
    Only our own table and column names and the grant kind, a constant of the code, are
    interpolated; every value the turn brings is a parameter."""
    q = connection.ops.quote_name
    # The kind as a literal, not a parameter: a parameter compared with a column of a partial
    # index's condition (``one_open_disclosure_grant``'s ``kind``) makes SQLite plan the
    # statement again on every execute, which was half this read's CPU (55 -> 16 us here).
    kind = GrantKind.DISCLOSURE.value
    assert kind.isascii() and kind.isalpha()  # nothing to quote
    grant, key = q(Grant._meta.db_table), q(DeviceKey._meta.db_table)
    columns = [f"g.{_column(Grant, f.name)}" for f in Grant._meta.concrete_fields]
    columns += [f"k.{_column(DeviceKey, f.name)}" for f in DeviceKey._meta.concrete_fields]
    sql = (
        f"SELECT {', '.join(columns)} FROM {grant} g "  # noqa: S608
        f"LEFT JOIN {key} k ON k.{_column(DeviceKey, 'id')} = g.{_column(Grant, 'key')} "
        f"WHERE g.{_column(Grant, 'kind')} = '{kind}' AND g.{_column(Grant, 'room_id')} = %s "
        f"AND g.{_column(Grant, 'recipient_agent_id')} = %s "
        f"AND g.{_column(Grant, 'status')} IN (%s, %s, %s) "
        f"ORDER BY g.{_column(Grant, 'created_at')}, g.{_column(Grant, 'id')}"
    )
    # As select_for_update(of=("self",)): the grants are locked, their keys read as they stand.
    if connection.features.has_select_for_update_of:
        sql += " FOR UPDATE OF g"
    elif connection.features.has_select_for_update:
        sql += " FOR UPDATE"
    return _GrantsRead(
        sql=sql,
        grant_fields=_converted(Grant, Grant._meta.db_table),
        key_fields=_converted(DeviceKey, DeviceKey._meta.db_table),
    )


def _values(fields: tuple[tuple[str, tuple[_Converter, ...], Any], ...], row: Any) -> list[Any]:
    values = []
    for (_name, converters, col), value in zip(fields, row, strict=True):
        for convert in converters:
            value = convert(value, col, connection)
        values.append(value)
    return values


def turn_grants_lock(*, room_id: UUID, recipient_agent_id: UUID) -> TurnGrants:
    """Every disclosure grant for ``recipient_agent_id`` in ``room_id`` that a turn may use or
    remember (open, or denied under a slip), locked, in one statement (each with its key,
    as ``select_related("key")`` reads it)."""
    read = _turn_grants_read(connection.vendor)
    statuses = [*OPEN_GRANT_STATUSES, GrantStatus.DENIED]
    assert len(statuses) == 3  # the statement's IN list
    params = [
        _field(Grant, "room_id").get_db_prep_value(room_id, connection),
        _field(Grant, "recipient_agent_id").get_db_prep_value(recipient_agent_id, connection),
        *(str(status) for status in statuses),
    ]
    with statement_cursor() as cursor:
        cursor.execute(read.sql, params)
        rows = cursor.fetchall()
    width = len(read.grant_fields)
    grant_names = [name for name, _, _ in read.grant_fields]
    key_names = [name for name, _, _ in read.key_fields]
    key_id_at = key_names.index("id")
    key_field = _field(Grant, "key")
    grants: list[Grant] = []
    for row in rows:
        grant = Grant.from_db(
            connection.alias, grant_names, _values(read.grant_fields, row[:width])
        )
        key = None
        if row[width + key_id_at] is not None:  # a grant not yet approved names no key
            key = DeviceKey.from_db(
                connection.alias, key_names, _values(read.key_fields, row[width:])
            )
        # As select_related("key") leaves it: grant.key is this row, read by no other query.
        key_field.set_cached_value(grant, key)  # type: ignore[attr-defined]
        grants.append(grant)
    return TurnGrants(grants)

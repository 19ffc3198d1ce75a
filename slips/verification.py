"""Verification on every use: may this agent, in this room, use this resource, now?

The Gatekeeper calls ``capability_verdict`` before anything is read or disclosed and
``capability_use`` to spend one use. Each call re-reads live state and re-verifies from the
stored signed bytes: the slip in force, its signature under its key, the key not revoked, the
binding, expiry, the capability record, uses left, the room's tier and the other owner's
rules for shared resources. Nothing is cached across calls. Any error is a denial.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

from django.db import connection, transaction
from django.db.models import F

from ledger.services import Alongside
from slips.canonical import SLIP_TAG, payload_parse_canonical
from slips.capabilities import (
    TIER_ORDER,
    Capability,
    capability_meet_room_rules,
    capability_under_tier,
    recipient_covers,
    tier_narrowest,
)
from slips.config import slips_setting
from slips.models import DeviceKey, RoomTier, Slip, SlipCapability
from slips.payload import SlipPayload, slip_payload_read
from slips.services import live_slip_capabilities
from slips.signatures import signature_valid
from synapsia.db.statements import (
    blob_column,
    blob_value,
    rows_fetched,
    rows_select,
    statement_cursor,
)

logger = logging.getLogger(__name__)


class CapabilityVerdict(NamedTuple):
    """A decision about one use. ``rule`` names why (``cleared`` when allowed).

    When allowed, ``capability`` is the *effective* capability (slip ∩ tier ∩ the other
    owner's room rules), whose ``scope`` says how much of the resource may be shown, and
    ``approval_required`` says the owner must approve this use first (approval ``per_use``).
    """

    allowed: bool
    rule: str
    capability: Capability | None = None
    uses_left: int | None = None
    slip_id: UUID | None = None
    key_id: UUID | None = None
    tier: str | None = None
    approval_required: bool = True


def _deny(rule: str, **context: Any) -> CapabilityVerdict:
    return CapabilityVerdict(allowed=False, rule=rule, **context)


def room_tier(*, room_id: UUID) -> str:
    """The tier the room runs under: the narrowest any owner with a slip or a choice holds."""
    chosen = dict(RoomTier.objects.filter(room_id=room_id).values_list("owner_id", "tier"))
    owners = set(
        Slip.objects.filter(room_id=room_id, superseded_at__isnull=True).values_list(
            "owner_id", flat=True
        )
    )
    tiers = list(chosen.values()) + [tier_narrowest([]).value for o in owners if o not in chosen]
    return tier_narrowest(tiers).value


class SlipRow(NamedTuple):
    """A stored slip as a check needs it, with its key's columns: what one row of the turn's
    read carries (``room_slips_read``), or a ``Slip`` model's (``SlipRow.of``)."""

    id: UUID
    owner_id: int
    room_id: UUID
    agent_id: UUID
    key_id: UUID
    payload: bytes
    signature: bytes
    nonce: str
    issued_at: int
    expires_at: int
    key_owner_id: int
    key_revoked: bool
    public_key: bytes

    @classmethod
    def of(cls, slip: Slip) -> SlipRow:
        key = slip.key
        return cls(
            id=slip.id,
            owner_id=slip.owner_id,
            room_id=slip.room_id,
            agent_id=slip.agent_id,
            key_id=key.id,
            payload=bytes(slip.payload),
            signature=bytes(slip.signature),
            nonce=slip.nonce,
            issued_at=slip.issued_at,
            expires_at=slip.expires_at,
            key_owner_id=key.owner_id,
            key_revoked=key.revoked_at is not None,
            public_key=bytes(key.public_key),
        )


class CapabilityRow(NamedTuple):
    """One capability record's use counter as the turn's read returned it (a tuple: a turn
    reads one per record; its slip is the ``_CheckedSlip`` that holds it)."""

    id: int
    position: int
    resource: str
    operation: str
    uses_left: int


# What ``_judge`` reads of a record: a model row (per-call path) or the turn's read.
UseRecord = SlipCapability | CapabilityRow


@dataclass(frozen=True)
class _CheckedSlip:
    """A live slip checked once (key, signature, lookup columns against the signed bytes):
    ``signed`` when it holds up, else ``failure`` names why every use under it is denied."""

    slip: SlipRow
    signed: SlipPayload | None
    failure: str | None
    # The first of the signed capabilities for each (resource, operation) and its position,
    # as ``_judge`` looks one up: made once per check (a turn's check serves its every use).
    first: dict[tuple[str, str], tuple[int, Capability]] = field(default_factory=dict)
    # The slip's capability records by position, as the turn's read returned them (the
    # per-call path reads each record when it is asked: ``_evaluate``).
    records: dict[int, CapabilityRow] = field(default_factory=dict)


def _first_capabilities(signed: SlipPayload) -> dict[tuple[str, str], tuple[int, Capability]]:
    first: dict[tuple[str, str], tuple[int, Capability]] = {}
    for position, capability in enumerate(signed.capabilities):
        first.setdefault((capability.resource, capability.operation), (position, capability))
    return first


# Two live slips per room: 2,048 covers a process's thousand busiest rooms; a payload is at
# most 16 KiB (``MAX_PAYLOAD_BYTES``), about 1 KiB as owners sign them, so ~2 MB and 32 MB at
# worst. Past that the least recent is parsed again, as before.
@functools.lru_cache(maxsize=2048)
def _signed_payload(raw: bytes) -> SlipPayload:
    """What the signed bytes ``raw`` say: parsed strictly, required to be canonical, read as a
    slip payload. A pure function of the bytes (the same bytes always say the same thing), so
    it is worked out once per process for each slip, as a tool's schema is: RFC 8785 and the
    strict parse were two thirds of a slip's check per turn. It decides nothing: every turn
    still verifies the signature over these bytes, the key's owner and revocation, and the
    lookup columns, expiry, records and uses, live. A payload that does not parse raises (an
    error is not memoised) and every use under it is denied."""
    return slip_payload_read(payload_parse_canonical(raw))


def signed_slip_payload(raw: bytes) -> SlipPayload:
    """What the stored signed bytes of a slip say (``_signed_payload``: strict, canonical,
    worked out once per process). For readers of a slip's records that verified, or rely on
    a verification made when it was submitted, e.g. the tools an agent is listed on connect;
    it verifies nothing itself."""
    return _signed_payload(raw)


def _slip_check(slip: SlipRow) -> _CheckedSlip:
    if slip.key_owner_id != slip.owner_id:
        return _CheckedSlip(slip, None, "foreign_key")
    if slip.key_revoked:
        return _CheckedSlip(slip, None, "key_revoked")
    raw = slip.payload
    if not signature_valid(
        public_key=slip.public_key, message=SLIP_TAG + raw, signature=slip.signature
    ):
        return _CheckedSlip(slip, None, "bad_signature")
    signed = _signed_payload(raw)
    # The lookup columns must say what the signed bytes say.
    if (
        signed.room_id != slip.room_id
        or signed.agent_id != slip.agent_id
        or signed.owner_id != str(slip.owner_id)
        or signed.key_id != slip.key_id
        or signed.nonce != slip.nonce
        or (signed.issued_at, signed.expires_at) != (slip.issued_at, slip.expires_at)
    ):
        return _CheckedSlip(slip, None, "binding_mismatch")
    return _CheckedSlip(slip, signed, None, _first_capabilities(signed))


def _slip_standing(
    checked: _CheckedSlip,
    *,
    room_id: UUID,
    owner_id: Any,
    agent_id: UUID,
    now_s: int,
    clock_skew: int,
) -> CapabilityVerdict | None:
    """The first rules of every use: the slip's check, the request against the signed bytes,
    the slip's expiry and start at ``now_s``. The denial they give, or None when they pass;
    they depend on the slip and these arguments only, not on the use asked."""
    ids = {"slip_id": checked.slip.id, "key_id": checked.slip.key_id}
    if checked.failure is not None or checked.signed is None:
        return _deny(checked.failure or "binding_mismatch", **ids)
    signed = checked.signed
    # The request must match the signed bytes too.
    if signed.room_id != room_id or signed.agent_id != agent_id or signed.owner_id != str(owner_id):
        return _deny("binding_mismatch", **ids)
    if now_s >= signed.expires_at:
        return _deny("slip_expired", **ids)
    if now_s < signed.issued_at - clock_skew:
        return _deny("slip_not_yet_valid", **ids)
    return None


def _judge(
    checked: _CheckedSlip,
    *,
    room_id: UUID,
    owner_id: Any,
    agent_id: UUID,
    resource: str,
    operation: str,
    recipient: str,
    now: datetime,
    record_at: Callable[[int], UseRecord | None],
    tier_of: Callable[[], str],
    live_capabilities: Callable[[], dict[str, tuple[Capability, ...]]],
    clock_skew: int | None = None,
) -> tuple[CapabilityVerdict, UseRecord | None]:
    """One use decided against one checked slip: the rules, in order, with no reads of their
    own (the callers pass how to find the capability record, the tier and the other owners'
    rules: one query each per call, or one set-based read per turn). ``clock_skew``: the
    setting as the caller read it for this decision (read here when not given)."""
    now_s = int(now.timestamp())
    if clock_skew is None:
        clock_skew = int(slips_setting("CLOCK_SKEW_SECONDS"))
    denied = _slip_standing(
        checked,
        room_id=room_id,
        owner_id=owner_id,
        agent_id=agent_id,
        now_s=now_s,
        clock_skew=clock_skew,
    )
    if denied is not None:
        return denied, None
    return _judge_use(
        checked,
        owner_id=owner_id,
        resource=resource,
        operation=operation,
        recipient=recipient,
        now_s=now_s,
        record_at=record_at,
        tier=tier_of,
        live_capabilities=live_capabilities,
    )


def _judge_use(
    checked: _CheckedSlip,
    *,
    owner_id: Any,
    resource: str,
    operation: str,
    recipient: str,
    now_s: int,
    record_at: Callable[[int], UseRecord | None],
    tier: str | Callable[[], str],
    live_capabilities: Callable[[], dict[str, tuple[Capability, ...]]],
) -> tuple[CapabilityVerdict, UseRecord | None]:
    """The rules of one use, in order, under a slip whose own rules (``_slip_standing``)
    passed at ``now_s``: the signed capability, its recipient and expiry, the stored record
    and its uses, the tier (``tier``, or how to read it), the other owners' room rules."""
    ids = {"slip_id": checked.slip.id, "key_id": checked.slip.key_id}
    match = checked.first.get((resource, operation))
    if match is None:
        return _deny("not_in_slip", **ids), None
    position, granted = match
    if not recipient_covers(granted.recipient, recipient):
        return _deny("recipient_not_cleared", **ids), None
    if now_s >= granted.expires_at:
        return _deny("capability_expired", **ids), None
    row = record_at(position)
    if row is None or row.resource != resource or row.operation != operation:
        return _deny("binding_mismatch", **ids), None
    if row.uses_left <= 0:
        return _deny("uses_exhausted", uses_left=0, **ids), row
    if not isinstance(tier, str):
        tier = tier()
    effective = capability_under_tier(granted, tier)
    if effective is None:
        return _deny("tier_forbids", tier=tier, **ids), row
    if not effective.is_vault:
        # A shared resource: where the other owner's live slip has a narrower rule, it wins.
        for other_owner, capabilities in live_capabilities().items():
            if other_owner == str(owner_id):
                continue
            for theirs in capabilities:
                if (theirs.resource, theirs.operation) == (resource, operation):
                    effective = capability_meet_room_rules(effective, theirs)
    return (
        CapabilityVerdict(
            allowed=True,
            rule="cleared",
            capability=effective,
            uses_left=row.uses_left,
            tier=tier,
            approval_required=effective.approval != "none",
            **ids,
        ),
        row,
    )


def _evaluate(
    *,
    room_id: UUID,
    owner_id: Any,
    agent_id: UUID,
    resource: str,
    operation: str,
    recipient: str,
    now: datetime,
    lock: bool,
) -> tuple[CapabilityVerdict, UseRecord | None]:
    slip = (
        Slip.objects.select_related("key")
        .filter(owner_id=owner_id, room_id=room_id, agent_id=agent_id, superseded_at__isnull=True)
        .first()
    )
    if slip is None:
        return _deny("no_slip"), None

    def record_at(position: int) -> SlipCapability | None:
        rows = SlipCapability.objects.filter(slip=slip, position=position)
        return (rows.select_for_update() if lock else rows).first()

    return _judge(
        _slip_check(SlipRow.of(slip)),
        room_id=room_id,
        owner_id=owner_id,
        agent_id=agent_id,
        resource=resource,
        operation=operation,
        recipient=recipient,
        now=now,
        record_at=record_at,
        tier_of=lambda: room_tier(room_id=room_id),
        live_capabilities=lambda: live_slip_capabilities(room_id=room_id),
    )


def capability_verdict(
    *,
    room_id: UUID,
    owner_id: Any,
    agent_id: UUID,
    resource: str,
    operation: str,
    recipient: str,
    now: datetime,
) -> CapabilityVerdict:
    """Whether ``owner_id``'s slip lets ``agent_id`` use ``resource`` for ``operation`` towards
    ``recipient`` (``own_agent`` or ``peer_agent``) in ``room_id`` at ``now``. Reads only; does
    not spend a use. Any error is a denial (``verification_error``)."""
    try:
        verdict, _ = _evaluate(
            room_id=room_id,
            owner_id=owner_id,
            agent_id=agent_id,
            resource=resource,
            operation=operation,
            recipient=recipient,
            now=now,
            lock=False,
        )
    except Exception:
        logger.exception("capability verification failed: denying")
        return _deny("verification_error")
    return verdict


def capability_use(
    *,
    room_id: UUID,
    owner_id: Any,
    agent_id: UUID,
    resource: str,
    operation: str,
    recipient: str,
    now: datetime,
) -> CapabilityVerdict:
    """Verify as ``capability_verdict`` does and, if allowed, spend one use atomically.

    Race-safe: the counter row is locked and decremented with a conditional UPDATE
    (``uses_left > 0``), so concurrent callers never spend more uses than were granted.
    The returned ``uses_left`` is what remains after this use.
    """
    try:
        with transaction.atomic():
            verdict, row = _evaluate(
                room_id=room_id,
                owner_id=owner_id,
                agent_id=agent_id,
                resource=resource,
                operation=operation,
                recipient=recipient,
                now=now,
                lock=True,
            )
            if not verdict.allowed or row is None:
                return verdict
            spent = SlipCapability.objects.filter(id=row.id, uses_left__gt=0).update(
                uses_left=F("uses_left") - 1
            )
            if spent != 1:
                return _deny("uses_exhausted", uses_left=0, slip_id=verdict.slip_id)
            return CapabilityVerdict(
                allowed=True,
                rule="cleared",
                capability=verdict.capability,
                uses_left=row.uses_left - 1,
                slip_id=verdict.slip_id,
                key_id=verdict.key_id,
                tier=verdict.tier,
                approval_required=verdict.approval_required,
            )
    except Exception:
        logger.exception("capability use failed: denying")
        return _deny("verification_error")


# --- one turn's uses, decided together (context assembly) --------------------------------------

# The tiers as ranks, narrowest first, for reading the room's tier in SQL (``tier_rank_sql``).
_TIER_RANKS = {tier.value: rank for rank, tier in enumerate(TIER_ORDER)}


def tier_rank_sql(column: str) -> str:
    """A SQL expression ranking ``column``'s tier, narrowest 0 (``room_tier_from_ranks``);
    only our own constant tier names are interpolated."""
    cases = " ".join(f"WHEN '{tier}' THEN {rank}" for tier, rank in _TIER_RANKS.items())
    # A value that is no tier counts as the narrowest: ambiguity never widens what is shared.
    return f"CASE {column} {cases} ELSE 0 END"


def room_tier_from_ranks(*, narrowest_chosen: int | None, slip_owner_unchosen: bool) -> str:
    """``room_tier`` from two facts read in SQL: the narrowest rank any owner chose, and
    whether an owner with a live slip chose none (who then counts as the default tier)."""
    tiers = [TIER_ORDER[narrowest_chosen].value] if narrowest_chosen is not None else []
    if slip_owner_unchosen:
        tiers.append(tier_narrowest([]).value)
    return tier_narrowest(tiers).value


@dataclass
class RoomSlips:
    """A room's live slips for one turn, read in one statement (each slip with its key and
    its capability records, locked) and each checked once: key, signature, signed bytes.

    Built per turn and dropped with it: nothing here outlives the transaction it was read in.
    ``capability_verdict`` re-reads everything per call; this decides many uses of one turn
    from one read, with the same rules (``_judge``), spending nothing.
    """

    room_id: UUID
    tier: str
    # Each live slip, checked, with its records, by the (owner, agent) it binds.
    slips: dict[tuple[str, UUID], _CheckedSlip] = field(default_factory=dict)
    _live: dict[str, tuple[Capability, ...]] | None = None
    # The clock-skew setting, read at this turn's first verdict (inside its guard, as
    # ``_judge`` reads it) and used for the rest of the turn's.
    _clock_skew: int | None = None
    # Per slip, for this turn's other uses under it: the second it was last judged at and its
    # own rules' answer then (``_slip_standing``: the same slip, request and second always
    # give the same one; a turn asks up to 18 uses of its two slips). A use asked at another
    # second is judged afresh.
    _seats: dict[tuple[str, UUID], tuple[int, CapabilityVerdict | None]] = field(
        default_factory=dict
    )

    def verdicts(
        self,
        *,
        owner_id: Any,
        agent_id: UUID,
        resource: str,
        operations: tuple[str, ...],
        recipient: str,
        now: datetime,
    ) -> list[tuple[CapabilityVerdict, UseRecord | None]]:
        """As ``capability_verdict`` for each of ``operations`` (one item's records: a
        disclosure to the owner's own agent asks two), from this turn's read, the slip found
        and its own rules judged once for them. Any error is a denial of each."""
        place = (str(owner_id), agent_id)
        checked = self.slips.get(place)
        if checked is None:
            return [(_deny("no_slip"), None) for _ in operations]
        try:
            if self._clock_skew is None:
                self._clock_skew = int(slips_setting("CLOCK_SKEW_SECONDS"))
            now_s = int(now.timestamp())
            seat = self._seats.get(place)
            if seat is None or seat[0] != now_s:
                denied = _slip_standing(
                    checked,
                    room_id=self.room_id,
                    owner_id=owner_id,
                    agent_id=agent_id,
                    now_s=now_s,
                    clock_skew=self._clock_skew,
                )
                seat = self._seats[place] = now_s, denied
            denied = seat[1]
            if denied is not None:
                return [(denied, None) for _ in operations]
            return [
                _judge_use(
                    checked,
                    owner_id=owner_id,
                    resource=resource,
                    operation=operation,
                    recipient=recipient,
                    now_s=now_s,
                    record_at=checked.records.get,
                    tier=self.tier,
                    live_capabilities=self._live_capabilities,
                )
                for operation in operations
            ]
        except Exception:
            logger.exception("capability verification failed: denying")
            return [(_deny("verification_error"), None) for _ in operations]

    def _live_capabilities(self) -> dict[str, tuple[Capability, ...]]:
        # As live_slip_capabilities: every live slip's records as stored (verified when
        # submitted); only a shared resource asks, which no vault item is.
        if self._live is None:
            live: dict[str, tuple[Capability, ...]] = {}
            for (owner, _agent), checked in sorted(self.slips.items(), key=lambda kv: kv[0][0]):
                parsed = _signed_payload(checked.slip.payload)
                live[owner] = live.get(owner, ()) + parsed.capabilities
            self._live = live
        return self._live


@functools.cache
def _room_slips_sql(vendor: str, lock: bool) -> str:
    """The room's live slips, their keys and capability records in one statement, written
    once per process (no ORM compilation per turn). Only our own table names are
    interpolated; the room is a parameter, named: Django's SQLite cursor rewrites each
    ``%s`` of a statement with a look-behind regex over its whole text on every execute."""
    q = connection.ops.quote_name
    record, slip, key = (q(m._meta.db_table) for m in (SlipCapability, Slip, DeviceKey))
    # A slip's signed payload (about a kilobyte) on its first record's row only (the lowest
    # position, which the statement's order gives first): sent once per slip, not once per
    # record. On PostgreSQL a result of a dozen kilobytes more came in several reads, each a
    # wait for the server and a hand-off of the GIL.
    first = (
        f"NOT EXISTS (SELECT 1 FROM {record} f WHERE f.slip_id = c.slip_id "  # noqa: S608
        "AND f.position < c.position)"
    )
    columns = (
        "c.id", "c.position", "c.resource", "c.operation", "c.uses_left",
        "s.id", "s.owner_id", "s.room_id", "s.agent_id", "s.key_id",
        f"CASE WHEN {first} THEN {blob_column(vendor, 's.payload')} END",
        blob_column(vendor, "s.signature"), "s.nonce", "s.issued_at", "s.expires_at",
        "k.owner_id", "CASE WHEN k.revoked_at IS NULL THEN 0 ELSE 1 END",
        blob_column(vendor, "k.public_key"),
    )  # fmt: skip
    sql = rows_select(
        vendor,
        columns,
        f"FROM {record} c JOIN {slip} s ON s.id = c.slip_id JOIN {key} k ON k.id = s.key_id "
        "WHERE s.room_id = %(room)s AND s.superseded_at IS NULL ORDER BY c.position, c.id",
    )
    # Only the use counters are locked (the slips and keys are read as they stand: a revoked
    # key or a superseding slip committed before this statement is seen by it).
    if lock and connection.features.has_select_for_update_of:
        sql += " FOR UPDATE OF c"
    elif lock and connection.features.has_select_for_update:
        sql += " FOR UPDATE"
    return sql


def _as_uuid(value: Any) -> UUID:
    # PostgreSQL's driver returns UUIDs; SQLite stores them as 32 hex digits.
    return value if isinstance(value, UUID) else UUID(str(value))


def room_slips_read(*, room_id: UUID, tier: str, lock: bool) -> RoomSlips:
    """The room's live slips and their capability records, in one statement (records locked
    when ``lock``, so the uses they hold cannot change before ``capability_uses_spending``).
    A slip whose check raises is denied as ``verification_error`` for every use under it.

    Only slips with at least one record are read: a slip without any clears nothing, and
    the room's tier comes from the caller (``room_tier_from_ranks``), which counts it."""
    db = transaction.get_connection()  # not the proxy, which looks it up on every read
    with statement_cursor() as cursor:
        cursor.execute(
            _room_slips_sql(db.vendor, lock),
            {"room": Slip._meta.get_field("room_id").get_db_prep_value(room_id, db)},
        )
        rows = rows_fetched(cursor, db.vendor)
    snapshot = RoomSlips(room_id=room_id, tier=tier)
    # By the slip id as the driver returned it: a row per capability record, and the slip's
    # columns (its ids as UUIDs), its check and where its records go are made once per
    # slip, not once per record.
    slips: dict[Any, dict[int, CapabilityRow]] = {}
    for row in rows:
        records = slips.get(row[5])
        if records is None:
            stored = SlipRow(
                id=_as_uuid(row[5]),
                owner_id=int(row[6]),
                room_id=room_id,  # the column the statement matched: this room's, exactly
                agent_id=_as_uuid(row[8]),
                key_id=_as_uuid(row[9]),
                payload=blob_value(row[10] or b""),
                signature=blob_value(row[11]),
                nonce=str(row[12]),
                issued_at=int(row[13]),
                expires_at=int(row[14]),
                key_owner_id=int(row[15]),
                key_revoked=bool(row[16]),
                public_key=blob_value(row[17]),
            )
            place = (str(stored.owner_id), stored.agent_id)
            if place in snapshot.slips:
                # A second live slip for one seat (which ``slips_one_live_slip`` forbids):
                # the first decides, as one lookup by seat finds it; these records clear none.
                records = {}
            else:
                try:
                    if row[10] is None:
                        # The statement sends the payload on the slip's first row, which
                        # comes first: without it there is nothing to verify.
                        raise ValueError("slip read without its signed payload")
                    checked = _slip_check(stored)  # verified once per turn
                except Exception:
                    logger.exception("slip check failed: denying every use under it")
                    checked = _CheckedSlip(stored, None, "verification_error")
                snapshot.slips[place] = checked
                records = checked.records
            slips[row[5]] = records
        position = int(row[1])
        records[position] = CapabilityRow(
            int(row[0]), position, str(row[2]), str(row[3]), int(row[4])
        )
    return snapshot


@functools.cache
def _uses_spend_sql(vendor: str, count: int) -> str:
    """One use off each of ``count`` records, only where one is left (written once per count:
    no ORM compilation per turn). On PostgreSQL the records are one array value, ``records``:
    the same text and one value whatever their number (psycopg keeps its parse of a statement
    only up to 50 values, and this one rides the ledger's insert,
    ``ledger_append_many(alongside=...)``, which counts the row it returns for each), in the
    binary format, as the insert's arrays are. On SQLite, a value each, named ``r0``... as
    ``_room_slips_sql``'s are, and no rows returned: it runs on its own and the rows it
    changed are its count (each row returned would be a step of its own, and each step lets
    go of the GIL, a hand-off to a busy event loop)."""
    table = connection.ops.quote_name(SlipCapability._meta.db_table)
    if vendor == "postgresql":
        where, returning = "id = ANY(%(records)b::bigint[])", " RETURNING 1"
    else:
        where, returning = f"id IN ({', '.join(f'%(r{i})s' for i in range(count))})", ""
    return (
        f"UPDATE {table} SET uses_left = uses_left - 1 "  # noqa: S608
        f"WHERE {where} AND uses_left > 0{returning}"
    )


class UsesNotSpent(Exception):
    """A use that was decided could not be spent: the turn must disclose nothing."""


def capability_uses_spending(*, record_ids: list[int]) -> Alongside | None:
    """Spending one use of each record, as the statement that records the turn's
    disclosures runs it (``ledger_append_many(alongside=...)``: one statement for both on
    PostgreSQL); None when there is none to spend. Call in the transaction that read them
    locked (``room_slips_read(lock=True)``) and decided each. When a record had none left
    after all, the append raises ``AlongsideShort`` and the caller's transaction must roll
    back (``UsesNotSpent``); a record named twice is refused here."""
    if not record_ids:
        return None
    if len(set(record_ids)) != len(record_ids):
        raise UsesNotSpent("a record would be spent twice in one turn")
    vendor = transaction.get_connection().vendor
    return Alongside(
        sql=_uses_spend_sql(vendor, len(record_ids)),
        params=(
            {"records": record_ids}
            if vendor == "postgresql"
            else {f"r{i}": record_id for i, record_id in enumerate(record_ids)}
        ),
        rows=len(record_ids),
    )

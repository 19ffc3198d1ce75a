"""The hash chain itself: encoding, hashing and checking, as pure functions (no Django).

The one place that defines what a ledger hash is. ``ledger.services`` uses it to append,
``ledger.verification`` to recompute; ``docs/ledger.md`` specifies the same encoding for
independent implementations (``ledger/verify_export.py`` and the browser's ``ledger.js``).

    hash = lowercase hex of SHA-256( RFC 8785 canonical JSON of
               {"room_id", "seq", "kind", "occurred_at", "data", "prev_hash"} )

``occurred_at`` is a fixed-format UTC string (``2026-01-02T03:04:05.123456Z``), never a float;
``prev_hash`` is the previous event's hash: ``GENESIS_HASH`` for event 1, and after a retention
purge the checkpoint's hash for the first event that remains.

Those bytes are computed **once**, at append, and stored (``LedgerEvent.canonical``); the
``data`` column holds the RFC 8785 text of ``data`` too (``CanonicalJSONEncoder``). RFC 8785
sorts keys, so the envelope is ``{"data":`` + canonical(data) + a suffix of five scalars in a
fixed order (``envelope_bytes``): verification (``stored_chain_check``) hashes the stored bytes
and checks them against the row's own columns by comparing bytes, never re-canonicalising.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import rfc8785

GENESIS_HASH = "0" * 64
# Domain separation: these bytes can never be mistaken for another signed Synapsia payload.
HEAD_SIGNATURE_PREFIX = b"synapsia-ledger-head-v1\n"
# An owner's countersignature of a signed head (``witness_signed_bytes``): its own prefix, so
# no slip, key proof or server head signature can pass for one, nor one for them.
WITNESS_SIGNATURE_PREFIX = b"synapsia-ledger-witness-v1\n"
# An event's canonical form is small metadata; anything bigger is a bug or an attempt.
MAX_CANONICAL_BYTES = 4096


def occurred_at_text(moment: datetime) -> str:
    """The chain's timestamp form: UTC, microseconds, ``Z`` (so all implementations agree)."""
    if moment.tzinfo is None:
        raise ValueError("ledger timestamps must be timezone-aware")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# Strings RFC 8785 writes as they are, between quotes: printable ASCII without `"` and `\\`.
_PLAIN_STRING = re.compile(r"[ !#-\[\]-~]*")
ENVELOPE_PREFIX = b'{"data":'
# The chain's timestamp form is always this long (``occurred_at_text``).
OCCURRED_AT_LENGTH = 27
_SAFE_INTEGER = 2**53 - 1  # RFC 8785 numbers are IEEE doubles


def json_string(text: str) -> str:
    """RFC 8785 form of a string: as it is for plain ASCII, else through ``rfc8785``."""
    if _PLAIN_STRING.fullmatch(text):
        return f'"{text}"'
    return rfc8785.dumps(text).decode()


def envelope_suffix(*, kind: str, occurred_at: str, prev_hash: str, room_id: str, seq: int) -> str:
    """The envelope after its ``data`` member: RFC 8785 orders the keys data < kind <
    occurred_at < prev_hash < room_id < seq, and each of these five is a scalar."""
    if type(seq) is not int or not 0 <= seq <= _SAFE_INTEGER:
        raise rfc8785.IntegerDomainError(seq)
    return (
        f',"kind":{json_string(kind)},"occurred_at":{json_string(occurred_at)},'
        f'"prev_hash":{json_string(prev_hash)},"room_id":{json_string(room_id)},"seq":{seq}}}'
    )


def envelope_bytes(
    *, data_canonical: bytes, room_id: str, seq: int, kind: str, occurred_at: str, prev_hash: str
) -> bytes:
    """The RFC 8785 envelope, built from the RFC 8785 bytes of ``data`` (identical to
    ``rfc8785.dumps`` of the whole envelope; ``tests/ledger/test_stored_bytes.py`` checks)."""
    suffix = envelope_suffix(
        kind=kind, occurred_at=occurred_at, prev_hash=prev_hash, room_id=room_id, seq=seq
    )
    return ENVELOPE_PREFIX + data_canonical + suffix.encode()


def envelopes_for(*, room_id: str, occurred_at: str) -> Callable[..., bytes]:
    """``envelope_bytes`` for many events of one room at one moment (a batch append): the
    room's and the moment's strings are written once, each kind once, and every envelope is
    byte for byte what ``envelope_bytes`` makes of the same values
    (``tests/ledger/test_stored_bytes.py`` compares them)."""
    room, moment = json_string(room_id), json_string(occurred_at)
    kinds: dict[str, str] = {}

    def envelope(*, data_canonical: bytes, seq: int, kind: str, prev_hash: str) -> bytes:
        if type(seq) is not int or not 0 <= seq <= _SAFE_INTEGER:
            raise rfc8785.IntegerDomainError(seq)
        kind_json = kinds.get(kind)
        if kind_json is None:
            kind_json = kinds[kind] = json_string(kind)
        suffix = (
            f',"kind":{kind_json},"occurred_at":{moment},"prev_hash":{json_string(prev_hash)},'
            f'"room_id":{room},"seq":{seq}}}'
        )
        return ENVELOPE_PREFIX + data_canonical + suffix.encode()

    return envelope


class CanonicalData(dict[str, Any]):
    """``data`` together with its RFC 8785 text, computed once at append: the ``data`` column
    stores exactly that text (see ``CanonicalJSONEncoder``) instead of canonicalising again."""

    __slots__ = ("text",)

    def __init__(self, data: Mapping[str, Any], text: str) -> None:
        super().__init__(data)
        self.text = text


class CanonicalJSONEncoder(json.JSONEncoder):
    """The ``data`` column's encoder: RFC 8785 text, so on SQLite the column's text is
    byte-for-byte the ``data`` member of the stored envelope (PostgreSQL's jsonb keeps the
    value, not the text; there verification compares values in SQL)."""

    def encode(self, o: Any) -> str:
        if isinstance(o, CanonicalData):
            return o.text
        return rfc8785.dumps(o).decode()


def event_canonical_bytes(
    *,
    room_id: UUID | str,
    seq: int,
    kind: str,
    occurred_at: str,
    data: Mapping[str, Any],
    prev_hash: str,
) -> bytes:
    """RFC 8785 bytes of the hashed envelope (raises ``rfc8785.CanonicalizationError``)."""
    return envelope_bytes(
        data_canonical=rfc8785.dumps(dict(data)),
        room_id=str(room_id),
        seq=seq,
        kind=kind,
        occurred_at=occurred_at,
        prev_hash=prev_hash,
    )


def event_hash(
    *,
    room_id: UUID | str,
    seq: int,
    kind: str,
    occurred_at: str,
    data: Mapping[str, Any],
    prev_hash: str,
) -> str:
    """Lowercase hex SHA-256 of the event's canonical bytes."""
    return (
        hashlib.sha256(
            event_canonical_bytes(
                room_id=room_id,
                seq=seq,
                kind=kind,
                occurred_at=occurred_at,
                data=data,
                prev_hash=prev_hash,
            )
        )
        .digest()
        .hex()
    )


def head_signed_bytes(*, room_id: UUID | str, seq: int, head_hash: str, signed_at: str) -> bytes:
    """What the server signs for a room's head: the domain prefix + RFC 8785 JSON.

    Built directly (RFC 8785 orders the keys hash < room_id < seq < signed_at; each string
    through ``json_string``): verification rebuilds it for every signed head, one per N
    events, and ``rfc8785.dumps`` cost more than the hashing of those N rows
    (``tests/ledger/test_signing_retention.py`` compares the two on awkward values)."""
    if type(seq) is not int or not 0 <= seq <= _SAFE_INTEGER:
        raise rfc8785.IntegerDomainError(seq)
    return (
        HEAD_SIGNATURE_PREFIX
        + (
            f'{{"hash":{json_string(head_hash)},"room_id":{json_string(str(room_id))},'
            f'"seq":{seq},"signed_at":{json_string(signed_at)}}}'
        ).encode()
    )


def witness_signed_bytes(
    *, room_id: UUID | str, seq: int, head_hash: str, signed_at: str, owner_id: str, key_id: str
) -> bytes:
    """What an owner's device key signs to witness a server-signed head: the witness prefix
    + RFC 8785 JSON of the head (room, seq, hash, the server's ``signed_at``) and who signs
    (owner id, device key id). The browser builds the same bytes (``ledger.js``)."""
    return WITNESS_SIGNATURE_PREFIX + rfc8785.dumps(
        {
            "room_id": str(room_id),
            "seq": seq,
            "hash": head_hash,
            "signed_at": signed_at,
            "owner_id": owner_id,
            "key_id": key_id,
        }
    )


@dataclass(frozen=True)
class ChainEvent:
    """An event as stored: what verification reads back."""

    room_id: str
    seq: int
    kind: str
    occurred_at: str
    data: Mapping[str, Any]
    prev_hash: str
    hash: str


@dataclass(frozen=True)
class HeadClaim:
    """A (seq, hash) the chain must contain: the head row, or a signed head."""

    seq: int
    hash: str
    source: str  # "head row", "signed head #3", ...
    signed_at: str = ""  # a signed head's time (chain form); empty for the head row


@dataclass(frozen=True)
class ChainVerdict:
    room_id: str
    ok: bool
    events_checked: int
    last_seq: int
    last_hash: str
    first_bad_seq: int | None = None
    problem: str = ""


def chain_check(
    *,
    room_id: str,
    events: Iterable[ChainEvent],
    checkpoint_seq: int = 0,
    checkpoint_hash: str = GENESIS_HASH,
    claims: Iterable[HeadClaim] = (),
    tip: HeadClaim | None = None,
) -> ChainVerdict:
    """Recompute a room's chain (events in ``seq`` order) and find the first bad number.

    Streams: holds one event at a time, plus the claims. Checks, in chain order: every event
    belongs to the room, numbers run without gaps from ``checkpoint_seq + 1``, each
    ``prev_hash`` is the hash before it, each stored hash is the recomputed one, the latest
    ``retention_purge`` event names the checkpoint, and every claim (head row, signed heads)
    is an event of this chain with that hash. ``tip`` (the head row) must be the last event:
    rows added beyond it are as wrong as rows missing before it. Stops at the first problem.
    """
    expected_seq, expected_prev = checkpoint_seq + 1, checkpoint_hash
    checked = 0
    by_seq: dict[int, list[HeadClaim]] = {}
    for claim in claims:
        by_seq.setdefault(claim.seq, []).append(claim)
    last_purge: tuple[int, Any, Any] | None = None

    def bad(seq: int, problem: str) -> ChainVerdict:
        return ChainVerdict(room_id, False, checked, expected_seq - 1, expected_prev, seq, problem)

    # A claim at the checkpoint itself can still be compared with the checkpoint hash.
    if tip is not None:
        by_seq.setdefault(tip.seq, []).append(tip)
    for claim in by_seq.get(checkpoint_seq, []):
        if claim.hash != checkpoint_hash:
            return bad(checkpoint_seq + 1, f"{claim.source} does not match the checkpoint")
    for event in events:
        if event.room_id != room_id:
            return bad(event.seq, f"event numbered {event.seq} belongs to another room")
        if event.seq != expected_seq:
            if event.seq > expected_seq:
                return bad(expected_seq, f"event {expected_seq} is missing")
            return bad(
                expected_seq, f"event {event.seq} appears again where {expected_seq} was expected"
            )
        if not isinstance(event.data, Mapping):
            return bad(event.seq, "event data is not an object")
        if event.prev_hash != expected_prev:
            return bad(event.seq, "prev_hash does not match the event before it")
        try:
            recomputed = event_hash(
                room_id=room_id,
                seq=event.seq,
                kind=event.kind,
                occurred_at=event.occurred_at,
                data=event.data,
                prev_hash=event.prev_hash,
            )
        except (rfc8785.CanonicalizationError, TypeError, ValueError):
            return bad(event.seq, "event cannot be canonicalised")
        if recomputed != event.hash:
            return bad(event.seq, "stored hash does not match the recomputed hash")
        if tip is not None and event.seq > tip.seq:
            return bad(event.seq, f"event {event.seq} lies beyond {tip.source} ({tip.seq})")
        for claim in by_seq.get(event.seq, []):
            if claim.hash != event.hash:
                return bad(event.seq, f"{claim.source} names a different hash at this number")
        if event.kind == "retention_purge":
            last_purge = (event.seq, event.data.get("through_seq"), event.data.get("through_hash"))
        expected_seq, expected_prev = event.seq + 1, event.hash
        checked += 1
    last_seq = expected_seq - 1
    beyond = sorted(seq for seq in by_seq if seq > last_seq)
    if beyond:
        claim = by_seq[beyond[0]][0]
        return bad(last_seq + 1, f"{claim.source} is at {claim.seq}: the chain is truncated")
    if checkpoint_seq > 0 and (
        last_purge is None or (last_purge[1], last_purge[2]) != (checkpoint_seq, checkpoint_hash)
    ):
        return bad(
            checkpoint_seq + 1,
            "the checkpoint is not the one named by the chain's last retention_purge event",
        )
    return ChainVerdict(room_id, True, checked, last_seq, expected_prev)


# A stored row as verification streams it: (seq, kind, occurred_at as stored in UTC,
# "YYYY-MM-DD HH:MM:SS.ffffff", data_length, prev_hash, hash, stored bytes); each statement
# reads one room, so no row carries its room. ``data_length`` is what the database found about
# the data column: the length of the stored bytes' data member, which the column matches
# (SQLite: byte for byte, the column being RFC 8785 text; PostgreSQL, where jsonb keeps
# values, not text: as a jsonb value), or -1 when it does not.
StoredRow = tuple[int, str, str, int, str, str, bytes]
_HEX64 = re.compile(r"[0-9a-f]{64}")


def stored_chain_check(
    *,
    room_id: str,
    rows: Iterable[StoredRow],
    checkpoint_seq: int = 0,
    checkpoint_hash: str = GENESIS_HASH,
    claims: Iterable[HeadClaim] = (),
    tip: HeadClaim | None = None,
    recheck: Callable[[int, bytes], str | None] | None = None,
    marks: list[ChainMark] | None = None,
    watch_seq: int | None = None,
    watched: list[str] | None = None,
) -> ChainVerdict:
    """Verify a room's chain from its **stored bytes**, at hashing speed.

    The same verdicts as ``chain_check`` (numbering, links, the checkpoint, every claim), but
    each event's hash is checked as SHA-256 of the bytes stored at append, and those bytes are
    checked against the row's own columns by comparing bytes: they must be ``{"data":`` + the
    data column (``data_length``) + the suffix built here from kind, occurred_at, prev_hash,
    room_id and seq. A row that does not match that way goes to ``recheck(seq, stored)``, the
    exact test (RFC 8785 of the columns as the application reads them), which returns the
    problem in words, or None when the row is in fact consistent. Rows beyond ``tip`` end the
    walk: they were appended after the head was read (the caller checks the head as it
    stands now). ``watch_seq``: the event whose time (chain form) is appended to ``watched``
    (the first event no signed head covers, for ``head_rules_problem``'s quiet-tail rule);
    it rides on the claims look-up, so other rows pay nothing for it.
    """
    expected_seq, expected_prev = checkpoint_seq + 1, checkpoint_hash
    by_seq: dict[int, list[HeadClaim]] = {}
    for claim in claims:
        by_seq.setdefault(claim.seq, []).append(claim)
    last_purge: tuple[Any, Any] | None = None
    tip_seq = tip.seq if tip is not None else _SAFE_INTEGER

    def bad(seq: int, problem: str) -> ChainVerdict:
        last = expected_seq - 1
        return ChainVerdict(
            room_id, False, last - checkpoint_seq, last, expected_prev, seq, problem
        )

    if tip is not None:
        by_seq.setdefault(tip.seq, []).append(tip)
    for claim in by_seq.get(checkpoint_seq, []):
        if claim.hash != checkpoint_hash:
            return bad(checkpoint_seq + 1, f"{claim.source} does not match the checkpoint")
    if watch_seq is not None and watched is not None:
        by_seq.setdefault(watch_seq, [])
    if not _HEX64.fullmatch(checkpoint_hash):
        return bad(checkpoint_seq + 1, "the checkpoint hash is not a SHA-256 hex digest")
    # prev_hash equals the previous (verified hex) hash and room_id is ours: both plain.
    room_part = f'","room_id":"{json_string(room_id)[1:-1]}","seq":'
    sha256 = hashlib.sha256
    prefix, plen = ENVELOPE_PREFIX, len(ENVELOPE_PREFIX)
    # Per kind: its part of the suffix, and whether its rows are read further (marks).
    kind_parts: dict[str, tuple[str, bool]] = {}
    # The hot loop: per row one SHA-256, one short f-string and a few comparisons.
    for seq, kind, occurred_at, data_length, prev_hash, digest, stored in rows:
        if seq > tip_seq:
            break
        if seq != expected_seq:
            if seq > expected_seq:
                return bad(expected_seq, f"event {expected_seq} is missing")
            return bad(expected_seq, f"event {seq} appears again where {expected_seq} was expected")
        if prev_hash != expected_prev:
            return bad(seq, "prev_hash does not match the event before it")
        if sha256(stored).hexdigest() != digest:
            return bad(seq, "the stored hash is not the SHA-256 of the event's stored bytes")
        known = kind_parts.get(kind)
        if known is None:
            known = kind_parts[kind] = (
                f',"kind":{json_string(kind)},"occurred_at":"',
                kind in REQUIRES_HEAD,
            )
        # occurred_at comes as stored, "YYYY-MM-DD HH:MM:SS.ffffff": the chain's form has a T
        # for the space (both read the same to Django; anything else there is not accepted).
        suffix = (
            f'{known[0]}{occurred_at[:10]}T{occurred_at[11:]}Z","prev_hash":"{prev_hash}'
            f"{room_part}{seq}}}"
        ).encode()
        # The data member at its place (the database compared it), the suffix at the end and
        # the exact total length: every piece is pinned, none can shift into another.
        if (
            data_length < 0
            or len(stored) != plen + data_length + len(suffix)
            or occurred_at[10:11] != " "
            or not stored.endswith(suffix)
            or not stored.startswith(prefix)
        ):
            problem = recheck(seq, stored) if recheck is not None else "columns differ"
            if problem is not None:
                return bad(seq, problem)
        if seq in by_seq:
            for claim in by_seq[seq]:
                if claim.hash != digest:
                    return bad(seq, f"{claim.source} names a different hash at this number")
            if seq == watch_seq and watched is not None:
                watched.append(f"{occurred_at[:10]}T{occurred_at[11:]}Z")
        if known[1]:
            marked = json.loads(stored)["data"]
            if kind == "retention_purge":
                last_purge = (marked.get("through_seq"), marked.get("through_hash"))
            if marks is not None:  # for head_rules_problem, after the chain checks out
                at = f"{occurred_at[:10]}T{occurred_at[11:]}Z"
                marks.append(ChainMark(seq, kind, at, marked))
        expected_seq, expected_prev = seq + 1, digest
    last_seq = expected_seq - 1
    beyond = sorted(seq for seq, found in by_seq.items() if seq > last_seq and found)
    if beyond:
        claim = by_seq[beyond[0]][0]
        return bad(last_seq + 1, f"{claim.source} is at {claim.seq}: the chain is truncated")
    if checkpoint_seq > 0 and last_purge != (checkpoint_seq, checkpoint_hash):
        return bad(
            checkpoint_seq + 1,
            "the checkpoint is not the one named by the chain's last retention_purge event",
        )
    return ChainVerdict(room_id, True, last_seq - checkpoint_seq, last_seq, expected_prev)


def stored_bytes_problem(
    *, room_id: str, stored: bytes, seq: int, kind: str, occurred_at: str, data: Any, prev_hash: str
) -> str | None:
    """The exact test of one row: are the stored bytes RFC 8785 of its columns (as the
    application reads them)? None when they are; else which column differs, in words."""
    try:
        if not isinstance(data, Mapping):
            return "the event's data column is not an object"
        expected = event_canonical_bytes(
            room_id=room_id, seq=seq, kind=kind, occurred_at=occurred_at, data=data,
            prev_hash=prev_hash,
        )  # fmt: skip
    except (rfc8785.CanonicalizationError, TypeError, ValueError):
        return "the event's columns cannot be canonicalised"
    if expected == stored:
        return None
    try:
        hashed = json.loads(stored)
    except (ValueError, UnicodeDecodeError):
        return "the event's stored bytes are not JSON"
    if not isinstance(hashed, dict):
        return "the event's stored bytes are not a JSON object"
    columns = {
        "room_id": room_id, "seq": seq, "kind": kind, "occurred_at": occurred_at,
        "data": data, "prev_hash": prev_hash,
    }  # fmt: skip
    changed = [
        name
        for name in ("data", "kind", "occurred_at", "room_id", "seq", "prev_hash")
        if not _same_json(hashed.get(name), columns[name])
    ]
    if "room_id" in changed:
        return "the event's stored bytes belong to another room"
    if changed:
        words = {"data": "data", "kind": "kind", "occurred_at": "time", "seq": "number",
                 "prev_hash": "link"}  # fmt: skip
        return (
            f"the event's {', '.join(words[n] for n in changed)} column differs from what was "
            "hashed (the stored bytes say otherwise)"
        )
    return "the event's stored bytes are not the canonical form of its columns"


def _same_json(a: Any, b: Any) -> bool:
    try:
        return rfc8785.dumps(a) == rfc8785.dumps(b)
    except (rfc8785.CanonicalizationError, TypeError, ValueError):
        return False


# --- Required signed heads and purge rules (docs/ledger.md, "Heads the database cannot skip")
#
# The chain alone proves only that its events agree with each other; whoever writes the
# database can recompute a whole consistent chain. Signed heads pin it, but only if the chain
# cannot do without them: these rules make a head *required* at every pause, close and
# purge and at least every ``every_events`` events, and they check a purge against the
# retention policy and against every head the server signed before it.

# Kinds after which the server signs the head in the same transaction (ledger_append).
REQUIRES_HEAD = frozenset({"room_paused", "room_closed", "retention_purge"})
_KIND_WORDS = {
    "room_paused": "a pause",
    "room_closed": "the room's closing",
    "retention_purge": "a retention purge",
}
_CHAIN_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"


@dataclass(frozen=True)
class HeadPolicy:
    """What the server promises about signed heads and retention (its settings)."""

    every_events: int = 64
    retention_days: int = 90
    # How late a head may be signed after the events it covers (the beat's T plus a margin).
    grace_seconds: int = 2 * 3600
    # T: the server signs a room's unsigned events within this many seconds (the beat).
    every_seconds: int = 3600


@dataclass(frozen=True)
class ChainMark:
    """An event the rules look at: one of ``REQUIRES_HEAD``; for a purge, its fields."""

    seq: int
    kind: str
    occurred_at: str  # chain form
    data: Mapping[str, Any]


@dataclass(frozen=True)
class SignedClaim:
    seq: int
    hash: str
    signed_at: str  # chain form
    source: str


def duration_words(seconds: int) -> str:
    """``7200`` -> "2 hours", ``90`` -> "90 seconds": for the verdicts' sentences."""
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds >= size and seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}{'' if n == 1 else 's'}"
    return f"{seconds} seconds"


def unsigned_tail_seq(*, signed_seqs: Iterable[int], checkpoint_seq: int) -> int:
    """The first event no signed head covers (it may not exist yet): for the quiet-tail rule."""
    return max([checkpoint_seq, *signed_seqs]) + 1


def chain_time(text: str) -> datetime:
    try:
        return datetime.strptime(text, _CHAIN_TIME).replace(tzinfo=UTC)
    except ValueError:  # a time stored in another equivalent form (no fraction, say)
        return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def head_rules_problem(
    *,
    marks: Iterable[ChainMark],
    signed: Iterable[SignedClaim],
    checkpoint_seq: int,
    last_seq: int,
    policy: HeadPolicy,
    tail: tuple[int, str] | None = None,
    now: datetime | None = None,
) -> tuple[int, str] | None:
    """The first broken head or purge rule as ``(seq, problem in words)``, or None.

    1. every pause, close and purge has a signed head at or after it;
    2. no run of more than ``every_events`` events goes without a signed head;
    3. a purge states a window no shorter than the policy's, and no head the server signed
       contradicts it: a signed head at or below the purge's checkpoint must have been signed
       before the purge's cutoff (purge time minus the policy's window, plus the grace), and a
       head at the checkpoint itself must name the checkpoint's hash;
    4. (docs/ledger.md: rule 5) when the verifier knows the time (``now``): ``tail`` (seq,
       time), the first event no signed head covers, is not older than the grace (T plus a
       margin), since the server signs a quiet room's events within T: an older unsigned
       tail means heads were removed (a cut tail's own head, say). Events of the last T plus
       the grace stay unpinned by this rule.
    """
    heads = sorted(signed, key=lambda c: c.seq)
    latest = heads[-1].seq if heads else -1
    marks = list(marks)
    for mark in marks:
        if latest < mark.seq:
            return (
                mark.seq,
                f"event {mark.seq} records {_KIND_WORDS.get(mark.kind, mark.kind)}, which the "
                "server always signs, but no signed head covers it (signed heads were removed "
                "or this event was written without the server)",
            )
    n = policy.every_events
    previous = checkpoint_seq
    for point in [c.seq for c in heads if c.seq > checkpoint_seq] + [last_seq]:
        if point - previous > n:
            return (
                previous + n + 1,
                f"more than {n} events follow event {previous} without a signed head (the "
                f"server signs at least every {n}): signed heads were removed",
            )
        previous = max(previous, point)
    if tail is not None and now is not None:
        seq, at = tail
        if chain_time(at) < now - timedelta(seconds=policy.grace_seconds):
            return (
                seq,
                f"event {seq} was recorded more than {duration_words(policy.grace_seconds)} "
                "ago and no signed head covers it, but the server signs a quiet room's events "
                f"within {duration_words(policy.every_seconds)}: signed heads were removed",
            )
    for mark in marks:
        if mark.kind != "retention_purge":
            continue
        window = mark.data.get("window_days")
        if type(window) is not int or window < policy.retention_days:
            return (
                mark.seq,
                f"the purge at event {mark.seq} claims a retention window of {window} days; "
                f"the policy keeps events {policy.retention_days} days",
            )
        through_seq, through_hash = mark.data.get("through_seq"), mark.data.get("through_hash")
        if type(through_seq) is not int:
            return mark.seq, f"the purge at event {mark.seq} does not say what it removed"
        cutoff = chain_time(mark.occurred_at) - timedelta(days=policy.retention_days)
        latest_allowed = cutoff + timedelta(seconds=policy.grace_seconds)
        for claim in heads:
            if claim.seq > through_seq:
                break
            if claim.seq == through_seq and claim.hash != through_hash:
                return (
                    mark.seq,
                    f"the purge at event {mark.seq} names a last removed event that {claim.source} "
                    "attested differently",
                )
            if claim.seq > 0 and chain_time(claim.signed_at) > latest_allowed:
                return (
                    mark.seq,
                    f"the purge at event {mark.seq} removed events up to #{through_seq}, but "
                    f"{claim.source} shows event #{claim.seq} was recorded less than "
                    f"{policy.retention_days} days before the purge: the retention policy "
                    "forbids removing it",
                )
    return None

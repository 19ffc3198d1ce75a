"""The owner's private vault: typed items, sealed with AES-GCM at rest, and the scoped views a
capability clears.

Nothing here hands an item to an agent: context assembly (rooms) asks ``vault_scoped_view``
only after ``slips.verification`` has allowed a capability, and gets back only that
capability's scope (free/busy without titles, a budget range without notes, …).

Keys: each item is sealed under its owner's data key (``slips.datakeys``: wrapped by the master
key, ``SYNAPSIA_MASTER_KEY`` or ``SYNAPSIA_VAULT_KEY``, and kept in the key store outside the
database), so deleting the account destroys the key and the owner's vault in older database
backups cannot be opened. Items sealed before (version 1, one key for all) still open and are
resealed by migration ``slips 0003``. Each item is bound to its owner, id and kind as
associated data, so a sealed blob moved to another row or owner does not open.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo
from typing import TYPE_CHECKING, Annotated, Any, Literal
from uuid import UUID

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.utils import timezone as django_timezone
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    HttpUrl,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from gatekeeper.owner_limits import owner_limit_check
from slips.capabilities import Capability
from slips.errors import Malformed, Misconfigured, NotFound
from slips.models import VaultItem
from slips.money import budget_band
from synapsia.db.statements import (
    blob_column,
    blob_value,
    rows_fetched,
    rows_select,
    statement_cursor,
)

if TYPE_CHECKING:  # the key store is imported where it is used (slips.datakeys)
    from slips.datakeys import StoredKey

SEAL_VERSION = b"\x01"  # the single vault key of before (and server-held secrets)
OWNER_SEAL_VERSION = b"\x02"  # the owner's data key (slips.datakeys)
_AAD_PREFIX = b"synapsia-vault-v1|"
_OWNER_AAD_PREFIX = b"synapsia-vault-v2|"
_SECRET_AAD_PREFIX = b"synapsia-vault-secret-v1|"
MAX_ICS_BYTES = 1024 * 1024
MAX_WINDOWS = 2000
ICS_HORIZON_DAYS = 90


# --- item schemas ----------------------------------------------------------------------------


class _Item(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class BusyWindow(_Item):
    start: int = Field(ge=0, le=2**53 - 1)  # unix seconds
    end: int = Field(ge=0, le=2**53 - 1)
    # Accepted so that items and API bodies from before still open, but never dumped, so never
    # sealed again nor shown: the vault keeps busy and free only, never what an event was.
    title: str = Field(default="", max_length=200, exclude=True)

    @model_validator(mode="after")
    def _ordered(self) -> BusyWindow:
        if self.end <= self.start:
            raise ValueError("a window must end after it starts")
        return self


class Availability(_Item):
    kind: Literal["availability"]
    # The zone floating and all-day times were read in when imported (pages show the owner's
    # current zone, not this one).
    timezone: str = Field(default="UTC", max_length=64)
    # Busy times are known up to here (unix seconds): the end of the last import's window.
    until: int | None = Field(default=None, ge=0, le=2**53 - 1)
    busy: list[BusyWindow] = Field(default_factory=list, max_length=MAX_WINDOWS)


class Budget(_Item):
    """What the owner will spend **per person**, in the currency's minor units
    (``slips.money``: 30 to 80 EUR is 3000 to 8000)."""

    kind: Literal["budget"]
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    minimum: int = Field(ge=0, le=10**12)
    maximum: int = Field(ge=0, le=10**12)
    notes: str = Field(default="", max_length=500)  # private

    @model_validator(mode="after")
    def _ordered(self) -> Budget:
        if self.maximum < self.minimum:
            raise ValueError("maximum must not be below minimum")
        return self


class FoodLikes(_Item):
    kind: Literal["food_likes"]
    items: list[Annotated[str, Field(min_length=1, max_length=80)]] = Field(max_length=50)


class FoodDislikes(_Item):
    """Cuisines or foods the owner would rather not eat (a hard limit for the negotiator,
    where likes only rank)."""

    kind: Literal["food_dislikes"]
    items: list[Annotated[str, Field(min_length=1, max_length=80)]] = Field(max_length=50)


class Allergies(_Item):
    """Words of ``dining.ALLERGENS`` (checked when written, see ``vault_content_check``)."""

    kind: Literal["allergies"]
    items: list[Annotated[str, Field(min_length=1, max_length=80)]] = Field(max_length=50)


class Neighbourhood(_Item):
    """One of a registered city's neighbourhoods, in the city file's spelling (checked and
    canonicalised when written, see ``vault_content_check``)."""

    kind: Literal["neighbourhood"]
    name: str = Field(min_length=1, max_length=120)


class Link(_Item):
    kind: Literal["link"]
    url: HttpUrl
    label: str = Field(default="", max_length=120)


class Note(_Item):
    kind: Literal["note"]
    text: str = Field(min_length=1, max_length=4000)


VaultContent = Annotated[
    Availability | Budget | FoodLikes | FoodDislikes | Allergies | Neighbourhood | Link | Note,
    Field(discriminator="kind"),
]
_content_adapter: TypeAdapter[Any] = TypeAdapter(VaultContent)


def _invalid_item(exc: ValidationError) -> Malformed:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "item"
    return Malformed("invalid_vault_item", f"{where}: {first['msg']}")


def vault_content_parse(data: Any) -> BaseModel:
    """Validate an item body against its kind's schema; ``Malformed`` naming the first problem."""
    try:
        return _content_adapter.validate_python(data)
    except ValidationError as exc:
        raise _invalid_item(exc) from None


def vault_content_parse_json(raw: bytes) -> BaseModel:
    """``vault_content_parse(json.loads(raw))``: the JSON text a sealed item opens to, parsed
    and validated in one pass by the schema's own JSON reader instead of ``json.loads`` then
    the same schema over the objects it built (half the cost of opening an item), with the
    same rules. Text that reader refuses as JSON (a byte-order mark, UTF-16, ``NaN``, or
    none at all) goes the old way, so it is refused, or read, exactly as it was."""
    try:
        return _content_adapter.validate_json(raw)
    except ValidationError as exc:
        if exc.errors()[0]["type"] != "json_invalid":
            raise _invalid_item(exc) from None
    return vault_content_parse(json.loads(raw))


def _allergen_word(text: str) -> str:
    # "Tree nuts", "TREE-NUTS" and "tree nuts" all mean the vocabulary's "tree-nuts".
    return "-".join(text.lower().replace("-", " ").split())


def allergies_canonical(items: list[str]) -> list[str]:
    """``items`` as words of ``dining.ALLERGENS`` (case and spacing forgiven, repeats
    dropped, the vocabulary's order); ``Malformed`` in words naming the accepted ones."""
    from dining import ALLERGENS

    words = {_allergen_word(i) for i in items}
    unknown = sorted(w for w in words if w not in ALLERGENS)
    if unknown:
        accepted = ", ".join(a.replace("-", " ") for a in ALLERGENS)
        named = ", ".join(repr(u[:40]) for u in unknown[:5])
        verb = "is not an allergen" if len(unknown) == 1 else "are not allergens"
        raise Malformed(
            "unknown_allergen",
            f"{named} {verb} venues can be checked for. Choose from: {accepted}.",
        )
    return [a for a in ALLERGENS if a in words]


def neighbourhood_canonical(name: str) -> str:
    """``name`` as one of the registered cities' neighbourhoods is spelled in its city file
    (matched case-insensitively, by name or id); ``Malformed`` in words naming them."""
    from dining import CatalogueInvalid, neighbourhoods_registered

    try:
        places = neighbourhoods_registered()
    except CatalogueInvalid:
        raise Misconfigured(
            "cities_unavailable", "The list of cities cannot be read right now; try again later."
        ) from None
    wanted = name.casefold()
    for place in places:
        if wanted in (place.name.casefold(), place.id):
            return place.name
    shown = ", ".join(sorted({place.name for place in places}))
    raise Malformed(
        "unknown_neighbourhood",
        f"{name[:60]!r} is not a neighbourhood of the cities we know. Choose from: {shown}.",
    )


def vault_content_check(data: Any) -> BaseModel:
    """Validate an item about to be written: its kind's schema, then the checks that depend
    on the deployment's data (allergens, neighbourhoods), returning it canonicalised.

    Stored items are opened with the schema alone (``vault_content_parse``): a catalogue
    dropping a city must not make an owner's vault unreadable.
    """
    parsed = vault_content_parse(data)
    if isinstance(parsed, Allergies):
        return parsed.model_copy(update={"items": allergies_canonical(parsed.items)})
    if isinstance(parsed, Neighbourhood):
        return parsed.model_copy(update={"name": neighbourhood_canonical(parsed.name)})
    return parsed


# --- sealing ---------------------------------------------------------------------------------


def _legacy_keys() -> list[bytes]:
    """The single vault key of before (version 1 seals): derived from each configured master
    key (current, then retired), so secrets and not-yet-migrated items still open."""
    from slips.datakeys import master_keys

    return [_hkdf_vault(m.material) for m in master_keys()]


def _hkdf_vault(material: bytes) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"synapsia-vault-v1")
    return hkdf.derive(material)


def _aad(*, owner_id: Any, item_id: UUID, kind: str) -> bytes:
    return _AAD_PREFIX + f"{owner_id}|{item_id}|{kind}".encode()


def _owner_aad(*, owner_id: Any, item_id: UUID, kind: str) -> bytes:
    return _OWNER_AAD_PREFIX + f"{owner_id}|{item_id}|{kind}".encode()


def _seal(plaintext: bytes, aad: bytes) -> bytes:
    """AES-256-GCM under the master-derived key: version 1 + 96-bit nonce + ciphertext+tag."""
    nonce = os.urandom(12)
    return SEAL_VERSION + nonce + AESGCM(_legacy_keys()[0]).encrypt(nonce, plaintext, aad)


def _open(blob: bytes, aad: bytes, *, what: str) -> bytes:
    if blob[:1] != SEAL_VERSION or len(blob) < 1 + 12 + 16:
        raise Misconfigured("vault_sealed", f"{what} is in an unknown format.")
    for key in _legacy_keys():
        try:
            return AESGCM(key).decrypt(blob[1:13], blob[13:], aad)
        except InvalidTag:
            continue
    raise Misconfigured("vault_sealed", f"{what} does not open with this key.")


def _owner_subject(owner_id: Any) -> str:
    return str(owner_id)


def vault_seal_for_owner(
    *, owner_id: Any, owner_joined: datetime, item_id: UUID, kind: str, content: dict[str, Any]
) -> bytes:
    """AES-256-GCM-encrypt ``content`` under its owner's data key (``slips.datakeys``):
    version 2 + the key's id (16 bytes) + 96-bit nonce + ciphertext and tag, with the owner,
    item id and kind as associated data (a blob moved to another row or owner does not open)."""
    from slips.datakeys import data_key_for, owner_since

    key = data_key_for(
        kind="owner", subject=_owner_subject(owner_id), since=owner_since(owner_joined)
    )
    plaintext = json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode()
    nonce = os.urandom(12)
    aad = _owner_aad(owner_id=owner_id, item_id=item_id, kind=kind)
    return (
        OWNER_SEAL_VERSION + key.id.bytes + nonce + AESGCM(key.key).encrypt(nonce, plaintext, aad)
    )


def _owner_open(
    blob: bytes, *, owner_id: Any, item_id: UUID, kind: str, keys: TurnKeys | None = None
) -> bytes:
    if len(blob) < 1 + 16 + 12 + 16:
        raise Misconfigured("vault_sealed", "A vault item is in an unknown format.")
    subject = _owner_subject(owner_id)
    if keys is None:
        from slips.datakeys import data_key_open

        aead = AESGCM(data_key_open(UUID(bytes=blob[1:17]), kind="owner", subject=subject))
    else:
        aead = keys.aead(blob[1:17], subject=subject)
    try:
        return aead.decrypt(
            blob[17:29], blob[29:], _owner_aad(owner_id=owner_id, item_id=item_id, kind=kind)
        )
    except InvalidTag:
        raise Misconfigured("vault_sealed", "A vault item does not open with its key.") from None


def vault_seal(*, owner: User, item_id: UUID, kind: str, content: dict[str, Any]) -> bytes:
    """Seal ``content`` for one row of ``owner``'s vault, under the owner's data key."""
    return vault_seal_for_owner(
        owner_id=owner.pk,
        owner_joined=owner.date_joined,
        item_id=item_id,
        kind=kind,
        content=content,
    )


class TurnKeys:
    """The owners' data keys one context turn opens, each read from the key store and
    unwrapped once per turn however many of that owner's items the turn shows (as each slip's
    signature is verified once per turn). Made for one turn and dropped with it: nothing is
    kept from one turn to the next, so a key destroyed before a turn is refused by it."""

    def __init__(self) -> None:
        self._opened: dict[tuple[UUID, str], bytes] = {}
        # By the key id's 16 bytes as sealed: no UUID is made per item, only per key.
        self._aeads: dict[tuple[bytes, str], AESGCM] = {}
        self._read: dict[str, StoredKey] | None = None

    def read_for(
        self, rows: Iterable[VaultRow], *, also: Iterable[UUID] = ()
    ) -> dict[str, StoredKey]:
        """Read the key store's rows of every owner key ``rows`` are sealed under, in one
        read (each owner's key was one read of its own), for this turn's ``open``s. Each is
        still checked when opened: its subject, its destroyed mark, its unwrapping. ``also``:
        other keys the turn uses, read in the same read (the room's, whose destroyed mark the
        turn then need not read again); every row read is returned."""
        from slips.datakeys import data_keys_read

        sealed_ids = {
            r.sealed[1:17]
            for r in rows
            if r.sealed[:1] == OWNER_SEAL_VERSION and len(r.sealed) >= 17
        }
        self._read = data_keys_read({UUID(bytes=k) for k in sealed_ids} | set(also))
        return self._read

    def open(self, key_id: UUID, *, subject: str) -> bytes:
        from slips.datakeys import data_key_open

        opened = self._opened.get((key_id, subject))
        if opened is None:
            read = self._read if self._read is not None and str(key_id) in self._read else None
            opened = data_key_open(key_id, kind="owner", subject=subject, read=read)
            self._opened[(key_id, subject)] = opened
        return opened

    def aead(self, sealed_key_id: bytes, *, subject: str) -> AESGCM:
        """The key a blob names by its 16 id bytes (``blob[1:17]``), opened by ``open`` and
        ready to decrypt with (its AES key schedule made once per turn too)."""
        aead = self._aeads.get((sealed_key_id, subject))
        if aead is None:
            key = self.open(UUID(bytes=sealed_key_id), subject=subject)
            aead = self._aeads[(sealed_key_id, subject)] = AESGCM(key)
        return aead


def vault_plaintext(
    *, blob: bytes, owner_id: Any, item_id: UUID, kind: str, keys: TurnKeys | None = None
) -> bytes:
    """The JSON a stored blob seals, whichever version it is (1: the single key of before,
    2: the owner's data key). ``DataKeyDestroyed`` (fails closed) for a deleted owner's."""
    if blob[:1] == OWNER_SEAL_VERSION:
        return _owner_open(blob, owner_id=owner_id, item_id=item_id, kind=kind, keys=keys)
    return _open(blob, _aad(owner_id=owner_id, item_id=item_id, kind=kind), what="A vault item")


@dataclass(frozen=True, slots=True)
class VaultRow:
    """A stored vault item as a turn reads it (``vault_items_read``): no model instance."""

    id: UUID
    owner_id: int
    kind: str
    sealed: bytes


def vault_open(item: VaultItem | VaultRow, *, keys: TurnKeys | None = None) -> BaseModel:
    """Decrypt (authenticated: a blob altered, moved or under another key does not open) and
    re-validate one stored item against its kind's schema: what the database holds is never
    trusted to be well formed."""
    plaintext = vault_plaintext(
        blob=bytes(item.sealed), owner_id=item.owner_id, item_id=item.id, kind=item.kind, keys=keys
    )
    content = vault_content_parse_json(plaintext)
    # The row's kind is what a capability cleared; content of another kind (sealed for this
    # row by whoever held the key, never by ``vault_item_create``) is not shown under it.
    if content.kind != item.kind:  # type: ignore[attr-defined]
        raise Malformed("invalid_vault_item", "An item's content is not of its kind.")
    return content


@functools.cache
def _items_read_sql(vendor: str, pairs: int, lock: bool) -> str:
    """The items of ``pairs`` (owner, kind) pairs in one statement, written once per shape
    (no ORM compilation per turn); only our own table name is interpolated. Parameters are
    named: Django's SQLite cursor rewrites each ``%s`` with a look-behind regex over the whole
    statement on every execute (two per pair here)."""
    table = connection.ops.quote_name(VaultItem._meta.db_table)
    wanted = " OR ".join(f"(owner_id = %(o{i})s AND kind = %(k{i})s)" for i in range(pairs))
    columns = ("id", "owner_id", "kind", blob_column(vendor, "sealed"))
    sql = rows_select(vendor, columns, f"FROM {table} WHERE {wanted} ORDER BY kind, created_at, id")
    return sql + " FOR UPDATE" if lock and connection.features.has_select_for_update else sql


@functools.cache
def _items_read_names(pairs: int) -> tuple[str, ...]:
    """The parameter names of ``_items_read_sql``'s statement, in the order its pairs' values
    come (owner, kind, owner, kind, ...)."""
    return tuple(name for i in range(pairs) for name in (f"o{i}", f"k{i}"))


def vault_items_read(
    *, wanted: Collection[tuple[int, str]], lock: bool
) -> dict[tuple[int, str], list[VaultRow]]:
    """Every stored item of each wanted (owner id, kind), in one statement, in the vault's
    order (kind, then age); locked when ``lock`` (PostgreSQL; SQLite's write transaction
    already serialises), so none changes before the turn that shows them commits."""
    found: dict[tuple[int, str], list[VaultRow]] = {}
    pairs = sorted(set(wanted))
    if not pairs:
        return found
    names = _items_read_names(len(pairs))
    parameters = dict(zip(names, [value for pair in pairs for value in pair], strict=True))
    with statement_cursor() as cursor:
        vendor = transaction.get_connection().vendor
        cursor.execute(_items_read_sql(vendor, len(pairs), lock), parameters)
        rows = rows_fetched(cursor, vendor)
    for item_id, owner_id, kind, sealed in rows:
        row = VaultRow(
            # PostgreSQL's driver returns UUIDs; SQLite stores them as 32 hex digits.
            id=item_id if isinstance(item_id, UUID) else UUID(hex=str(item_id)),
            owner_id=int(owner_id),
            kind=str(kind),
            sealed=blob_value(sealed),
        )
        found.setdefault((row.owner_id, row.kind), []).append(row)
    return found


def vault_reseal(
    *, blob: bytes, owner_id: Any, owner_joined: datetime, item_id: UUID, kind: str
) -> bytes | None:
    """A version-1 blob resealed under its owner's data key; None if it already is one (the
    migration and ``rewrap_data_keys`` use this, with historical or live rows alike)."""
    if blob[:1] == OWNER_SEAL_VERSION:
        return None
    content = json.loads(vault_plaintext(blob=blob, owner_id=owner_id, item_id=item_id, kind=kind))
    return vault_seal_for_owner(
        owner_id=owner_id, owner_joined=owner_joined, item_id=item_id, kind=kind, content=content
    )


def vault_secret_seal(*, binding: str, secret: bytes) -> bytes:
    """Seal a server-held secret (bytes, not a vault item) under the master-derived key.

    ``binding`` names what the secret belongs to (e.g. ``demo-device-key|<owner>|<key id>``)
    and is authenticated as associated data, under a prefix no vault item uses: the blob opens
    only for that same binding, never as another secret or as an item.
    """
    return _seal(secret, _SECRET_AAD_PREFIX + binding.encode())


def vault_secret_open(*, binding: str, sealed: bytes) -> bytes:
    """Open what ``vault_secret_seal`` sealed for ``binding``; ``Misconfigured`` (fails
    closed) if it was altered, moved to another binding, or the master key changed (a
    retired master key still opens it)."""
    return _open(bytes(sealed), _SECRET_AAD_PREFIX + binding.encode(), what="A sealed secret")


# --- writes ----------------------------------------------------------------------------------


def _content_dump(content: BaseModel) -> dict[str, Any]:
    return content.model_dump(mode="json")


@transaction.atomic
def vault_item_create(*, owner: User, content: dict[str, Any]) -> VaultItem:
    """Validate and store a new vault item, sealed (nothing is stored if it is refused). An
    owner's vault holds at most their limit of items (``gatekeeper.owner_limits``)."""
    parsed = vault_content_check(content)
    owner_limit_check(owner, "vault_items", VaultItem.objects.filter(owner=owner))
    item = VaultItem(owner=owner, kind=parsed.kind)  # type: ignore[attr-defined]
    item.sealed = vault_seal(
        owner=owner, item_id=item.id, kind=item.kind, content=_content_dump(parsed)
    )
    item.save()
    return item


def _owned_item(owner: User, item_id: UUID, *, lock: bool = False) -> VaultItem:
    items = VaultItem.objects.select_for_update() if lock else VaultItem.objects
    try:
        return items.get(id=item_id, owner=owner)
    except VaultItem.DoesNotExist:
        raise NotFound("not_found", "No such vault item.") from None


@transaction.atomic
def vault_item_update(*, owner: User, item_id: UUID, content: dict[str, Any]) -> VaultItem:
    """Replace an item's content (its kind cannot change)."""
    item = _owned_item(owner, item_id, lock=True)
    parsed = vault_content_check(content)
    if parsed.kind != item.kind:  # type: ignore[attr-defined]
        raise Malformed("invalid_vault_item", "An item's kind cannot change.")
    item.sealed = vault_seal(
        owner=owner, item_id=item.id, kind=item.kind, content=_content_dump(parsed)
    )
    item.save(update_fields=["sealed", "updated_at"])
    return item


@transaction.atomic
def vault_item_delete(*, owner: User, item_id: UUID) -> None:
    """Delete an item at once; no capability can clear it afterwards."""
    _owned_item(owner, item_id, lock=True).delete()


# --- availability: the .ics import and busy blocks -------------------------------------------


# What an importer cannot read, from icalendar, recurring-ical-events (both raise ValueError
# subclasses for broken properties and rules) or dateutil underneath them.
_ICS_ERRORS = (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError)
# Occurrences examined (busy or not) before the importer gives up: a rule repeating every
# minute cannot keep a request busy expanding free time.
_MAX_OCCURRENCES = 5 * MAX_WINDOWS
# Recurrence steps the expansion may take in all, counted from each rule's DTSTART (dateutil
# walks a rule from its start, whatever the window): a 300-byte "every minute since 2000"
# would otherwise hold a worker for minutes. Daily since 1990 is about 15,000.
_MAX_RULE_STEPS = 200_000
_FREQ_SECONDS = {
    "SECONDLY": 1,
    "MINUTELY": 60,
    "HOURLY": 3600,
    "DAILY": 86_400,
    "WEEKLY": 7 * 86_400,
    "MONTHLY": 28 * 86_400,
    "YEARLY": 365 * 86_400,
}
# BY parts that can multiply the instances of one step (an upper bound: some only filter).
_EXPANDING_PARTS = ("BYSECOND", "BYMINUTE", "BYHOUR", "BYDAY", "BYMONTHDAY", "BYYEARDAY")


def _instant(value: date | datetime, zone: tzinfo) -> datetime:
    """An iCalendar time as an aware instant: a TZID time as it is, a floating time and an
    all-day date (its local midnight) in ``zone``, so a day is whole in the owner's zone."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=zone) if value.tzinfo is None else value
    return datetime.combine(value, time(0), tzinfo=zone)


def busy_merged(windows: list[tuple[int, int]]) -> list[BusyWindow]:
    """Windows sorted and merged where they overlap or touch (untitled)."""
    merged: list[list[int]] = []
    for start, end in sorted(windows):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [BusyWindow(start=s, end=e) for s, e in merged]


def _rule_steps(event: Any, *, since: datetime, until: datetime, zone: tzinfo) -> tuple[int, int]:
    """About how many instances dateutil generates for ``event``'s RRULEs up to ``until``: in
    all (dateutil walks from DTSTART) and from ``since`` (what the expansion hands back)."""
    rules = event.get("RRULE")
    if rules is None or event.get("DTSTART") is None:
        return 0, 0
    start = _instant(event["DTSTART"].dt, zone)
    total = within = 0
    for rule in rules if isinstance(rules, list) else [rules]:
        period = _FREQ_SECONDS.get(str((rule.get("FREQ") or ["?"])[0]).upper())
        if period is None:
            raise ValueError("RRULE without a known FREQ")
        step = period * max(int((rule.get("INTERVAL") or [1])[0]), 1)
        last = until
        if rule.get("UNTIL"):
            last = min(last, _instant(rule["UNTIL"][0], zone))
        factor = 1
        for part in _EXPANDING_PARTS:
            factor *= max(len(rule.get(part) or []), 1)
        count = max((last - start).total_seconds(), 0) // step + 1
        window = max((last - max(start, since)).total_seconds(), 0) // step + 1
        if rule.get("COUNT"):
            limit = max(int(rule["COUNT"][0]), 0)
            count, window = min(count, limit), min(window, limit)
        total += int(count) * factor
        within += int(window) * factor
    return total, within


def _zone_key(zone: tzinfo) -> str:
    return getattr(zone, "key", None) or "UTC"


def ics_busy_windows(*, ics: bytes, now: datetime, zone: tzinfo | None = None) -> list[BusyWindow]:
    """Busy windows from an iCalendar file, from a day before ``now`` to ``ICS_HORIZON_DAYS``
    after it, merged where they overlap and without titles (the vault never stores them).

    Recurrences are expanded by ``recurring-ical-events``: RRULE and RDATE, EXDATE, and
    RECURRENCE-ID overrides (a moved or cancelled instance), each in its event's own TZID, so a
    weekly 09:00 in Europe/Berlin stays 09:00 local across a daylight-saving change. Floating
    times and all-day events are read in ``zone`` (the owner's; default Django's current zone),
    an all-day event blocking its whole local days. Transparent and cancelled events or
    instances are free time. ``Malformed`` in words if the file is too large or unreadable, or
    if it holds more than ``MAX_WINDOWS`` busy times in the window.
    """
    import icalendar
    import recurring_ical_events

    if len(ics) > MAX_ICS_BYTES:
        raise Malformed(
            "ics_oversized",
            f"Calendar files are limited to {MAX_ICS_BYTES // (1024 * 1024)} MB; export a "
            "shorter date range and try again.",
        )
    local = zone or django_timezone.get_current_timezone()
    window_from, window_until = now - timedelta(days=1), now + timedelta(days=ICS_HORIZON_DAYS)
    # Floating and all-day times are placed in the owner's zone only after expansion, so the
    # library is asked a day wider on each side and the window is cut exactly below.
    slack = timedelta(days=1)
    unreadable = Malformed(
        "ics_invalid",
        "That file is not a calendar the importer can read. Export your calendar again as an "
        ".ics file (iCalendar) and upload that; your busy times were not changed.",
    )
    try:
        calendar = icalendar.Calendar.from_ical(ics)
        if not isinstance(calendar, icalendar.Calendar):
            raise unreadable
        total = within = 0
        for event in calendar.walk("VEVENT"):
            steps = _rule_steps(
                event, since=window_from - slack, until=window_until + slack, zone=local
            )
            total, within = total + steps[0], within + steps[1]
        if within > _MAX_OCCURRENCES:
            raise _too_many()
        if total > _MAX_RULE_STEPS:
            raise Malformed(
                "ics_too_many",
                "An event in that calendar repeats too often over too long a time to import "
                "(for example every minute for years). Export only the calendar that matters, "
                "or a shorter date range, and try again; your busy times were not changed.",
            )
        # One pass (``after`` re-walks each rule per chunk of time, quadratic on dense rules);
        # the estimate above bounds what it can return.
        occurrences = recurring_ical_events.of(calendar, components=["VEVENT"]).between(
            window_from - slack, window_until + slack
        )
        found: list[tuple[int, int]] = []
        for event in occurrences:
            if event.get("DTSTART") is None:
                continue
            start = _instant(event["DTSTART"].dt, local)
            if str(event.get("TRANSP", "OPAQUE")).upper() == "TRANSPARENT":
                continue
            if str(event.get("STATUS", "")).upper() == "CANCELLED":
                continue
            if event.get("DTEND") is None:
                continue  # a point in time (no DTEND or DURATION) blocks nothing
            end = _instant(event["DTEND"].dt, local)
            if end <= start or end <= window_from or start >= window_until:
                continue
            found.append((int(start.timestamp()), int(end.timestamp())))
            if len(found) > MAX_WINDOWS:
                raise _too_many()
    except Malformed:
        raise
    except _ICS_ERRORS:
        raise unreadable from None
    return busy_merged(found)


def _too_many() -> Malformed:
    return Malformed(
        "ics_too_many",
        f"That calendar has more than {MAX_WINDOWS} busy times in the next {ICS_HORIZON_DAYS} "
        "days, more than the vault keeps. Export only the calendar that matters (not shared "
        "or holiday calendars) and try again; your busy times were not changed.",
    )


def _availability_save(
    owner: User, *, busy: list[BusyWindow], zone_key: str, until: int | None
) -> VaultItem:
    content = {
        "kind": "availability",
        "timezone": zone_key,
        "until": until,
        "busy": [w.model_dump() for w in busy],
    }
    existing = (
        VaultItem.objects.select_for_update().filter(owner=owner, kind="availability").first()
    )
    if existing is None:
        return vault_item_create(owner=owner, content=content)
    return vault_item_update(owner=owner, item_id=existing.id, content=content)


@transaction.atomic
def vault_import_ics(
    *, owner: User, ics: bytes, now: datetime, zone: tzinfo | None = None
) -> VaultItem:
    """Replace the owner's availability with the busy windows of an ``.ics`` file (read as
    ``ics_busy_windows`` does); a refused file changes nothing."""
    local = zone or django_timezone.get_current_timezone()
    windows = ics_busy_windows(ics=ics, now=now, zone=local)
    until = int((now + timedelta(days=ICS_HORIZON_DAYS)).timestamp())
    return _availability_save(owner, busy=windows, zone_key=_zone_key(local), until=until)


def _availability_of(owner: User) -> Availability | None:
    row = VaultItem.objects.select_for_update().filter(owner=owner, kind="availability").first()
    if row is None:
        return None
    item = vault_open(row)
    assert isinstance(item, Availability)
    return item


@transaction.atomic
def vault_busy_add(*, owner: User, start: datetime, end: datetime) -> VaultItem:
    """Add one busy block (aware datetimes) to the owner's availability, merged with what is
    there; the imported horizon is kept. ``Malformed`` in words if it ends before it starts."""
    if start.tzinfo is None or end.tzinfo is None:
        raise ValueError("busy blocks are aware datetimes")
    if end <= start:
        raise Malformed(
            "busy_unordered", "A busy time must end after it starts; check the end time."
        )
    current = _availability_of(owner)
    windows = [(w.start, w.end) for w in current.busy] if current is not None else []
    windows.append((int(start.timestamp()), int(end.timestamp())))
    merged = busy_merged(windows)
    if len(merged) > MAX_WINDOWS:
        raise Malformed(
            "busy_too_many", f"The vault keeps at most {MAX_WINDOWS} busy times; clear some first."
        )
    if current is None:
        return _availability_save(owner, busy=merged, zone_key=_zone_key(start.tzinfo), until=None)
    return _availability_save(owner, busy=merged, zone_key=current.timezone, until=current.until)


def busy_by_day(
    busy: list[BusyWindow], *, first: date, days: int, zone: tzinfo
) -> list[tuple[date, list[tuple[datetime, datetime]]]]:
    """Each local day from ``first`` with the busy windows cut to that day, in ``zone``: a
    window over midnight appears on both days; a day's end is the next local midnight (23 or
    25 hours away on a daylight-saving change)."""
    result: list[tuple[date, list[tuple[datetime, datetime]]]] = []
    for offset in range(days):
        day = first + timedelta(days=offset)
        opens = datetime.combine(day, time(0), tzinfo=zone)
        closes = datetime.combine(day + timedelta(days=1), time(0), tzinfo=zone)
        low, high = int(opens.timestamp()), int(closes.timestamp())
        blocks = [
            (
                datetime.fromtimestamp(max(w.start, low), tz=zone),
                datetime.fromtimestamp(min(w.end, high), tz=zone),
            )
            for w in sorted(busy, key=lambda w: w.start)
            if w.start < high and w.end > low
        ]
        result.append((day, blocks))
    return result


# --- the scoped view a capability clears -----------------------------------------------------

_HORIZONS = {
    "free_busy_24h": timedelta(hours=24),
    "free_busy_7d": timedelta(days=7),
    "free_busy_14d": timedelta(days=14),
    "free_busy_30d": timedelta(days=30),
}


def _free_busy(item: Availability, *, horizon: timedelta, now: datetime) -> dict[str, Any]:
    start, until = int(now.timestamp()), int((now + horizon).timestamp())
    merged: list[list[int]] = []
    for w in sorted(item.busy, key=lambda w: w.start):
        s, e = max(w.start, start), min(w.end, until)
        if e <= s:
            continue
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    # Busy intervals only: no titles, nothing outside the horizon.
    return {"from": start, "until": until, "busy": merged}


def _budget_view(item: Budget, *, scope: str) -> dict[str, Any]:
    # Minor units, per person, never the notes. The band only says "about": its bounds are
    # multiples of ten whole units, so the exact figures inside it stay with the owner.
    if scope == "range":
        return {"currency": item.currency, "min": item.minimum, "max": item.maximum}
    low, high = budget_band(minimum=item.minimum, maximum=item.maximum, currency=item.currency)
    return {"currency": item.currency, "min": low, "max": high, "band": True}


def vault_scoped_view(
    *, owner_id: Any, capability: Capability, now: datetime
) -> list[dict[str, Any]]:
    """What ``capability`` clears of the owner's vault: each item of its resource kind, cut to
    the capability's scope. Call only with a capability ``slips.verification`` just allowed."""
    if not capability.is_vault:
        return []
    views: list[dict[str, Any]] = []
    for row in VaultItem.objects.filter(owner_id=owner_id, kind=capability.resource):
        view = vault_item_scoped_view(row, capability=capability, now=now)
        if view is not None:
            views.append(view)
    return views


def vault_item_scoped_view(
    row: VaultItem | VaultRow,
    *,
    capability: Capability,
    now: datetime,
    keys: TurnKeys | None = None,
) -> dict[str, Any] | None:
    """One vault item cut to ``capability``'s scope (context assembly reads the turn's items
    in one query, ``vault_items_read``, and cuts each here with the turn's ``keys``); None
    for a kind no scope shows."""
    item = vault_open(row, keys=keys)
    if isinstance(item, Availability):
        return _free_busy(item, horizon=_HORIZONS[capability.scope], now=now)
    if isinstance(item, Budget):
        return _budget_view(item, scope=capability.scope)
    if isinstance(item, FoodLikes | FoodDislikes | Allergies):
        return {"items": list(item.items)}
    if isinstance(item, Neighbourhood):
        return {"name": item.name}
    if isinstance(item, Link):
        return {"url": str(item.url)}
    if isinstance(item, Note):
        return {"text": item.text}
    return None

"""The owner's private vault: typed items, sealed with AES-GCM at rest, and the scoped views a
capability clears.

Nothing here hands an item to an agent: context assembly (rooms) asks ``vault_scoped_view``
only after ``slips.verification`` has allowed a capability, and gets back only that
capability's scope (free/busy without titles, a budget range without notes, …).

Key: ``SYNAPSIA_VAULT_KEY`` (32 random bytes, base64) in production, where the vault refuses
to operate without it; on the embedded profile a key is derived from ``SECRET_KEY``. Each item
is bound to its owner, id and kind as associated data, so a sealed blob moved to another row
or owner does not open.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Any, Literal
from uuid import UUID

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    HttpUrl,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from slips.capabilities import Capability
from slips.config import slips_setting
from slips.errors import Malformed, Misconfigured, NotFound
from slips.models import VaultItem
from slips.money import budget_band

SEAL_VERSION = b"\x01"
_AAD_PREFIX = b"synapsia-vault-v1|"
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
    title: str = Field(default="", max_length=200)  # private: never in a scoped view

    @model_validator(mode="after")
    def _ordered(self) -> BusyWindow:
        if self.end <= self.start:
            raise ValueError("a window must end after it starts")
        return self


class Availability(_Item):
    kind: Literal["availability"]
    timezone: str = Field(default="UTC", max_length=64)
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


def vault_content_parse(data: Any) -> BaseModel:
    """Validate an item body against its kind's schema; ``Malformed`` naming the first problem."""
    try:
        return _content_adapter.validate_python(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "item"
        raise Malformed("invalid_vault_item", f"{where}: {first['msg']}") from None


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


def _vault_key() -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    configured = slips_setting("VAULT_KEY")
    if configured:
        try:
            material = base64.b64decode(configured + "=" * (-len(configured) % 4), altchars=b"-_")
        except (binascii.Error, ValueError):
            raise Misconfigured("vault_key", "SYNAPSIA_VAULT_KEY is not base64.") from None
        if len(material) < 32:
            raise Misconfigured("vault_key", "SYNAPSIA_VAULT_KEY must hold 32+ random bytes.")
    elif settings.PROFILE == "embedded":
        material = settings.SECRET_KEY.encode()
    else:
        # Production never falls back to a key derived from something else.
        raise Misconfigured("vault_key", "The vault is unavailable: SYNAPSIA_VAULT_KEY is unset.")
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"synapsia-vault-v1")
    return hkdf.derive(material)


def _aad(*, owner_id: Any, item_id: UUID, kind: str) -> bytes:
    return _AAD_PREFIX + f"{owner_id}|{item_id}|{kind}".encode()


def _seal(plaintext: bytes, aad: bytes) -> bytes:
    """AES-256-GCM under the vault key: version byte + 96-bit nonce + ciphertext and tag."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = os.urandom(12)
    return SEAL_VERSION + nonce + AESGCM(_vault_key()).encrypt(nonce, plaintext, aad)


def _open(blob: bytes, aad: bytes, *, what: str) -> bytes:
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    if blob[:1] != SEAL_VERSION or len(blob) < 1 + 12 + 16:
        raise Misconfigured("vault_sealed", f"{what} is in an unknown format.")
    try:
        return AESGCM(_vault_key()).decrypt(blob[1:13], blob[13:], aad)
    except InvalidTag:
        raise Misconfigured("vault_sealed", f"{what} does not open with this key.") from None


def vault_seal(*, owner_id: Any, item_id: UUID, kind: str, content: dict[str, Any]) -> bytes:
    """AES-256-GCM-encrypt ``content`` for one row (version byte + 96-bit nonce + ciphertext)."""
    plaintext = json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode()
    return _seal(plaintext, _aad(owner_id=owner_id, item_id=item_id, kind=kind))


def vault_open(item: VaultItem) -> BaseModel:
    """Decrypt and re-validate one stored item."""
    plaintext = _open(
        bytes(item.sealed),
        _aad(owner_id=item.owner_id, item_id=item.id, kind=item.kind),
        what="A vault item",
    )
    return vault_content_parse(json.loads(plaintext))


def vault_secret_seal(*, binding: str, secret: bytes) -> bytes:
    """Seal a server-held secret (bytes, not a vault item) under the vault key.

    ``binding`` names what the secret belongs to (e.g. ``demo-device-key|<owner>|<key id>``)
    and is authenticated as associated data, under a prefix no vault item uses: the blob opens
    only for that same binding, never as another secret or as an item.
    """
    return _seal(secret, _SECRET_AAD_PREFIX + binding.encode())


def vault_secret_open(*, binding: str, sealed: bytes) -> bytes:
    """Open what ``vault_secret_seal`` sealed for ``binding``; ``Misconfigured`` (fails
    closed) if it was altered, moved to another binding, or the vault key changed."""
    return _open(bytes(sealed), _SECRET_AAD_PREFIX + binding.encode(), what="A sealed secret")


# --- writes ----------------------------------------------------------------------------------


def _content_dump(content: BaseModel) -> dict[str, Any]:
    return content.model_dump(mode="json")


@transaction.atomic
def vault_item_create(*, owner: User, content: dict[str, Any]) -> VaultItem:
    """Validate and store a new vault item, sealed (nothing is stored if it is refused)."""
    parsed = vault_content_check(content)
    item = VaultItem(owner=owner, kind=parsed.kind)  # type: ignore[attr-defined]
    item.sealed = vault_seal(
        owner_id=owner.pk, item_id=item.id, kind=item.kind, content=_content_dump(parsed)
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
        owner_id=owner.pk, item_id=item.id, kind=item.kind, content=_content_dump(parsed)
    )
    item.save(update_fields=["sealed", "updated_at"])
    return item


@transaction.atomic
def vault_item_delete(*, owner: User, item_id: UUID) -> None:
    """Delete an item at once; no capability can clear it afterwards."""
    _owned_item(owner, item_id, lock=True).delete()


# --- .ics import -----------------------------------------------------------------------------


def _as_utc(value: date | datetime) -> datetime:
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return datetime(value.year, value.month, value.day, tzinfo=UTC)


def ics_busy_windows(*, ics: bytes, now: datetime) -> list[BusyWindow]:
    """Busy windows from an iCalendar file, from a day ago to ``ICS_HORIZON_DAYS`` ahead.

    Transparent and cancelled events are free time; recurring events are expanded within the
    horizon (RRULE via dateutil); all-day events block whole UTC days.
    """
    import icalendar
    from dateutil.rrule import rrulestr

    if len(ics) > MAX_ICS_BYTES:
        raise Malformed("ics_oversized", f"Calendar files are limited to {MAX_ICS_BYTES} bytes.")
    try:
        calendar = icalendar.Calendar.from_ical(ics)
    except (ValueError, IndexError, KeyError):
        raise Malformed("ics_invalid", "That file is not a readable iCalendar file.") from None
    window_from, window_until = now - timedelta(days=1), now + timedelta(days=ICS_HORIZON_DAYS)
    windows: list[BusyWindow] = []
    try:
        for event in calendar.walk("VEVENT"):
            if str(event.get("TRANSP", "OPAQUE")).upper() == "TRANSPARENT":
                continue
            if str(event.get("STATUS", "")).upper() == "CANCELLED":
                continue
            if event.get("DTSTART") is None:
                continue
            start = _as_utc(event.decoded("DTSTART"))
            if event.get("DTEND") is not None:
                end = _as_utc(event.decoded("DTEND"))
            elif event.get("DURATION") is not None:
                end = start + event.decoded("DURATION")
            else:
                end = start + (
                    timedelta(days=1)
                    if not isinstance(event.decoded("DTSTART"), datetime)
                    else timedelta(0)
                )
            length = end - start
            if length <= timedelta(0):
                continue
            title = str(event.get("SUMMARY", ""))[:200]
            starts = [start]
            if event.get("RRULE") is not None:
                rrule_text = event["RRULE"].to_ical()
                if isinstance(rrule_text, bytes):
                    rrule_text = rrule_text.decode()
                rule = rrulestr(rrule_text, dtstart=start)
                starts = list(rule.between(window_from - length, window_until, inc=True))[
                    :MAX_WINDOWS
                ]
            for s in starts:
                if s + length <= window_from or s >= window_until:
                    continue
                windows.append(
                    BusyWindow(
                        start=int(s.timestamp()), end=int((s + length).timestamp()), title=title
                    )
                )
                if len(windows) > MAX_WINDOWS:
                    raise Malformed("ics_too_many", f"More than {MAX_WINDOWS} busy windows.")
    except (ValueError, TypeError, KeyError, OverflowError) as exc:
        if isinstance(exc, Malformed):
            raise
        raise Malformed(
            "ics_invalid", "That calendar has an event the importer cannot read."
        ) from None
    windows.sort(key=lambda w: (w.start, w.end))
    return windows


@transaction.atomic
def vault_import_ics(*, owner: User, ics: bytes, now: datetime) -> VaultItem:
    """Replace the owner's availability with the busy windows of an ``.ics`` file."""
    windows = ics_busy_windows(ics=ics, now=now)
    content = {"kind": "availability", "busy": [w.model_dump() for w in windows]}
    existing = (
        VaultItem.objects.select_for_update().filter(owner=owner, kind="availability").first()
    )
    if existing is None:
        return vault_item_create(owner=owner, content=content)
    return vault_item_update(owner=owner, item_id=existing.id, content=content)


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
        item = vault_open(row)
        if isinstance(item, Availability):
            views.append(_free_busy(item, horizon=_HORIZONS[capability.scope], now=now))
        elif isinstance(item, Budget):
            views.append(_budget_view(item, scope=capability.scope))
        elif isinstance(item, FoodLikes | FoodDislikes | Allergies):
            views.append({"items": list(item.items)})
        elif isinstance(item, Neighbourhood):
            views.append({"name": item.name})
        elif isinstance(item, Link):
            views.append({"url": str(item.url)})
        elif isinstance(item, Note):
            views.append({"text": item.text})
    return views

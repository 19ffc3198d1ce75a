"""Room content sealed at rest under the room's data key (boundary spec, "Data":
crypto-shredding). Every read of a sealed column decrypts here, and every write seals here.

- Each room has one data key (``slips.datakeys``, kind ``room``, subject ``str(room_id)``),
  kept wrapped by the master key in the key store outside the database. Deleting the room
  destroys it (``room_key_destroy``, from ``rooms.deletion.room_content_delete``), so the
  room's content in any older database backup can never be read again.
- A sealed value is text: ``rc1:`` + base64url(room id, key id, nonce, AES-256-GCM
  ciphertext). The associated data binds the room and the column (``message.text``,
  ``whisper.text``, ``sealed_offer.offer``, ``room.purpose``...): a value copied to another
  column fails to open, and one copied to another room's row is refused by every reader that
  knows the row's room (the model's ``from_db`` for instances, the attribute's first read for
  a ``SealedTextOnReadField``, ``room_content_open(room_id=...)`` for raw SQL).
- Through the ORM it is transparent: ``SealedTextField`` / ``SealedJSONField`` seal in
  ``pre_save`` (``create``, ``save``, ``bulk_create``) and open in ``from_db_value`` (so a
  sealed column reads as its value, in instances and in ``values_list``). A bare plaintext value
  never reaches the database: a queryset ``update(text=...)`` or a lookup on a sealed column
  raises instead (nothing can search ciphertext anyway).
- Raw SQL that selects a sealed column gets the sealed value and opens it with
  ``room_content_open`` / ``room_text_open``; raw SQL that writes one seals with a
  ``RoomSealer`` (one key look-up per room for a whole run).

Which columns are sealed: ``CONTENT_COLUMNS`` whose field is a sealed one (docs/
data-lifecycle.md lists them, and the ones not sealed yet).

A value without the ``rc1:`` prefix is a row written before its column was sealed: it is read
as it is (it is plaintext at rest already) until the data migration or ``python manage.py
seal_room_content`` seals it. Every write seals.

Keys: unwrapping costs a key-store read and an AES unwrap. A small process cache keeps
unwrapped *key material* by key id, and every use first re-reads the key's destroyed mark in
the key store (``data_key_live``, one indexed read): a key destroyed by any process is
refused at once, and dropped from the cache (within ``one_hop()``, one read of many rows, the
mark is read once per key for the hop; a say hop's ``RoomSealer`` reads its rooms' marks in
one read). This caches no trust decision: the Gatekeeper
still decides every read and disclosure; the cache only saves re-unwrapping a key that the
key store says still exists.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Self
from uuid import UUID

from cryptography.exceptions import InvalidTag
from django.db import models
from django.db.models.query_utils import DeferredAttribute

from slips.datakeys import (
    DataKeyDestroyed,
    StoredKey,
    data_key_for,
    data_key_live,
    data_key_open,
    data_keys_destroy,
    data_keys_live,
)
from slips.errors import Misconfigured

# Each sealed column's name in the associated data (stable across table or column renames).
MESSAGE_TEXT = "message.text"
WHISPER_TEXT = "whisper.text"
SEALED_OFFER = "sealed_offer.offer"
ROOM_PURPOSE = "room.purpose"
ROOM_CHARTER = "room.charter"
OUTCOME_PLAN = "room_outcome.plan"

SEALED_PREFIX = "rc1:"
_AAD = b"synapsia-room-content-v1|"
_NONCE = 12
_HEAD = 16 + 16 + _NONCE  # room id, key id, nonce
_CACHE_MAX = 1024


class RoomContentRefused(Misconfigured):
    """A sealed value that does not open where it is read: tampered, cut, copied from another
    room or column, or sealed under a key that is not this room's. Fails closed."""

    status = 500


def _refused(why: str) -> RoomContentRefused:
    return RoomContentRefused(
        "room_content_refused", f"This room content cannot be read: {why}. Nothing was shown."
    )


# --- key material ------------------------------------------------------------------------


class _KeyCache:
    """Unwrapped room keys by key id (bounded, least recently used out). Never consulted
    without the key store's destroyed mark first (``data_key_live``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_id: OrderedDict[UUID, tuple[UUID, Any]] = OrderedDict()  # -> (room, AESGCM)
        self._by_room: dict[UUID, UUID] = {}

    def get(self, key_id: UUID) -> tuple[UUID, Any] | None:
        with self._lock:
            found = self._by_id.get(key_id)
            if found is not None:
                self._by_id.move_to_end(key_id)
            return found

    def for_room(self, room_id: UUID) -> UUID | None:
        with self._lock:
            return self._by_room.get(room_id)

    def put(self, key_id: UUID, room_id: UUID, key: bytes) -> Any:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        aead = AESGCM(key)
        with self._lock:
            self._by_id[key_id] = (room_id, aead)
            self._by_room[room_id] = key_id
            while len(self._by_id) > _CACHE_MAX:
                _, (old_room, _) = self._by_id.popitem(last=False)
                self._by_room.pop(old_room, None)
        return aead

    def drop_room(self, room_id: UUID) -> None:
        with self._lock:
            key_id = self._by_room.pop(room_id, None)
            if key_id is not None:
                self._by_id.pop(key_id, None)

    def clear(self) -> None:
        with self._lock:
            self._by_id.clear()
            self._by_room.clear()


_keys = _KeyCache()


def _subject(room_id: UUID) -> str:
    return str(room_id)  # the subject shared with every user of the room key (artifacts too)


def _sealing_key(room_id: UUID) -> tuple[UUID, Any]:
    """The room's key to seal with: made the first time; ``DataKeyDestroyed`` for a deleted
    room (nothing new is ever sealed under a destroyed room)."""
    key_id = _keys.for_room(room_id)
    if key_id is not None:
        cached = _keys.get(key_id)
        if cached is not None and data_key_live(key_id):
            return key_id, cached[1]
        _keys.drop_room(room_id)
    key = data_key_for(kind="room", subject=_subject(room_id), since="")
    return key.id, _keys.put(key.id, room_id, key.key)


# The keys whose destroyed mark was read in this thread's current hop (``one_hop``), if any,
# and the opening keys already found for them in it (by the key id's raw bytes, with the raw
# room id they open for), so a hop's many values each cost a parse and a decryption only.
_hop = threading.local()


@contextmanager
def one_hop() -> Iterator[None]:
    """Within it (one read: a query's rows, a turn's messages), each room key's destroyed mark
    is read once instead of once per value: the values were all read at the same moment, so a
    key destroyed in between changes nothing a reader could tell apart. A key this process
    destroys meanwhile is dropped from it at once. Nested hops share the outer one."""
    outer = getattr(_hop, "live", None)
    if outer is None:
        _hop.live, _hop.opening = set(), {}
    try:
        yield
    finally:
        if outer is None:
            _hop.live = _hop.opening = None


def room_key_cached(room_id: UUID) -> UUID | None:
    """The id of the room's key this process holds, if it holds one: a hop that reads the key
    store anyway may read its destroyed mark in the same read (``hop_marks_note``)."""
    return _keys.for_room(room_id)


def hop_marks_note(read: Mapping[str, StoredKey]) -> None:
    """Within ``one_hop``: the keys of ``read`` (a key-store read of this moment,
    ``data_keys_read``, by key id as text) that are in the store and not destroyed are live
    for the rest of the hop, as if each one's destroyed mark had been read by ``_live``: a
    context turn reads its room key's row with its owners' keys, one read of the key store
    instead of two (each read takes and drops the store's file lock). Outside a hop, nothing."""
    live: set[UUID] | None = getattr(_hop, "live", None)
    if live is None:
        return
    live.update(UUID(key_id) for key_id, row in read.items() if row[3] is not None)


def _live(key_id: UUID) -> bool:
    live: set[UUID] | None = getattr(_hop, "live", None)
    if live is not None and key_id in live:
        return True
    if not data_key_live(key_id):
        return False
    if live is not None:
        live.add(key_id)
    return True


def _opening_key_in_hop(key_raw: bytes, room_raw: bytes) -> Any:
    opening: dict[bytes, tuple[bytes, Any]] | None = getattr(_hop, "opening", None)
    found = opening.get(key_raw) if opening is not None else None
    if found is not None:
        if found[0] != room_raw:
            raise _refused("it was sealed under another room's key")
        return found[1]
    aead = _opening_key(UUID(bytes=key_raw), UUID(bytes=room_raw))
    if opening is not None:
        opening[key_raw] = (room_raw, aead)
    return aead


def _opening_key(key_id: UUID, room_id: UUID) -> Any:
    cached = _keys.get(key_id)
    if cached is not None:
        if cached[0] != room_id:
            raise _refused("it was sealed under another room's key")
        if _live(key_id):
            return cached[1]
        _keys.drop_room(room_id)
    # Missing, destroyed or another subject's key: data_key_open says which, and refuses.
    try:
        key = data_key_open(key_id, kind="room", subject=_subject(room_id))
    except DataKeyDestroyed:
        raise
    except Misconfigured as error:
        if error.code == "vault_sealed":  # the key exists but belongs to another subject
            raise _refused("it was sealed under another room's key") from None
        raise
    return _keys.put(key_id, room_id, key)


def room_key_destroy(room_id: UUID) -> int:
    """Destroy the room's data key (a tombstone stays, so nothing is sealed under the room
    again) and drop it from this process's cache; other processes refuse it at their next use
    (the destroyed mark). Not undone by any database rollback: call it once the deletion is
    journalled. Idempotent."""
    live: set[UUID] | None = getattr(_hop, "live", None)
    if live is not None:
        live.clear()  # nothing read after this in the hop trusts an earlier mark
        _hop.opening.clear()
    _keys.drop_room(room_id)
    return data_keys_destroy(kind="room", subject=_subject(room_id), since="")


def room_keys_forget() -> None:
    """Drop every cached key (tests that swap the key store)."""
    _keys.clear()


# --- sealing and opening -----------------------------------------------------------------


def _aad(column: str, room_id: UUID) -> bytes:
    return _aad_raw(column, room_id.bytes)


def _aad_raw(column: str, room_raw: bytes) -> bytes:
    return _AAD + column.encode() + b"|" + room_raw


class RoomSealer:
    """Seals many values for one hop: each room's key is looked up once per sealer (the say
    path seals a run of messages of several rooms with one).

    ``rooms``: the rooms it will seal for, known up front (a say hop's). Their cached keys'
    destroyed marks are then read in one key-store read (``data_keys_live``) when the hop
    starts, instead of one read per room at its first value (the hop's values are sealed at
    one moment, as ``one_hop`` reads them: a key destroyed while the hop runs changes nothing
    anyone could tell apart, the deleted room's rows being removed with it). A room whose
    key is not cached, or not live, is looked up at its first value as before
    (``_sealing_key``: made, or refused as destroyed)."""

    def __init__(self, rooms: Collection[UUID] = ()) -> None:
        self._keys: dict[UUID, tuple[UUID, Any]] = {}
        cached: dict[UUID, tuple[UUID, Any]] = {}  # key id -> (room, key)
        for room_id in rooms:
            key_id = _keys.for_room(room_id)
            found = None if key_id is None else _keys.get(key_id)
            if key_id is not None and found is not None and found[0] == room_id:
                cached[key_id] = (room_id, found[1])
        for key_id in data_keys_live(cached):
            room_id, aead = cached[key_id]
            self._keys[room_id] = (key_id, aead)

    def seal(self, *, room_id: UUID, column: str, plaintext: bytes) -> str:
        if room_id not in self._keys:
            self._keys[room_id] = _sealing_key(room_id)
        key_id, aead = self._keys[room_id]
        nonce = os.urandom(_NONCE)
        sealed = aead.encrypt(nonce, plaintext, _aad(column, room_id))
        raw = room_id.bytes + key_id.bytes + nonce + sealed
        return SEALED_PREFIX + base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")

    def text(self, *, room_id: UUID, column: str, text: str) -> str:
        return self.seal(room_id=room_id, column=column, plaintext=text.encode("utf-8"))


def room_content_seal(*, room_id: UUID, column: str, plaintext: bytes) -> str:
    """Seal one value of ``room_id``'s ``column`` under the room's data key."""
    return RoomSealer().seal(room_id=room_id, column=column, plaintext=plaintext)


def is_sealed(value: str) -> bool:
    return value.startswith(SEALED_PREFIX)


def room_content_open(*, sealed: str, column: str, room_id: UUID | None = None) -> bytes:
    """Open a sealed value of ``column``. ``room_id``: the room of the row it was read from
    (raw SQL readers pass it): a value sealed for another room is refused. Raises
    ``DataKeyDestroyed`` (a deleted room), ``DataKeyMissing`` (a key store that does not
    belong with this database) or ``RoomContentRefused`` (tampered, moved)."""
    raw = _open(sealed)
    room_raw, key_raw = raw[:16], raw[16:32]
    if room_id is not None and room_raw != room_id.bytes:
        raise _refused("it was sealed for another room")
    aead = _opening_key_in_hop(key_raw, room_raw)
    try:
        return bytes(aead.decrypt(raw[32:_HEAD], raw[_HEAD:], _aad_raw(column, room_raw)))
    except InvalidTag:
        raise _refused("it was altered, or copied from another column") from None


def room_texts_open(values: Sequence[str], *, column: str, room_id: UUID) -> list[str]:
    """Texts of ``room_id``'s sealed text ``column`` as raw SQL read them (a turn's messages),
    each opened by ``room_content_open(room_id=...)`` and decoded, in order; a legacy
    unsealed value reads as it is."""
    return [
        room_content_open(sealed=value, column=column, room_id=room_id).decode("utf-8")
        if is_sealed(value)
        else value
        for value in values
    ]


# base64url to the standard alphabet, as base64.urlsafe_b64decode translates it.
_URLSAFE_TO_STANDARD = bytes.maketrans(b"-_", b"+/")


def _open(sealed: str) -> bytes:
    """The sealed value's bytes: room id, key id, nonce (``_HEAD``), then the ciphertext."""
    if not is_sealed(sealed):
        raise _refused("it is not sealed")
    encoded = sealed[len(SEALED_PREFIX) :]
    try:
        # base64.urlsafe_b64decode's own steps (ASCII only, the URL-safe alphabet translated,
        # a non-strict decode) without its two layers of argument coercion: a turn opens
        # some twenty values.
        raw = binascii.a2b_base64(
            (encoded + "=" * (-len(encoded) % 4)).encode("ascii").translate(_URLSAFE_TO_STANDARD)
        )
    except (binascii.Error, ValueError):
        raise _refused("it is malformed") from None
    if len(raw) < _HEAD + 16:  # the GCM tag alone is 16 bytes
        raise _refused("it is cut short")
    return raw


def sealed_room(sealed: str) -> UUID:
    """The room a sealed value says it belongs to (no key needed, nothing decrypted)."""
    return UUID(bytes=_open(sealed)[:16])


def room_text_open(value: str, *, column: str, room_id: UUID | None = None) -> OpenedText:
    """Text of a sealed text column (a legacy unsealed row reads as it is)."""
    if not is_sealed(value):
        return OpenedText(value, room_id)
    plain = room_content_open(sealed=value, column=column, room_id=room_id)
    return OpenedText(plain.decode("utf-8"), sealed_room(value))


class OpenedText(str):
    """Opened text that remembers the room it was sealed for, so a model row can check it is
    that room's (``SealedContent.from_db``). ``None``: a legacy unsealed row."""

    sealed_for: UUID | None

    def __new__(cls, value: str, sealed_for: UUID | None) -> OpenedText:
        text = super().__new__(cls, value)
        text.sealed_for = sealed_for
        return text


def opened_for_room(texts: Any, *, room_id: UUID) -> list[str]:
    """Texts of a sealed column read with ``values_list`` (no model row to check them), each
    checked to have been sealed for ``room_id``: one copied from another room is refused."""
    opened = list(texts)
    for text in opened:
        sealed_for = getattr(text, "sealed_for", None)
        if sealed_for is not None and sealed_for != room_id:
            raise _refused("it was sealed for another room")
    return opened


class OpenedJSON(dict[str, Any]):
    """An opened JSON object (sealed offers are objects), with its room, as ``OpenedText``."""

    sealed_for: UUID | None = None


# --- model fields --------------------------------------------------------------------------


class SealedValue(str):
    """A value already sealed in ``pre_save``: the only kind a sealed column writes."""


class _SealedField(models.TextField):
    """Base of the sealed columns: the row's room (``room_field``: the attribute holding its
    id, ``room_id`` but on the room itself) picks the key; ``sealed_as`` names the column in
    the associated data (stable across table or column renames)."""

    def __init__(self, *args: Any, sealed_as: str, room_field: str = "room_id", **kwargs: Any):
        self.sealed_as = sealed_as
        self.room_field = room_field
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        kwargs["sealed_as"] = self.sealed_as
        if self.room_field != "room_id":
            kwargs["room_field"] = self.room_field
        return name, path, args, kwargs

    def _plaintext(self, value: Any) -> bytes:
        raise NotImplementedError

    def room_of(self, model_instance: models.Model) -> UUID | None:
        """The room whose key seals this row's value (None: the row names no room yet)."""
        room_id = getattr(model_instance, self.room_field, None)
        if room_id is None or isinstance(room_id, UUID):
            return room_id
        return UUID(str(room_id))

    def pre_save(self, model_instance: models.Model, add: bool) -> Any:
        value = getattr(model_instance, self.attname)
        if value is None:
            return None
        room_id = self.room_of(model_instance)
        if room_id is None:  # no room, no key: never stored in plaintext instead
            raise _refused("it belongs to no room, so there is no key to seal it under")
        return SealedValue(
            room_content_seal(
                room_id=room_id, column=self.sealed_as, plaintext=self._plaintext(value)
            )
        )

    def get_prep_value(self, value: Any) -> Any:
        if value is None or isinstance(value, SealedValue):
            return None if value is None else str(value)
        raise _refused(
            "room content is written through its model (create, save, bulk_create), which "
            "seals it; a bare value (a queryset update, a lookup) is refused"
        )

    def to_python(self, value: Any) -> Any:
        return value


class SealedTextField(_SealedField):
    """Text sealed under the row's room key; reads back as text."""

    def _plaintext(self, value: Any) -> bytes:
        return str(value).encode("utf-8")

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if value is None:
            return None
        return room_text_open(str(value), column=self.sealed_as)


class SealedJSONField(_SealedField):
    """A JSON value sealed under the row's room key; reads back as the value."""

    # What django-stubs reads as the attribute's types (any JSON value, as JSONField).
    _pyi_private_set_type: Any
    _pyi_private_get_type: Any

    def _plaintext(self, value: Any) -> bytes:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if value is None:
            return None
        text = str(value)
        if not is_sealed(text):
            return json.loads(text)  # a legacy unsealed row (the JSON of before)
        loaded = json.loads(room_content_open(sealed=text, column=self.sealed_as))
        if isinstance(loaded, dict):
            opened = OpenedJSON(loaded)
            opened.sealed_for = sealed_room(text)
            return opened
        return loaded


class SealedAtRest(str):
    """A sealed value as it is stored, not opened yet: what a ``SealedTextOnReadField`` holds
    on a row until its attribute is first read (and what ``values()`` of it returns)."""


class _OpenedOnRead(DeferredAttribute):
    """Opens the field's sealed value the first time the attribute is read on an instance
    (then keeps the opened text on it); a deferred field loads first, as Django's does. A data
    descriptor (``__set__``), so the instance's stored value never shadows it."""

    field: SealedTextOnReadField

    def __set__(self, instance: Any, value: Any) -> None:
        instance.__dict__[self.field.attname] = value

    def __get__(self, instance: Any, cls: Any = None) -> Any:
        if instance is None:
            return self
        value = super().__get__(instance, cls)
        if isinstance(value, SealedAtRest):
            value = room_text_open(
                str(value), column=self.field.sealed_as, room_id=self.field.room_of(instance)
            )
            instance.__dict__[self.field.attname] = value
        return value


class SealedTextOnReadField(SealedTextField):
    """Text sealed under the row's room key, opened only when the attribute is read: for a
    row loaded often for other columns (the room itself, locked and read on every action and
    every owner's request), so a load costs no key and a deleted room's row restored from a
    backup still loads (its state, its deletion) while its text fails closed where it is read.
    ``values()`` / ``values_list()`` of the column return the sealed value: read the
    attribute. A value copied from another room's row is refused when read."""

    descriptor_class = _OpenedOnRead

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if value is None:
            return None
        text = str(value)
        return SealedAtRest(text) if is_sealed(text) else OpenedText(text, None)

    def pre_save(self, model_instance: models.Model, add: bool) -> Any:
        stored = model_instance.__dict__.get(self.attname)
        if isinstance(stored, SealedAtRest):  # never opened, so unchanged: written as it was
            return SealedValue(stored)
        return super().pre_save(model_instance, add)


class SealedContent(models.Model):
    """A model with sealed columns and a ``room`` foreign key: a row whose sealed value was
    sealed for another room (copied across rooms in the database) is refused when loaded."""

    class Meta:
        abstract = True

    @classmethod
    def from_db(
        cls, db: str | None, field_names: Collection[str], values: Collection[Any], **kwargs: Any
    ) -> Self:
        instance = super().from_db(db, field_names, values, **kwargs)
        room_id = instance.__dict__.get("room_id")  # deferred: no extra query to check
        if room_id is None:
            return instance
        for field in cls._meta.concrete_fields:
            if isinstance(field, _SealedField):
                value = instance.__dict__.get(field.attname)
                sealed_for = getattr(value, "sealed_for", None)
                if sealed_for is not None and sealed_for != room_id:
                    raise _refused("it was sealed for another room")
        return instance


# --- sealing what was stored before (the 0013 migration, ``seal_room_content``) ----------

# The columns that hold room content; each is sealed once its field is a sealed one (in the
# model state the caller passes: a migration's historical models, or the live ones).
CONTENT_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("rooms", "Message", "text"),
    ("rooms", "Whisper", "text"),
    ("rooms", "SealedOffer", "offer"),
    # The room's own words and its booked plan (rooms 0015).
    ("rooms", "Room", "purpose"),
    ("rooms", "Room", "charter"),
    ("rooms", "RoomOutcome", "plan"),
    # Tool-call arguments and outcomes (gatekeeper 0005-0008) and exit notes (stewards 0002).
    ("gatekeeper", "ActionRecord", "arguments"),
    ("gatekeeper", "ActionRecord", "outcome"),
    ("gatekeeper", "SandboxEffect", "arguments"),
    ("gatekeeper", "SandboxEffect", "output"),
    ("gatekeeper", "WebhookDelivery", "body"),
    ("stewards", "ExitNote", "text"),
)
_BATCH = 500


@dataclass(frozen=True)
class _Column:
    label: str  # "rooms.Message.text"
    table: str
    pk: str  # the primary key's column
    room: str  # the column holding the row's room id (the room's own id on the room)
    column: str  # the sealed column
    sealed_as: str  # its name in the associated data


def _columns(get_model: Any, only: Collection[str] | None = None) -> list[_Column]:
    """Each sealed column (``only``: of these models, ``"rooms.Message"``...) in the model
    state given: a migration's historical models, or the live ones."""
    from django.core.exceptions import FieldDoesNotExist

    found = []
    for app, name, field_name in CONTENT_COLUMNS:
        if only is not None and f"{app}.{name}" not in only:
            continue
        try:
            meta = get_model(app, name)._meta
            field = meta.get_field(field_name)
        except (LookupError, FieldDoesNotExist):  # a state without that app, model or column
            continue
        if not isinstance(field, _SealedField):
            continue
        room = next(f for f in meta.concrete_fields if f.attname == field.room_field)
        found.append(
            _Column(
                label=f"{app}.{name}.{field_name}",
                table=meta.db_table,
                pk=meta.pk.column,
                room=str(room.column),
                column=str(field.column),
                sealed_as=field.sealed_as,
            )
        )
    return found


def _room(value: Any) -> UUID:
    return value if isinstance(value, UUID) else UUID(str(value))


def _rows_by_batch(connection: Any, c: _Column, *, sealed: bool) -> Iterator[list[Any]]:
    """(pk, room id, value) of column ``c``'s rows that are sealed (or not), ``_BATCH`` at a
    time in pk order. Each batch is read after the previous one was written back, so a row
    rewritten from one kind to the other is not met again."""
    q = connection.ops.quote_name
    last: Any = None
    while True:
        # SUBSTR, not LIKE: SQLite's LIKE ignores case.
        where = f"SUBSTR({q(c.column)}, 1, 4) {'=' if sealed else '<>'} %s" + (
            f" AND {q(c.pk)} > %s" if last is not None else ""
        )
        params: list[Any] = [SEALED_PREFIX] + ([last] if last is not None else [])
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {q(c.pk)}, {q(c.room)}, {q(c.column)} FROM {q(c.table)} "  # noqa: S608
                f"WHERE {where} ORDER BY {q(c.pk)} LIMIT {_BATCH}",
                params,
            )
            rows = cursor.fetchall()
        if not rows:
            return
        yield rows
        last = rows[-1][0]


def _row_write(connection: Any, c: _Column, row_pk: Any, value: str) -> None:
    q = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {q(c.table)} SET {q(c.column)} = %s WHERE {q(c.pk)} = %s",  # noqa: S608
            [value, row_pk],
        )


def room_content_seal_existing(
    get_model: Any, connection: Any, write: Any = None, only: Collection[str] | None = None
) -> dict[str, int]:
    """Seal every row of every sealed column still in plaintext (written before sealing),
    500 at a time, under its room's key; returns how many per column. Raw SQL on purpose: a
    plaintext value cannot go through the sealed fields (they refuse it). Run again after an
    interruption: sealed rows are skipped. A row of a room whose key was destroyed (a restored
    backup of a deleted room) cannot be sealed: it is left for ``reapply_deletions``."""
    counts: dict[str, int] = {}
    for c in _columns(get_model, only):
        sealed = 0
        for rows in _rows_by_batch(connection, c, sealed=False):
            sealer = RoomSealer()
            for row_pk, room_id, value in rows:
                if room_id is None or value is None:
                    continue  # no room, no key (it stays as it is); nothing to seal
                try:
                    token = sealer.text(room_id=_room(room_id), column=c.sealed_as, text=str(value))
                except DataKeyDestroyed:
                    continue
                _row_write(connection, c, row_pk, token)
                sealed += 1
            if write is not None:
                write(f"{c.label}: {sealed} sealed so far")
        counts[c.label] = sealed
    return counts


def room_content_unseal_existing(
    get_model: Any, connection: Any, write: Any = None, only: Collection[str] | None = None
) -> dict[str, int]:
    """The reverse of ``room_content_seal_existing`` (migrating back): every sealed value
    opened and written back in plaintext. A row under a destroyed key stays sealed (it can
    never be opened: it is deleted content a restore brought back); counted apart."""
    counts: dict[str, int] = {}
    for c in _columns(get_model, only):
        opened = unreadable = 0
        for rows in _rows_by_batch(connection, c, sealed=True):
            for row_pk, room_id, value in rows:
                try:
                    plain = room_content_open(
                        sealed=str(value), column=c.sealed_as, room_id=_room(room_id)
                    )
                except DataKeyDestroyed:
                    unreadable += 1
                    continue
                _row_write(connection, c, row_pk, plain.decode("utf-8"))
                opened += 1
        counts[c.label] = opened
        if write is not None and unreadable:
            write(f"{c.label}: {unreadable} left sealed under destroyed keys")
    return counts


def _key_store_opens() -> bool:
    import sqlite3

    from slips.datakeys import key_store_path

    try:
        key_store_path().parent.mkdir(parents=True, exist_ok=True)
        sqlite3.connect(key_store_path()).close()
    except (OSError, sqlite3.Error):
        return False
    return True


def _migration_write(line: str) -> None:
    import sys

    sys.stdout.write(f"\n  {line}")
    sys.stdout.flush()


def migration_steps(*models: str) -> tuple[Any, Any]:
    """A data migration's ``RunPython`` pair for ``models`` ("rooms.Message", ...): forward
    seals what their sealed columns still hold in plaintext, backward writes it back in
    plaintext (but values under destroyed keys, which can never be opened). Where the key
    store cannot be opened (a migrate Job without its volume) forward leaves the rows, still
    readable as they were, and says to run ``python manage.py seal_room_content`` where it is
    mounted; every new write is sealed regardless."""

    def seal(apps: Any, schema_editor: Any) -> None:
        if not _key_store_opens():
            from slips.datakeys import key_store_path

            _migration_write(
                f"room content left unsealed: the key store {key_store_path()} cannot be "
                "opened here. Run `python manage.py seal_room_content` where it is mounted."
            )
            return
        room_content_seal_existing(
            apps.get_model, schema_editor.connection, _migration_write, only=models
        )

    def unseal(apps: Any, schema_editor: Any) -> None:
        room_content_unseal_existing(
            apps.get_model, schema_editor.connection, _migration_write, only=models
        )

    return seal, unseal

"""The key hierarchy: per-owner (and, next, per-room) data keys, wrapped by a master key, kept
in a key store OUTSIDE the database (boundary spec, "Data": deleting destroys the key).

- A **data key** is 32 random bytes (AES-256-GCM), one per subject: ``owner`` (the vault) or
  ``room`` (room content: ready here, not used yet). Content sealed under it names the key by
  its id, so a reader finds the key without knowing who made it.
- Each data key is stored **wrapped** (AES-256-GCM) under the **master key** from the
  environment (``SYNAPSIA_MASTER_KEY``, or ``SYNAPSIA_VAULT_KEY`` as before; the embedded
  profile derives one from ``SECRET_KEY``). The row records which master key wrapped it (its
  fingerprint), so rotating is: set the new master key, list the old one in
  ``SYNAPSIA_MASTER_KEYS_RETIRED``, run ``python manage.py rewrap_data_keys``, drop the old one.
  The wrapping binds the key id, kind and subject as associated data: a wrapped key copied to
  another subject's row does not unwrap.
- The **key store** is its own SQLite file (``SYNAPSIA_KEY_STORE_PATH``, default
  ``var/keys.sqlite3``), not a table of the application database, so a database backup does
  not contain the keys: destroying a key (an account's deletion) makes that subject's content
  in every older database backup unreadable. Destroying leaves a tombstone (no key material),
  so a reader is told "destroyed", not "missing".

Owners are named by id AND the moment they joined: a restore rewinds the id sequence, and a
later signup with a deleted owner's id must get a fresh key, not the tombstone.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import sqlite3
import threading
import uuid
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from django.conf import settings

from slips.config import slips_setting
from slips.errors import Misconfigured

KeyKind = Literal["owner", "room"]
KEY_BYTES = 32
_WRAP_AAD = b"synapsia-datakey-wrap-v1|"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS data_keys (
    key_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    subject TEXT NOT NULL,
    subject_since TEXT NOT NULL,
    master_id TEXT,
    wrapped BLOB,
    created_at TEXT NOT NULL,
    destroyed_at TEXT,
    UNIQUE (kind, subject, subject_since)
)
"""


class DataKeyDestroyed(Misconfigured):
    """The subject's data key was destroyed (its account or room was deleted): what was
    sealed under it can never be opened again. Fails closed."""

    status = 410


class DataKeyMissing(Misconfigured):
    """No such data key in the key store: the key store is not the one this database was
    written with (restored without it, or pointed elsewhere). Fails closed."""


# --- the master key ------------------------------------------------------------------------


@dataclass(frozen=True)
class MasterKey:
    id: str  # fingerprint (16 hex), recorded on every key it wraps
    wrapping: bytes  # AES-256 key derived for wrapping data keys
    material: bytes  # what was configured (the legacy vault key derives from it)


def _hkdf(material: bytes, info: bytes) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(material)


def _decode(value: str, variable: str) -> bytes:
    try:
        material = base64.b64decode(value + "=" * (-len(value) % 4), altchars=b"-_")
    except (binascii.Error, ValueError):
        raise Misconfigured("vault_key", f"{variable} is not base64.") from None
    if len(material) < 32:
        raise Misconfigured("vault_key", f"{variable} must hold 32+ random bytes.")
    return material


@functools.lru_cache(maxsize=8)
def _master(material: bytes) -> MasterKey:
    """The master key ``material`` configures: its fingerprint and wrapping key, derived once
    per process per material (two HKDFs were a seventh of opening a turn's vault items). A pure
    function of the configured bytes, decided nothing: the configuration is still read on every
    call (``master_key_current``), so a changed or retired key is seen at once; the store's
    wrapped keys, their owners and their destroyed marks are read on every open."""
    fingerprint = _hkdf(material, b"synapsia-master-id-v1")[:8].hex()
    return MasterKey(
        id=fingerprint, wrapping=_hkdf(material, b"synapsia-master-wrap-v1"), material=material
    )


def master_key_current() -> MasterKey:
    """The master key new wraps use: ``SYNAPSIA_MASTER_KEY``, else ``SYNAPSIA_VAULT_KEY``; on
    the embedded profile without either, one derived from ``SECRET_KEY``. Production never
    falls back (the settings refuse to start without one, and this refuses too)."""
    configured = slips_setting("MASTER_KEY") or slips_setting("VAULT_KEY")
    if configured:
        name = "SYNAPSIA_MASTER_KEY" if slips_setting("MASTER_KEY") else "SYNAPSIA_VAULT_KEY"
        return _master(_decode(configured, name))
    if settings.PROFILE == "embedded":
        return _master(settings.SECRET_KEY.encode())
    raise Misconfigured(
        "vault_key",
        "The vault is unavailable: SYNAPSIA_MASTER_KEY (or SYNAPSIA_VAULT_KEY) is unset.",
    )


def master_keys() -> list[MasterKey]:
    """The current master key, then the retired ones (``SYNAPSIA_MASTER_KEYS_RETIRED``,
    comma-separated), which still unwrap until ``rewrap_data_keys`` has run."""
    keys = [master_key_current()]
    for value in str(slips_setting("MASTER_KEYS_RETIRED") or "").split(","):
        if value.strip():
            retired = _master(_decode(value.strip(), "SYNAPSIA_MASTER_KEYS_RETIRED"))
            if retired.id not in {k.id for k in keys}:
                keys.append(retired)
    return keys


# --- the key store -------------------------------------------------------------------------

_local = threading.local()


def key_store_path() -> Path:
    return Path(slips_setting("KEY_STORE_PATH"))


@contextmanager
def _store() -> Iterator[sqlite3.Connection]:
    """One connection per thread and path, in autocommit; each write is its own transaction
    (the key store is not the database: it does not roll back with it)."""
    yield _connection()


def _connection() -> sqlite3.Connection:
    # The path as configured is the cache key: no Path object on the hot path (the destroyed
    # mark is re-read before every use of a cached room key, so this runs per message read).
    where = str(slips_setting("KEY_STORE_PATH"))
    connections: dict[str, sqlite3.Connection] | None = getattr(_local, "connections", None)
    if connections is None:
        connections = _local.connections = {}
    conn = connections.get(where)
    if conn is None:
        path = Path(where)
        path.parent.mkdir(parents=True, exist_ok=True)
        fresh = not path.exists()
        conn = sqlite3.connect(path, timeout=10, isolation_level=None, check_same_thread=False)
        if fresh:
            os.chmod(path, 0o600)
        # A rollback journal, not WAL: the store may sit on a volume several hosts mount
        # (WAL needs shared memory on one host), and a plain copy of the file is then whole.
        # (If another process holds it in WAL, switching needs it alone: it works as it is.)
        with suppress(sqlite3.OperationalError):
            conn.execute("PRAGMA journal_mode=DELETE")
        conn.execute("PRAGMA secure_delete=ON")  # a destroyed key's bytes are overwritten
        conn.execute(_SCHEMA)
        connections[where] = conn
    return conn


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _wrap_aad(key_id: str, kind: str, subject: str) -> bytes:
    return _WRAP_AAD + f"{key_id}|{kind}|{subject}".encode()


def _wrap(master: MasterKey, key: bytes, aad: bytes) -> bytes:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = os.urandom(12)
    return nonce + AESGCM(master.wrapping).encrypt(nonce, key, aad)


def _unwrap(master_id: str, wrapped: bytes, aad: bytes) -> bytes:
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    for master in master_keys():
        if master.id == master_id:
            try:
                return AESGCM(master.wrapping).decrypt(wrapped[:12], wrapped[12:], aad)
            except InvalidTag:
                break
    raise Misconfigured(
        "vault_key",
        "A data key was wrapped by a master key that is not configured: set it as "
        "SYNAPSIA_MASTER_KEY or list it in SYNAPSIA_MASTER_KEYS_RETIRED.",
    )


@dataclass(frozen=True)
class DataKey:
    id: uuid.UUID
    kind: KeyKind
    subject: str
    key: bytes


def data_key_for(*, kind: KeyKind, subject: str, since: str) -> DataKey:
    """The subject's data key, made (and stored wrapped) the first time it is asked for.
    ``since`` tells apart subjects that share an id (an owner's ``date_joined``; a room's
    id is unique, so ``""``). ``DataKeyDestroyed`` if that subject's key was destroyed."""
    master = master_key_current()
    with _store() as store:
        row = store.execute(
            "SELECT key_id, master_id, wrapped FROM data_keys "
            "WHERE kind = ? AND subject = ? AND subject_since = ?",
            (kind, subject, since),
        ).fetchone()
        if row is None:
            key_id, key = str(uuid.uuid4()), os.urandom(KEY_BYTES)
            wrapped = _wrap(master, key, _wrap_aad(key_id, kind, subject))
            # Two processes making the first key at once: one insert wins, both read it back.
            store.execute(
                "INSERT OR IGNORE INTO data_keys (key_id, kind, subject, subject_since, "
                "master_id, wrapped, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (key_id, kind, subject, since, master.id, wrapped, _now()),
            )
            row = store.execute(
                "SELECT key_id, master_id, wrapped FROM data_keys "
                "WHERE kind = ? AND subject = ? AND subject_since = ?",
                (kind, subject, since),
            ).fetchone()
    key_id, master_id, wrapped = row
    if wrapped is None:
        raise _destroyed(kind)
    return DataKey(
        id=uuid.UUID(key_id),
        kind=kind,
        subject=subject,
        key=_unwrap(master_id, bytes(wrapped), _wrap_aad(key_id, kind, subject)),
    )


# What a key's row says, as ``data_keys_read`` returns it: kind, subject, master id, wrapped.
StoredKey = tuple[str, str, str | None, bytes | None]


def data_keys_read(key_ids: Collection[uuid.UUID]) -> dict[str, StoredKey]:
    """The key store's rows for ``key_ids`` (by key id as text), in one read: for a reader
    that opens several keys at one moment (a context turn, each owner's key) and then hands
    each row to ``data_key_open``, which checks it as it checks a row it reads itself. A key
    not in the store is simply absent (``data_key_open`` then says it is missing)."""
    wanted = sorted({str(k) for k in key_ids})
    if not wanted:
        return {}
    marks = ", ".join("?" * len(wanted))
    rows = _connection().execute(
        "SELECT key_id, kind, subject, master_id, wrapped FROM data_keys "  # noqa: S608
        f"WHERE key_id IN ({marks})",
        wanted,
    )
    return {
        str(key_id): (kind, subject, master, wrapped)
        for key_id, kind, subject, master, wrapped in rows
    }


def data_key_open(
    key_id: uuid.UUID,
    *,
    kind: KeyKind,
    subject: str,
    read: Mapping[str, StoredKey] | None = None,
) -> bytes:
    """The key ``key_id`` names, if it is ``subject``'s: content names its key by id, and a
    key of another subject (a row moved between owners) is refused. ``read``: the rows a
    ``data_keys_read`` of this moment returned (then the store is not read again)."""
    if read is not None:
        row: StoredKey | None = read.get(str(key_id))
    else:
        with _store() as store:
            row = store.execute(
                "SELECT kind, subject, master_id, wrapped FROM data_keys WHERE key_id = ?",
                (str(key_id),),
            ).fetchone()
    if row is None:
        raise DataKeyMissing(
            "data_key_missing",
            "This content's data key is not in the key store. Restore the key store that "
            "belongs with this database (SYNAPSIA_KEY_STORE_PATH); nothing was decrypted.",
        )
    stored_kind, stored_subject, master_id, wrapped = row
    if (stored_kind, stored_subject) != (kind, subject):
        raise Misconfigured("vault_sealed", "This content is sealed under another owner's key.")
    if wrapped is None:
        raise _destroyed(kind)
    # A row without a master id names no master key: refused by _unwrap as unconfigured.
    return _unwrap(master_id or "", bytes(wrapped), _wrap_aad(str(key_id), kind, subject))


def data_key_live(key_id: uuid.UUID) -> bool:
    """Whether ``key_id`` is in the key store and not destroyed: one indexed read, no unwrap.

    What a process cache of *key material* (rooms.sealing) re-checks before every use, so a
    key destroyed by another process is refused at once; it decides no permission (the
    Gatekeeper decides every read), it only tells whether the key still exists."""
    row = (
        _connection()
        .execute("SELECT wrapped IS NOT NULL FROM data_keys WHERE key_id = ?", (str(key_id),))
        .fetchone()
    )
    return bool(row and row[0])


# Key ids per read of ``data_keys_live`` (SQLite's limit on a statement's variables is 32,766).
_LIVE_PER_READ = 500


def data_keys_live(key_ids: Collection[uuid.UUID]) -> set[uuid.UUID]:
    """``data_key_live`` for several keys at one moment (a say hop's rooms), in one read per
    ``_LIVE_PER_READ``: the ones in the key store and not destroyed."""
    wanted = {str(k): k for k in key_ids}
    names = sorted(wanted)
    live: set[uuid.UUID] = set()
    for start in range(0, len(names), _LIVE_PER_READ):
        chunk = names[start : start + _LIVE_PER_READ]
        marks = ", ".join("?" * len(chunk))
        rows = _connection().execute(
            f"SELECT key_id FROM data_keys WHERE key_id IN ({marks}) AND wrapped IS NOT NULL",  # noqa: S608
            chunk,
        )
        live.update(wanted[key_id] for (key_id,) in rows)
    return live


def _destroyed(kind: KeyKind) -> DataKeyDestroyed:
    whose = "this owner's" if kind == "owner" else "this room's"
    return DataKeyDestroyed(
        "data_key_destroyed",
        f"This content cannot be read: {whose} data key was destroyed when it was deleted.",
    )


def data_keys_destroy(*, kind: KeyKind, subject: str, since: str | None = None) -> int:
    """Destroy the subject's data key(s) (every ``since`` if None): the wrapped key is
    overwritten and a tombstone stays. Not undone by any database rollback or restore; the
    caller destroys only once the deletion is decided (journalled). Idempotent."""
    query = "UPDATE data_keys SET wrapped = NULL, master_id = NULL, destroyed_at = ? "
    query += "WHERE kind = ? AND subject = ? AND wrapped IS NOT NULL"
    args: list[str] = [_now(), kind, subject]
    if since is not None:
        query += " AND subject_since = ?"
        args.append(since)
    with _store() as store:
        destroyed = store.execute(query, args).rowcount
        if since is not None:
            # A tombstone even for a subject that never had a key: a later write under it is
            # refused rather than given a fresh key.
            store.execute(
                "INSERT OR IGNORE INTO data_keys (key_id, kind, subject, subject_since, "
                "created_at, destroyed_at) VALUES (?, ?, ?, ?, ?, ?)",
                (str(uuid.uuid4()), kind, subject, since, _now(), _now()),
            )
    return int(destroyed)


def owner_since(date_joined: datetime) -> str:
    return date_joined.isoformat()


@dataclass(frozen=True)
class Rewrapped:
    rewrapped: int
    current: int  # already under the current master key
    destroyed: int  # tombstones (nothing to wrap)
    master_id: str


def data_keys_rewrap() -> Rewrapped:
    """Re-wrap every data key under the current master key (content is not re-encrypted).
    Each key is unwrapped with the master key that wrapped it (current or retired) and written
    back in its own transaction, so an interrupted run can simply be run again."""
    master = master_key_current()
    rewrapped = current = destroyed = 0
    with _store() as store:
        rows = store.execute(
            "SELECT key_id, kind, subject, master_id, wrapped FROM data_keys"
        ).fetchall()
        for key_id, kind, subject, master_id, wrapped in rows:
            if wrapped is None:
                destroyed += 1
                continue
            if master_id == master.id:
                current += 1
                continue
            aad = _wrap_aad(key_id, kind, subject)
            key = _unwrap(master_id, bytes(wrapped), aad)
            store.execute(
                "UPDATE data_keys SET master_id = ?, wrapped = ? WHERE key_id = ? "
                "AND master_id = ?",
                (master.id, _wrap(master, key, aad), key_id, master_id),
            )
            rewrapped += 1
    return Rewrapped(rewrapped=rewrapped, current=current, destroyed=destroyed, master_id=master.id)


def data_keys_by_master() -> dict[str | None, int]:
    """How many keys each master key wraps (None: destroyed), for the command's report."""
    with _store() as store:
        rows = store.execute("SELECT master_id, COUNT(*) FROM data_keys GROUP BY master_id")
        return {master_id: int(count) for master_id, count in rows.fetchall()}

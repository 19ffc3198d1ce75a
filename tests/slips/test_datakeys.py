"""The key hierarchy: per-owner data keys wrapped by a master key in a key store outside the
database; rotation re-wraps without re-encrypting; an account's deletion destroys its key."""

from __future__ import annotations

import base64
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from slips.datakeys import (
    DataKeyDestroyed,
    DataKeyMissing,
    data_key_for,
    data_keys_destroy,
    master_key_current,
)
from slips.errors import Misconfigured
from slips.models import VaultItem
from slips.vault import (
    OWNER_SEAL_VERSION,
    _aad,
    _legacy_keys,
    vault_item_create,
    vault_open,
    vault_reseal,
)

pytestmark = pytest.mark.django_db

CANARY = "canary-7f3a-vault-note"
KEY_A = base64.b64encode(b"A" * 32).decode()
KEY_B = base64.b64encode(b"B" * 32).decode()


@pytest.fixture(autouse=True)
def key_store(tmp_path: Path, settings: Any) -> Path:
    path = tmp_path / "keys.sqlite3"
    settings.SLIPS = {**settings.SLIPS, "KEY_STORE_PATH": str(path), "MASTER_KEY": KEY_A}
    return path


def _note(owner: Any, text: str = CANARY) -> VaultItem:
    return vault_item_create(owner=owner, content={"kind": "note", "text": text})


def test_an_item_is_sealed_under_its_owners_data_key_kept_outside_the_database(
    make_owner, key_store: Path
) -> None:
    alice, bob = make_owner("alice"), make_owner("bob")
    a, b = _note(alice), _note(bob)
    assert bytes(a.sealed)[:1] == OWNER_SEAL_VERSION
    assert vault_open(a).text == CANARY  # type: ignore[attr-defined]
    # Two owners, two keys: the key id each blob names differs.
    assert bytes(a.sealed)[1:17] != bytes(b.sealed)[1:17]
    with sqlite3.connect(key_store) as store:
        rows = store.execute("SELECT kind, subject, master_id, wrapped FROM data_keys").fetchall()
    assert sorted(r[1] for r in rows) == sorted([str(alice.pk), str(bob.pk)])
    assert {r[2] for r in rows} == {master_key_current().id}
    # The database holds no table of keys.
    assert not [t for t in connection.introspection.table_names() if "key" in t and "data" in t]


def test_a_row_swapped_to_another_owner_does_not_open(make_owner) -> None:
    alice, bob = make_owner("alice"), make_owner("bob")
    a, b = _note(alice), _note(bob, "bob's")
    VaultItem.objects.filter(id=b.id).update(sealed=bytes(a.sealed))
    with pytest.raises(Misconfigured):
        vault_open(VaultItem.objects.get(id=b.id))
    # Nor does alice's blob moved to alice's other item (the item id is authenticated).
    other = _note(alice, "other")
    VaultItem.objects.filter(id=other.id).update(sealed=bytes(a.sealed))
    with pytest.raises(Misconfigured):
        vault_open(VaultItem.objects.get(id=other.id))


def test_rotation_rewraps_every_key_and_content_still_opens(
    make_owner, settings: Any, key_store: Path
) -> None:
    alice = make_owner("alice")
    item = _note(alice)
    sealed_before = bytes(item.sealed)
    # New master key without the old one listed: the keys cannot be unwrapped (fail closed).
    settings.SLIPS = {**settings.SLIPS, "MASTER_KEY": KEY_B, "MASTER_KEYS_RETIRED": ""}
    with pytest.raises(Misconfigured) as caught:
        vault_open(VaultItem.objects.get(id=item.id))
    assert "SYNAPSIA_MASTER_KEYS_RETIRED" in caught.value.message
    # Listed as retired: still opens; the command re-wraps under the new one.
    settings.SLIPS = {**settings.SLIPS, "MASTER_KEYS_RETIRED": KEY_A}
    assert vault_open(VaultItem.objects.get(id=item.id)).text == CANARY  # type: ignore[attr-defined]
    call_command("rewrap_data_keys")
    # The retired key dropped: everything opens, and the content was not re-encrypted.
    settings.SLIPS = {**settings.SLIPS, "MASTER_KEYS_RETIRED": ""}
    row = VaultItem.objects.get(id=item.id)
    assert bytes(row.sealed) == sealed_before
    assert vault_open(row).text == CANARY  # type: ignore[attr-defined]
    with sqlite3.connect(key_store) as store:
        masters = {r[0] for r in store.execute("SELECT master_id FROM data_keys")}
    assert masters == {master_key_current().id}


def test_a_wrapped_key_copied_to_another_owner_does_not_unwrap(make_owner, key_store: Path) -> None:
    alice, bob = make_owner("alice"), make_owner("bob")
    _note(alice), _note(bob)
    with sqlite3.connect(key_store) as store:
        (wrapped,) = store.execute(
            "SELECT wrapped FROM data_keys WHERE subject = ?", (str(alice.pk),)
        ).fetchone()
        store.execute("UPDATE data_keys SET wrapped = ? WHERE subject = ?", (wrapped, str(bob.pk)))
    with pytest.raises(Misconfigured):
        vault_open(VaultItem.objects.get(owner=bob))


def test_deleting_the_account_destroys_its_key_and_a_copy_of_the_row_fails_closed(
    make_owner, key_store: Path
) -> None:
    from rooms.deletion import account_delete

    alice, bob = make_owner("alice"), make_owner("bob")
    kept = VaultItem.objects.get(id=_note(alice).id)
    _note(bob, "bob keeps his")
    account_delete(owner=alice)
    assert not VaultItem.objects.filter(owner_id=kept.owner_id).exists()
    # The row as an older backup holds it: its key is gone from the key store.
    with pytest.raises(DataKeyDestroyed) as caught:
        vault_open(kept)
    assert caught.value.code == "data_key_destroyed"
    assert "owner's data key was destroyed" in caught.value.message
    assert CANARY.encode() not in key_store.read_bytes()
    # Bob's vault is untouched.
    assert vault_open(VaultItem.objects.get(owner=bob)).text == "bob keeps his"  # type: ignore[attr-defined]


def test_a_later_owner_with_the_same_id_gets_a_fresh_key(make_owner) -> None:
    from datetime import timedelta

    alice = make_owner("alice")
    data_keys_destroy(kind="owner", subject=str(alice.pk), since=alice.date_joined.isoformat())
    with pytest.raises(DataKeyDestroyed):
        _note(alice)
    # The id again, joined later (a restore rewound the sequence): not the tombstone.
    later = (alice.date_joined + timedelta(days=1)).isoformat()
    assert data_key_for(kind="owner", subject=str(alice.pk), since=later).key


def test_a_database_without_its_key_store_fails_closed(make_owner, settings, tmp_path) -> None:
    item = VaultItem.objects.get(id=_note(make_owner("alice")).id)
    settings.SLIPS = {**settings.SLIPS, "KEY_STORE_PATH": str(tmp_path / "elsewhere.sqlite3")}
    with pytest.raises(DataKeyMissing):
        vault_open(item)


def test_an_item_sealed_under_the_single_key_of_before_opens_and_is_resealed(make_owner) -> None:
    import json
    import os

    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    alice = make_owner("alice")
    item = _note(alice)
    nonce = os.urandom(12)
    legacy = (
        b"\x01"
        + nonce
        + AESGCM(_legacy_keys()[0]).encrypt(
            nonce,
            json.dumps({"kind": "note", "text": CANARY}).encode(),
            _aad(owner_id=alice.pk, item_id=item.id, kind="note"),
        )
    )
    VaultItem.objects.filter(id=item.id).update(sealed=legacy)
    row = VaultItem.objects.get(id=item.id)
    assert vault_open(row).text == CANARY  # type: ignore[attr-defined]
    resealed = vault_reseal(
        blob=legacy, owner_id=alice.pk, owner_joined=alice.date_joined, item_id=item.id, kind="note"
    )
    assert resealed is not None and resealed[:1] == OWNER_SEAL_VERSION
    call_command("rewrap_data_keys")
    row = VaultItem.objects.get(id=item.id)
    assert bytes(row.sealed)[:1] == OWNER_SEAL_VERSION
    assert vault_open(row).text == CANARY  # type: ignore[attr-defined]


def test_the_migration_reseals_existing_items_in_batches(make_owner, capsys) -> None:
    import importlib

    from django.apps import apps

    migration = importlib.import_module("slips.migrations.0003_vault_per_owner_keys")
    alice = make_owner("alice")
    ids = [_note(alice, f"n{i}").id for i in range(3)]
    legacy_ids = ids[:2]
    import json
    import os

    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    for item_id in legacy_ids:
        nonce = os.urandom(12)
        VaultItem.objects.filter(id=item_id).update(
            sealed=b"\x01"
            + nonce
            + AESGCM(_legacy_keys()[0]).encrypt(
                nonce,
                json.dumps({"kind": "note", "text": "old"}).encode(),
                _aad(owner_id=alice.pk, item_id=item_id, kind="note"),
            )
        )
    migration.BATCH = 2
    migration.reseal_under_owner_keys(apps, connection.schema_editor())
    out = capsys.readouterr().out
    assert "3 of 3 checked, 2 resealed" in out
    for row in VaultItem.objects.filter(id__in=ids):
        assert bytes(row.sealed)[:1] == OWNER_SEAL_VERSION
        assert vault_open(row).text in ("old", "n2")  # type: ignore[attr-defined]


def test_production_refuses_without_a_master_key(make_owner, settings) -> None:
    settings.PROFILE = "production"
    settings.SLIPS = {**settings.SLIPS, "MASTER_KEY": "", "VAULT_KEY": ""}
    with pytest.raises(Misconfigured) as caught:
        master_key_current()
    assert caught.value.code == "vault_key"
    # The vault key of before is still accepted as the master key.
    settings.SLIPS = {**settings.SLIPS, "VAULT_KEY": KEY_B}
    assert master_key_current().id


def _sqlite_copy(source: Path, target: Path) -> None:
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)


def test_reapply_destroys_again_a_key_a_restored_key_store_brought_back(
    make_owner, key_store: Path, settings: Any, tmp_path: Path
) -> None:
    from rooms.deletion import account_delete

    settings.SYNAPSIA = {**settings.SYNAPSIA, "DELETION_JOURNAL_PATH": str(tmp_path / "j.jsonl")}
    alice = make_owner("alice")
    kept = VaultItem.objects.get(id=_note(alice).id)
    backup = tmp_path / "keys-backup.sqlite3"
    _sqlite_copy(key_store, backup)  # a key store backup from before the deletion (WAL included)
    account_delete(owner=alice)
    with pytest.raises(DataKeyDestroyed):
        vault_open(kept)
    _sqlite_copy(backup, key_store)  # the key store restored
    assert vault_open(kept).text == CANARY  # type: ignore[attr-defined]  # the key is back ...
    call_command("reapply_deletions")
    with pytest.raises(DataKeyDestroyed):
        vault_open(kept)  # ... and destroyed again by the journal's account deletion


def test_the_migration_leaves_items_readable_where_the_key_store_is_not_mounted(
    make_owner, settings, tmp_path: Path, capsys
) -> None:
    import importlib
    import json
    import os

    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from django.apps import apps

    migration = importlib.import_module("slips.migrations.0003_vault_per_owner_keys")
    alice = make_owner("alice")
    item = _note(alice)
    nonce = os.urandom(12)
    legacy = (
        b"\x01"
        + nonce
        + AESGCM(_legacy_keys()[0]).encrypt(
            nonce,
            json.dumps({"kind": "note", "text": "old"}).encode(),
            _aad(owner_id=alice.pk, item_id=item.id, kind="note"),
        )
    )
    VaultItem.objects.filter(id=item.id).update(sealed=legacy)
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    settings.SLIPS = {**settings.SLIPS, "KEY_STORE_PATH": str(blocker / "keys.sqlite3")}
    migration.reseal_under_owner_keys(apps, connection.schema_editor())
    assert "Run `python manage.py rewrap_data_keys`" in capsys.readouterr().out
    row = VaultItem.objects.get(id=item.id)
    assert bytes(row.sealed) == legacy
    assert vault_open(row).text == "old"  # type: ignore[attr-defined]


def test_master_key_derived_once_per_material_and_a_change_is_seen(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The master key's two HKDFs run once per configured material, not on every data key
    opened; the configuration is still read on every call, so a new key takes effect at once."""
    from slips import datakeys

    derived: list[bytes] = []
    real = datakeys._hkdf

    def counting(material: bytes, info: bytes) -> bytes:
        derived.append(material)
        return real(material, info)

    monkeypatch.setattr(datakeys, "_hkdf", counting)
    datakeys._master.cache_clear()
    settings.SLIPS = {**getattr(settings, "SLIPS", {}), "MASTER_KEY": KEY_A}
    first = [master_key_current() for _ in range(5)]
    assert len(derived) == 2  # fingerprint and wrapping key, once
    assert len({k.id for k in first}) == 1
    settings.SLIPS = {**settings.SLIPS, "MASTER_KEY": KEY_B}
    changed = master_key_current()
    assert changed.id != first[0].id and changed.material == b"B" * 32
    assert changed.wrapping == real(b"B" * 32, b"synapsia-master-wrap-v1")
    assert len(derived) == 4

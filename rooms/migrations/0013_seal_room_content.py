"""Seal every row of a sealed room-content column still in plaintext (as of this migration:
sealed offers; ``rooms.sealing.CONTENT_COLUMNS``) under its room's data key, 500 at a time,
printing progress. An interrupted run is simply run again (sealed rows are skipped). Where the
key store cannot be opened (a migrate Job without its volume) the rows are left, still readable
as they were, and ``python manage.py seal_room_content`` seals them where it is mounted (a web
pod); every new write is sealed regardless.

Reversible: migrating back opens every sealed value and writes it back in plaintext, except
rows under a destroyed key (deleted rooms a restore brought back), which can never be opened
and stay sealed for ``reapply_deletions`` to remove."""

from __future__ import annotations

import sys
from typing import Any

from django.db import migrations


def _key_store_opens() -> bool:
    import sqlite3

    from slips.datakeys import key_store_path

    try:
        key_store_path().parent.mkdir(parents=True, exist_ok=True)
        sqlite3.connect(key_store_path()).close()
    except (OSError, sqlite3.Error):
        return False
    return True


def _write(line: str) -> None:
    sys.stdout.write(f"\n  {line}")
    sys.stdout.flush()


def seal(apps: Any, schema_editor: Any) -> None:
    from rooms.sealing import room_content_seal_existing

    if not _key_store_opens():
        from slips.datakeys import key_store_path

        _write(
            f"room content left unsealed: the key store {key_store_path()} cannot be opened "
            "here. Run `python manage.py seal_room_content` where it is mounted (a web pod)."
        )
        return
    room_content_seal_existing(apps.get_model, schema_editor.connection, _write)


def unseal(apps: Any, schema_editor: Any) -> None:
    from rooms.sealing import room_content_unseal_existing

    room_content_unseal_existing(apps.get_model, schema_editor.connection, _write)


class Migration(migrations.Migration):
    dependencies = [("rooms", "0012_sealed_offers_and_message_time_index")]

    operations = [migrations.RunPython(seal, unseal, elidable=True)]

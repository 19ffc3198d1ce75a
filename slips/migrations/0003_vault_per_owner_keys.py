"""Reseal every vault item from the single vault key of before under its owner's data key
(``slips.datakeys``), in batches, printing progress. Content only changes its key; a run that
is interrupted is simply run again (resealed items are skipped). Where the key store cannot
be opened (a migrate Job without its volume) it leaves them, still readable, to
``rewrap_data_keys``. Reversal keeps the new seals (the code reads both versions)."""

from __future__ import annotations

import sys
from typing import Any

from django.db import migrations

BATCH = 500


def reseal_under_owner_keys(apps: Any, schema_editor: Any) -> None:
    import sqlite3

    from slips.datakeys import key_store_path
    from slips.vault import vault_reseal

    VaultItem = apps.get_model("slips", "VaultItem")
    pending = VaultItem.objects.using(schema_editor.connection.alias).order_by("id")
    total = pending.count()
    if total:
        try:
            key_store_path().parent.mkdir(parents=True, exist_ok=True)
            sqlite3.connect(key_store_path()).close()
        except (OSError, sqlite3.Error):
            # A process without the key store's volume (the Kubernetes migrate Job): the items
            # keep opening under the key of before; a process that has it reseals them.
            sys.stdout.write(
                f"\n  vault items: {total} left under the single key of before: the key store "
                f"{key_store_path()} cannot be opened here. Run `python manage.py "
                "rewrap_data_keys` where it is mounted (a web pod)."
            )
            return
    done = resealed = 0
    last = None
    while True:
        batch = pending.filter(id__gt=last) if last is not None else pending
        rows = list(batch.select_related("owner")[:BATCH])
        if not rows:
            break
        for row in rows:
            sealed = vault_reseal(
                blob=bytes(row.sealed),
                owner_id=row.owner_id,
                owner_joined=row.owner.date_joined,
                item_id=row.id,
                kind=row.kind,
            )
            if sealed is not None:
                row.sealed = sealed
                row.save(update_fields=["sealed"])
                resealed += 1
        done += len(rows)
        last = rows[-1].id
        if total:
            sys.stdout.write(f"\n  vault items: {done} of {total} checked, {resealed} resealed")
            sys.stdout.flush()


class Migration(migrations.Migration):
    dependencies = [("slips", "0002_devicekey_custody")]

    operations = [
        migrations.RunPython(reseal_under_owner_keys, migrations.RunPython.noop, elidable=True)
    ]

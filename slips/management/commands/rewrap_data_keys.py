"""``python manage.py rewrap_data_keys``: after setting a new master key
(``SYNAPSIA_MASTER_KEY``) with the old one listed in ``SYNAPSIA_MASTER_KEYS_RETIRED``, re-wrap
every data key of the key store under the new one (content is not re-encrypted), and reseal
any vault item still under the single key of before. Then the retired key can be dropped.
Safe to run again: keys already under the current master key are left alone."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from slips.datakeys import data_keys_by_master, data_keys_rewrap, key_store_path
from slips.models import VaultItem
from slips.vault import vault_reseal


class Command(BaseCommand):
    help = "Re-wrap every data key under the current master key (run after a rotation)."

    def handle(self, *args: Any, **options: Any) -> None:
        done = data_keys_rewrap()
        self.stdout.write(
            f"data keys in {key_store_path()}: {done.rewrapped} re-wrapped, {done.current} "
            f"already under master key {done.master_id}, {done.destroyed} destroyed (tombstones)"
        )
        resealed = 0
        for row in VaultItem.objects.select_related("owner").iterator(chunk_size=500):
            sealed = vault_reseal(
                blob=bytes(row.sealed),
                owner_id=row.owner_id,
                owner_joined=row.owner.date_joined,
                item_id=row.id,
                kind=row.kind,
            )
            if sealed is not None:
                VaultItem.objects.filter(id=row.id).update(sealed=sealed)
                resealed += 1
                if resealed % 500 == 0:
                    self.stdout.write(f"vault items resealed so far: {resealed}")
        if resealed:
            self.stdout.write(f"vault items resealed under their owner's data key: {resealed}")
        others = {m: n for m, n in data_keys_by_master().items() if m not in (None, done.master_id)}
        if others:
            self.stderr.write(f"keys still under another master key: {others}")
            raise SystemExit(1)
        self.stdout.write("every data key is under the current master key: drop the retired one.")

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

from django.db import migrations

from rooms.sealing import migration_steps

seal, unseal = migration_steps("rooms.SealedOffer")


class Migration(migrations.Migration):
    dependencies = [("rooms", "0012_sealed_offers_and_message_time_index")]

    operations = [migrations.RunPython(seal, unseal, elidable=True)]

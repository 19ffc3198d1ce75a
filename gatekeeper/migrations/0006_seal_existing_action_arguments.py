"""Seal every action record's and sandbox effect's arguments and outcome still in plaintext
under its room's data key, 500 at a time (where the key store cannot be opened, ``python
manage.py seal_room_content`` finishes it where it is mounted; every new write is sealed
regardless). ``arguments_hash`` / ``arguments_sha256`` stay as they are: idempotency and
contradiction checks compare hashes, never the text. A sandbox effect with no room (none is
written so since 0005) has no key to seal it under and is left as it is.

Reversible: migrating back writes every value back in plaintext (but rows under a destroyed
key: a deleted room a restore brought back, left for ``reapply_deletions``)."""

from __future__ import annotations

from django.db import migrations

from rooms.sealing import migration_steps

seal, unseal = migration_steps("gatekeeper.ActionRecord", "gatekeeper.SandboxEffect")


class Migration(migrations.Migration):
    dependencies = [("gatekeeper", "0005_seal_action_arguments")]

    operations = [migrations.RunPython(seal, unseal, elidable=True)]

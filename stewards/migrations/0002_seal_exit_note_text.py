"""Exit-note text sealed under the room's data key (``rooms.sealing``), as 0014 of rooms did
for messages and whispers: the field becomes a sealed one, then every note still in plaintext
is sealed, 500 at a time (where the key store cannot be opened, ``python manage.py
seal_room_content`` finishes it). Reversible: migrating back writes the text back first."""

from __future__ import annotations

from django.db import migrations

import rooms.sealing
from rooms.sealing import migration_steps

seal, unseal = migration_steps("stewards.ExitNote")


class Migration(migrations.Migration):
    dependencies = [
        ("stewards", "0001_initial"),
        ("rooms", "0014_seal_message_and_whisper_text"),
    ]

    operations = [
        migrations.AlterField(
            model_name="exitnote",
            name="text",
            field=rooms.sealing.SealedTextField(
                blank=True, max_length=1000, sealed_as="exit_note.text"
            ),
        ),
        migrations.RunPython(seal, unseal, elidable=True),
    ]

"""Message and whisper text sealed under the room's data key (``rooms.sealing``): the fields
become sealed ones, then every row still in plaintext is sealed, 500 at a time (as 0013 did for
sealed offers; where the key store cannot be opened, ``python manage.py seal_room_content``
finishes it). Reversible: migrating back writes the text back in plaintext first."""

from __future__ import annotations

from django.db import migrations

import rooms.sealing
from rooms.sealing import migration_steps

seal, unseal = migration_steps("rooms.Message", "rooms.Whisper")


class Migration(migrations.Migration):
    dependencies = [("rooms", "0013_seal_room_content")]

    operations = [
        migrations.AlterField(
            model_name="message",
            name="text",
            field=rooms.sealing.SealedTextField(sealed_as="message.text"),
        ),
        migrations.AlterField(
            model_name="whisper",
            name="text",
            field=rooms.sealing.SealedTextField(sealed_as="whisper.text"),
        ),
        migrations.RunPython(seal, unseal, elidable=True),
    ]

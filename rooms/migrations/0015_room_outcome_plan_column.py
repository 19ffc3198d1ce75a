"""The room's purpose and charter, and an agreed outcome's plan, sealed under the room's data key
(``rooms.sealing``), in four migrations, each of schema or of data only (PostgreSQL refuses to
alter a table that rows were written to earlier in the same transaction): 0015 adds the plan's
column, 0016 moves each plan's seven columns into it (plaintext JSON), 0017 drops the columns
and makes the fields sealed ones, 0018 seals every row still in plaintext, 500 at a time (as
0013 and 0014 did; where the key store cannot be opened the values stay readable in plaintext
and ``python manage.py seal_room_content`` finishes it). The plan reads back through the
attribute names of before (``RoomOutcome.venue_name``...).

Reversible: migrating back writes every value back in plaintext, then the plan back into its
columns (rows under destroyed keys, deleted rooms a restore brought back, stay sealed for
``reapply_deletions``: their plan columns come back empty)."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("rooms", "0014_seal_message_and_whisper_text")]

    operations = [
        migrations.AddField(
            model_name="roomoutcome",
            name="plan",
            field=models.TextField(null=True, blank=True),
        ),
    ]

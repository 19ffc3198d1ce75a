"""Message.room loses its own index: the (room, seq) constraint's index leads with the room
and serves every look-up by room; the second index was one more page written per message.

Only the index is dropped, on both databases. Django's own AlterField would rebuild the
whole message table on SQLite and drop and re-add (so re-validate) the foreign key on
PostgreSQL; neither is needed to drop an index."""

import django.db.models.deletion
from django.db import migrations, models

INDEX = "rooms_message_room_id_ec9477f2"  # the name Django gave it (0001), on both databases


class Migration(migrations.Migration):
    dependencies = [
        ("rooms", "0020_agent_socket_joins_and_leaves"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="message",
                    name="room",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="messages",
                        to="rooms.room",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    sql=f'DROP INDEX IF EXISTS "{INDEX}"',
                    reverse_sql=f'CREATE INDEX "{INDEX}" ON "rooms_message" ("room_id")',
                ),
            ],
        ),
    ]

"""Indexes another one already makes, dropped: each was an index on one column that a longer
constraint's or index's leads with (rooms_roommember.room_id: the one-seat-per-owner
constraint; rooms_roomoutcome.room_id: the room_outcome_latest index;
rooms_sealedoffer.room_id: the one-sealed-offer-per-agent constraint; rooms_whisper.room_id:
the whisper_to_agent index), so every look-up by that column uses the longer one, and the
shorter was one more page written (and deleted) with every row.

Only the indexes are dropped, on both databases (the pattern of rooms 0021): Django's own
AlterField would rebuild each table on SQLite and drop and re-add (so re-validate) a foreign
key on PostgreSQL; neither is needed to drop an index. Reversible."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("rooms", "0021_message_room_index_covered"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="roommember",
                    name="room",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="members",
                        to="rooms.room",
                    ),
                ),
                migrations.AlterField(
                    model_name="roomoutcome",
                    name="room",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="outcomes",
                        to="rooms.room",
                    ),
                ),
                migrations.AlterField(
                    model_name="sealedoffer",
                    name="room",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="sealed_offers",
                        to="rooms.room",
                    ),
                ),
                migrations.AlterField(
                    model_name="whisper",
                    name="room",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="whispers",
                        to="rooms.room",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    sql='DROP INDEX IF EXISTS "rooms_roommember_room_id_4f3cc600"',
                    reverse_sql=(
                        'CREATE INDEX "rooms_roommember_room_id_4f3cc600" '
                        'ON "rooms_roommember" ("room_id")'
                    ),
                ),
                migrations.RunSQL(
                    sql='DROP INDEX IF EXISTS "rooms_roomoutcome_room_id_55b70afc"',
                    reverse_sql=(
                        'CREATE INDEX "rooms_roomoutcome_room_id_55b70afc" '
                        'ON "rooms_roomoutcome" ("room_id")'
                    ),
                ),
                migrations.RunSQL(
                    sql='DROP INDEX IF EXISTS "rooms_sealedoffer_room_id_5ab11bfd"',
                    reverse_sql=(
                        'CREATE INDEX "rooms_sealedoffer_room_id_5ab11bfd" '
                        'ON "rooms_sealedoffer" ("room_id")'
                    ),
                ),
                migrations.RunSQL(
                    sql='DROP INDEX IF EXISTS "rooms_whisper_room_id_438df035"',
                    reverse_sql=(
                        'CREATE INDEX "rooms_whisper_room_id_438df035" '
                        'ON "rooms_whisper" ("room_id")'
                    ),
                ),
            ],
        ),
    ]

"""Indexes another one already makes, dropped: each was an index on one column that a longer
constraint's or index's leads with (gatekeeper_actionrecord.room_id: the one-action-per-key
constraint), so every look-up by that column uses the longer one, and the shorter was one
more page written (and deleted) with every row.

Only the indexes are dropped, on both databases (the pattern of rooms 0021): Django's own
AlterField would rebuild each table on SQLite and drop and re-add (so re-validate) a foreign
key on PostgreSQL; neither is needed to drop an index. Reversible."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("gatekeeper", "0008_seal_existing_webhook_bodies"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="actionrecord",
                    name="room_id",
                    field=models.UUIDField(),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    sql='DROP INDEX IF EXISTS "gatekeeper_actionrecord_room_id_e726c2f7"',
                    reverse_sql=(
                        'CREATE INDEX "gatekeeper_actionrecord_room_id_e726c2f7" '
                        'ON "gatekeeper_actionrecord" ("room_id")'
                    ),
                ),
            ],
        ),
    ]

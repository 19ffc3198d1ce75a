"""Indexes another one already makes, dropped: each was an index on one column that a longer
constraint's or index's leads with (artifacts_artifact.room_id: the artifact_room_created
index), so every look-up by that column uses the longer one, and the shorter was one more
page written (and deleted) with every row.

Only the indexes are dropped, on both databases (the pattern of rooms 0021): Django's own
AlterField would rebuild each table on SQLite and drop and re-add (so re-validate) a foreign
key on PostgreSQL; neither is needed to drop an index. Reversible."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("artifacts", "0001_initial"),
        ("rooms", "0022_indexes_covered"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="artifact",
                    name="room",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="rooms.room",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    sql='DROP INDEX IF EXISTS "artifacts_artifact_room_id_0311360b"',
                    reverse_sql=(
                        'CREATE INDEX "artifacts_artifact_room_id_0311360b" '
                        'ON "artifacts_artifact" ("room_id")'
                    ),
                ),
            ],
        ),
    ]

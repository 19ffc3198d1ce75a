"""Indexes another one already makes, dropped: each was an index on one column that a longer
constraint's or index's leads with (practice_practiceagent.practice_owner_id: the one-agent-
per-role constraint), so every look-up by that column uses the longer one, and the shorter
was one more page written (and deleted) with every row.

Only the indexes are dropped, on both databases (the pattern of rooms 0021): Django's own
AlterField would rebuild each table on SQLite and drop and re-add (so re-validate) a foreign
key on PostgreSQL; neither is needed to drop an index. Reversible."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("practice", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="practiceagent",
                    name="practice_owner",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="practice.practiceowner",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    sql='DROP INDEX IF EXISTS "practice_practiceagent_practice_owner_id_9ffd3108"',
                    reverse_sql=(
                        'CREATE INDEX "practice_practiceagent_practice_owner_id_9ffd3108" '
                        'ON "practice_practiceagent" ("practice_owner_id")'
                    ),
                ),
            ],
        ),
    ]

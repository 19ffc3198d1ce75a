"""Indexes another one already makes, dropped: each was an index on one column that a longer
constraint's or index's leads with (ledger_headwitness.room_id: the (room, key, seq)
constraint), so every look-up by that column uses the longer one, and the shorter was one
more page written (and deleted) with every row.

Only the indexes are dropped, on both databases (the pattern of rooms 0021): Django's own
AlterField would rebuild each table on SQLite and drop and re-add (so re-validate) a foreign
key on PostgreSQL; neither is needed to drop an index. Reversible."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ledger", "0003_head_witnesses"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="headwitness",
                    name="room_id",
                    field=models.UUIDField(),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    sql='DROP INDEX IF EXISTS "ledger_headwitness_room_id_5df0429e"',
                    reverse_sql=(
                        'CREATE INDEX "ledger_headwitness_room_id_5df0429e" '
                        'ON "ledger_headwitness" ("room_id")'
                    ),
                ),
            ],
        ),
    ]

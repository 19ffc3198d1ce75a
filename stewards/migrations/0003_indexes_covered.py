"""Indexes another one already makes, dropped: each was an index on one column that a longer
constraint's or index's leads with (stewards_exitnote.seat_id: the one-exit-note-per-side
constraint; stewards_exitnotetheme.note_id: the exit_note_theme_once constraint), so every
look-up by that column uses the longer one, and the shorter was one more page written (and
deleted) with every row.

Only the indexes are dropped, on both databases (the pattern of rooms 0021): Django's own
AlterField would rebuild each table on SQLite and drop and re-add (so re-validate) a foreign
key on PostgreSQL; neither is needed to drop an index. Reversible."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("rooms", "0022_indexes_covered"),
        ("stewards", "0002_seal_exit_note_text"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="exitnote",
                    name="seat",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="rooms.roommember",
                    ),
                ),
                migrations.AlterField(
                    model_name="exitnotetheme",
                    name="note",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="themes",
                        to="stewards.exitnote",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    sql='DROP INDEX IF EXISTS "stewards_exitnote_seat_id_9484383d"',
                    reverse_sql=(
                        'CREATE INDEX "stewards_exitnote_seat_id_9484383d" '
                        'ON "stewards_exitnote" ("seat_id")'
                    ),
                ),
                migrations.RunSQL(
                    sql='DROP INDEX IF EXISTS "stewards_exitnotetheme_note_id_2ffd2a52"',
                    reverse_sql=(
                        'CREATE INDEX "stewards_exitnotetheme_note_id_2ffd2a52" '
                        'ON "stewards_exitnotetheme" ("note_id")'
                    ),
                ),
            ],
        ),
    ]

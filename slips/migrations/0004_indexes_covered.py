"""Indexes another one already makes, dropped: each was an index on one column that a longer
constraint's or index's leads with (slips_slipcapability.slip_id: the (slip, position)
constraint; slips_slip.owner_id: the (owner, room, agent) index), so every look-up by that
column uses the longer one, and the shorter was one more page written (and deleted) with every
row.

Only the indexes are dropped, on both databases (the pattern of rooms 0021): Django's own
AlterField would rebuild each table on SQLite and drop and re-add (so re-validate) a foreign
key on PostgreSQL; neither is needed to drop an index. Reversible."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("slips", "0003_vault_per_owner_keys"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="slip",
                    name="owner",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="slipcapability",
                    name="slip",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="capabilities",
                        to="slips.slip",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    sql='DROP INDEX IF EXISTS "slips_slip_owner_id_fa93bde8"',
                    reverse_sql=(
                        'CREATE INDEX "slips_slip_owner_id_fa93bde8" ON "slips_slip" ("owner_id")'
                    ),
                ),
                migrations.RunSQL(
                    sql='DROP INDEX IF EXISTS "slips_slipcapability_slip_id_4637aee6"',
                    reverse_sql=(
                        'CREATE INDEX "slips_slipcapability_slip_id_4637aee6" '
                        'ON "slips_slipcapability" ("slip_id")'
                    ),
                ),
            ],
        ),
    ]

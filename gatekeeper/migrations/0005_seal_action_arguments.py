"""Tool-call arguments and outcomes become sealed fields (``rooms.sealing``): the action
record's ``arguments`` and ``outcome`` and the sandbox effect's ``arguments`` and ``output``.
Only the columns' type changes here (JSON to text); 0006 seals the rows. Two migrations, not
one: on PostgreSQL a table whose rows were just updated in the same transaction cannot be
altered while its foreign-key checks are pending (grants reference action records), which
migrating back (unseal the rows, then alter) would otherwise do."""

from __future__ import annotations

from django.db import migrations

import rooms.sealing


class Migration(migrations.Migration):
    dependencies = [("gatekeeper", "0004_disclosure_grants")]

    operations = [
        migrations.AlterField(
            model_name="actionrecord",
            name="arguments",
            field=rooms.sealing.SealedJSONField(sealed_as="action_record.arguments"),
        ),
        migrations.AlterField(
            model_name="actionrecord",
            name="outcome",
            field=rooms.sealing.SealedJSONField(
                blank=True, null=True, sealed_as="action_record.outcome"
            ),
        ),
        migrations.AlterField(
            model_name="sandboxeffect",
            name="arguments",
            field=rooms.sealing.SealedJSONField(sealed_as="sandbox_effect.arguments"),
        ),
        migrations.AlterField(
            model_name="sandboxeffect",
            name="output",
            field=rooms.sealing.SealedJSONField(sealed_as="sandbox_effect.output"),
        ),
    ]

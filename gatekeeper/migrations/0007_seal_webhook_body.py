"""A webhook delivery's signed body (it carries the call's arguments) becomes a sealed field
(``rooms.sealing``), and each delivery names its room (the key that seals it). Only the
schema changes here; 0008 fills in each row's room from its body and seals the rows (apart,
as 0005/0006 are, so migrating back never alters a table with pending trigger events)."""

from __future__ import annotations

from django.db import migrations, models

import rooms.sealing


class Migration(migrations.Migration):
    dependencies = [("gatekeeper", "0006_seal_existing_action_arguments")]

    operations = [
        migrations.AddField(
            model_name="webhookdelivery",
            name="room_id",
            field=models.UUIDField(blank=True, db_index=True, null=True),
        ),
        migrations.AlterField(
            model_name="webhookdelivery",
            name="body",
            field=rooms.sealing.SealedTextField(sealed_as="webhook_delivery.body"),
        ),
    ]

"""When the retention purge finished with a closed room (its transcript, the room's purpose
and charter, its outcome's plan: rooms.retention). Those columns are sealed and cannot be
queried, so the purge marks the room instead of opening every old room's words on every run.
A nullable column: adding it rewrites no row on either database. Reversible."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("rooms", "0022_indexes_covered"),
    ]

    operations = [
        migrations.AddField(
            model_name="room",
            name="content_purged_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]

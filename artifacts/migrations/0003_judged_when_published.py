"""An artifact's suspicion flags, judged once when it is published (``flags``), and whether
its sharing is still to be decided after the check that should have decided it failed
(``share_undecided``). Existing rows get NULL flags (never judged at publishing: their
deliveries judge them for the agent, as before) and are decided (``share_undecided`` false).
Two added columns, reversible."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("artifacts", "0002_indexes_covered"),
    ]

    operations = [
        migrations.AddField(
            model_name="artifact",
            name="share_undecided",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="artifact",
            name="flags",
            field=models.JSONField(blank=True, null=True),
        ),
    ]

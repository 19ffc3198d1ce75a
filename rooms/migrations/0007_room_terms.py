# Rooms gain their dinner terms; rooms that exist already are not dinners (null).

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("rooms", "0006_notification_preference"),
    ]

    operations = [
        migrations.AddField(
            model_name="room",
            name="terms",
            field=models.JSONField(blank=True, null=True),
        ),
    ]

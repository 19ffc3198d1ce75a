"""When the webhook delivery attempt in flight stops holding its delivery
(``gatekeeper.webhooks.webhook_delivery_attempt``): null for every existing row, none of
which is held. Reversible."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('gatekeeper', '0010_delivery_queued_pending_indexes'),
    ]

    operations = [
        migrations.AddField(
            model_name='webhookdelivery',
            name='attempt_until',
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]

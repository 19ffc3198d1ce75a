"""When each webhook delivery's task was last queued (existing rows: now, so a delivery left
pending is queued again by the beat ten minutes after this migration), and the two partial
indexes the beat's sweeps read: pending deliveries by when they were queued
(``gatekeeper.webhooks.webhook_deliveries_lost``), pending actions by when they were made
(``rooms.forks.actions_pending_settle``). Each holds the pending rows only, so it costs
nothing for the settled rest. Reversible."""

import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('gatekeeper', '0009_indexes_covered'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='webhookdelivery',
            name='queued_at',
            field=models.DateTimeField(default=django.utils.timezone.now),
        ),
        migrations.AddIndex(
            model_name='actionrecord',
            index=models.Index(condition=models.Q(('status', 'pending')), fields=['created_at'], name='gk_action_pending_created'),
        ),
        migrations.AddIndex(
            model_name='webhookdelivery',
            index=models.Index(condition=models.Q(('status', 'pending')), fields=['queued_at'], name='gk_delivery_pending_queued'),
        ),
    ]

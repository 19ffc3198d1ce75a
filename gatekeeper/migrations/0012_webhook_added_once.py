"""Which add form made a webhook (``WebhookEndpoint.added_with``), so the owner's page sent
twice adds one: "" for every existing row (none was added with a form key, so none is
bound by the constraint). Reversible."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('gatekeeper', '0011_delivery_attempt_hold'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='webhookendpoint',
            name='added_with',
            field=models.CharField(blank=True, default='', editable=False, max_length=64),
        ),
        migrations.AddConstraint(
            model_name='webhookendpoint',
            constraint=models.UniqueConstraint(condition=models.Q(('added_with', ''), _negated=True), fields=('owner', 'added_with'), name='gatekeeper_webhook_added_once'),
        ),
    ]

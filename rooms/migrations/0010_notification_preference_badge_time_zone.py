from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('rooms', '0009_sealed_offer'),
    ]

    operations = [
        migrations.AddField(
            model_name='notificationpreference',
            name='badge',
            field=models.BooleanField(default=True),
        ),
        migrations.AddField(
            model_name='notificationpreference',
            name='time_zone',
            field=models.CharField(blank=True, default='', max_length=64),
        ),
    ]

# Sealed simultaneous offers (rooms.sealed): one per agent per room, revealed together.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("rooms", "0008_room_outcome"),
    ]

    operations = [
        migrations.CreateModel(
            name="SealedOffer",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("client_id", models.CharField(max_length=64)),
                ("offer", models.JSONField()),
                ("salt", models.CharField(max_length=64)),
                ("commitment", models.CharField(max_length=64)),
                ("sealed_at", models.DateTimeField(auto_now_add=True)),
                ("revealed_at", models.DateTimeField(blank=True, null=True)),
                (
                    "agent",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="rooms.agent",
                    ),
                ),
                (
                    "room",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="sealed_offers",
                        to="rooms.room",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("room", "agent"), name="one_sealed_offer_per_agent"
                    )
                ],
            },
        ),
    ]

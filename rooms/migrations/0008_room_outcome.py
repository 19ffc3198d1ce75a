# Rooms record their outcome (rooms.outcomes): one row per change, derived from executed actions.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("rooms", "0007_room_terms"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="RoomOutcome",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("action_id", models.UUIDField(unique=True)),
                (
                    "kind",
                    models.CharField(
                        choices=[("agreed", "Agreed"), ("no_agreement", "No agreement")],
                        max_length=12,
                    ),
                ),
                ("venue_id", models.CharField(blank=True, max_length=64)),
                ("venue_name", models.CharField(blank=True, max_length=200)),
                ("starts_at", models.DateTimeField(blank=True, null=True)),
                ("time_zone", models.CharField(blank=True, max_length=64)),
                ("party_size", models.PositiveSmallIntegerField(blank=True, null=True)),
                ("price_per_person_minor", models.PositiveIntegerField(blank=True, null=True)),
                ("currency", models.CharField(blank=True, max_length=3)),
                ("reasons", models.JSONField(blank=True, default=dict)),
                ("recorded_at", models.DateTimeField(auto_now_add=True)),
                (
                    "owner",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "room",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="outcomes",
                        to="rooms.room",
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["room", "-id"], name="room_outcome_latest")],
            },
        ),
    ]

"""The plan's seven columns dropped (their values are in ``plan`` since 0016), and the plan,
the room's purpose and its charter made sealed fields. Schema only (see 0015)."""

from __future__ import annotations

from django.db import migrations

import rooms.sealing

PLAN_COLUMNS = (
    "venue_id",
    "venue_name",
    "starts_at",
    "time_zone",
    "party_size",
    "price_per_person_minor",
    "currency",
)


class Migration(migrations.Migration):
    dependencies = [("rooms", "0016_room_outcome_plan_from_columns")]

    operations = [
        *(
            migrations.RemoveField(model_name="roomoutcome", name=name)
            for name in reversed(PLAN_COLUMNS)
        ),
        migrations.AlterField(
            model_name="roomoutcome",
            name="plan",
            field=rooms.sealing.SealedJSONField(
                blank=True, null=True, sealed_as="room_outcome.plan"
            ),
        ),
        migrations.AlterField(
            model_name="room",
            name="purpose",
            field=rooms.sealing.SealedTextOnReadField(room_field="id", sealed_as="room.purpose"),
        ),
        migrations.AlterField(
            model_name="room",
            name="charter",
            field=rooms.sealing.SealedTextOnReadField(
                blank=True, room_field="id", sealed_as="room.charter"
            ),
        ),
    ]

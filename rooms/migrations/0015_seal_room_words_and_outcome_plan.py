"""The room's purpose and charter, and an agreed outcome's plan, sealed under the room's data key
(``rooms.sealing``). The plan's seven columns become one sealed JSON value (``RoomOutcome.plan``,
read back through the same attribute names); then every row still in plaintext is sealed, 500
at a time (as 0013 and 0014 did; where the key store cannot be opened the values stay readable
in plaintext and ``python manage.py seal_room_content`` finishes it).

Reversible: migrating back writes every value back in plaintext, then the plan back into its
columns (rows under destroyed keys, deleted rooms a restore brought back, stay sealed for
``reapply_deletions``: their plan columns come back empty)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.db import migrations, models

import rooms.sealing
from rooms.sealing import is_sealed, migration_steps

seal, unseal = migration_steps("rooms.Room", "rooms.RoomOutcome")

PLAN_COLUMNS = (
    "venue_id",
    "venue_name",
    "starts_at",
    "time_zone",
    "party_size",
    "price_per_person_minor",
    "currency",
)


def plan_from_columns(apps: Any, schema_editor: Any) -> None:
    """Each agreed outcome's plan columns into ``plan`` (plaintext JSON until sealed below)."""
    outcome = apps.get_model("rooms", "RoomOutcome")
    rows = outcome.objects.filter(starts_at__isnull=False).values("id", *PLAN_COLUMNS)
    for row in rows.iterator(chunk_size=500):
        plan = {name: row[name] for name in PLAN_COLUMNS}
        plan["starts_at"] = plan["starts_at"].isoformat()
        outcome.objects.filter(id=row["id"]).update(plan=json.dumps(plan, ensure_ascii=False))


def columns_from_plan(apps: Any, schema_editor: Any) -> None:
    outcome = apps.get_model("rooms", "RoomOutcome")
    rows = outcome.objects.filter(plan__isnull=False).values_list("id", "plan")
    for row_id, text in rows.iterator(chunk_size=500):
        if is_sealed(text):
            continue  # under a destroyed key: can never be opened
        plan = json.loads(text)
        plan["starts_at"] = datetime.fromisoformat(plan["starts_at"])
        plan = {name: plan.get(name) for name in PLAN_COLUMNS}
        for name in ("venue_id", "venue_name", "time_zone", "currency"):
            plan[name] = plan[name] or ""
        outcome.objects.filter(id=row_id).update(**plan)


class Migration(migrations.Migration):
    dependencies = [("rooms", "0014_seal_message_and_whisper_text")]

    operations = [
        migrations.AddField(
            model_name="roomoutcome",
            name="plan",
            field=models.TextField(null=True, blank=True),
        ),
        migrations.RunPython(plan_from_columns, columns_from_plan, elidable=True),
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
        migrations.RunPython(seal, unseal, elidable=True),
    ]

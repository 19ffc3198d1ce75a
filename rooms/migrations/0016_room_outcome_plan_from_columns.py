"""Each agreed outcome's plan columns into its ``plan`` column, as plaintext JSON (sealed by
0018); back: the plan into its columns. Data only (see 0015)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.db import migrations

from rooms.sealing import is_sealed

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
    dependencies = [("rooms", "0015_room_outcome_plan_column")]

    operations = [migrations.RunPython(plan_from_columns, columns_from_plan, elidable=True)]

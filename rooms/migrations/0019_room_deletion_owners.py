"""Who held a deleted room's seats (``RoomDeletion.owners``), so both can still read and
verify its ledger. Deletions recorded before: filled from the room's ledger, whose ``join``
events name each owner who took a seat (ids only), for the accounts that still exist."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models


def owners_from_ledger(apps: Any, schema_editor: Any) -> None:
    deletion = apps.get_model("rooms", "RoomDeletion")
    event = apps.get_model("ledger", "LedgerEvent")
    user = apps.get_model("auth", "User")
    for record in deletion.objects.iterator(chunk_size=500):
        if record.owners:
            continue
        ids = set()
        for data in event.objects.filter(room_id=record.room_id, kind="join").values_list(
            "data", flat=True
        ):
            if isinstance(data, dict) and data.get("participant_kind") == "owner":
                try:
                    ids.add(int(str(data.get("participant_id"))))
                except ValueError:
                    continue
        owners = [
            {"user_id": pk, "date_joined": joined.isoformat()}
            for pk, joined in user.objects.filter(pk__in=ids)
            .order_by("pk")
            .values_list("pk", "date_joined")
        ]
        if owners:
            deletion.objects.filter(pk=record.pk).update(owners=owners)


class Migration(migrations.Migration):
    dependencies = [
        ("rooms", "0018_seal_room_words_and_outcome_plan"),
        ("ledger", "0003_head_witnesses"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [
        migrations.AddField(
            model_name="roomdeletion",
            name="owners",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.RunPython(owners_from_ledger, migrations.RunPython.noop, elidable=True),
    ]

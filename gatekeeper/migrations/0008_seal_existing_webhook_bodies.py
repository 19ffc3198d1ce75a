"""Each webhook delivery's room, read from its signed body (which names it), then every body
still in plaintext sealed under that room's data key, 500 at a time (where the key store
cannot be opened, ``python manage.py seal_room_content`` finishes it). A body that names no
room is left as it is.

Reversible: migrating back writes every body back in plaintext (but rows under a destroyed
key); the room column goes with 0007."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.db import migrations

from rooms.sealing import SEALED_PREFIX, migration_steps

seal, unseal = migration_steps("gatekeeper.WebhookDelivery")


def rooms_from_bodies(apps: Any, schema_editor: Any) -> None:
    # Raw SQL: the body column is a sealed field now, and these rows are still plaintext.
    connection = schema_editor.connection
    q = connection.ops.quote_name
    table = q(apps.get_model("gatekeeper", "WebhookDelivery")._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id, body FROM {table} WHERE room_id IS NULL")  # noqa: S608
        rows = cursor.fetchall()
    for pk, body in rows:
        if body is None or str(body).startswith(SEALED_PREFIX):
            continue
        try:
            room = uuid.UUID(str(json.loads(str(body))["room_id"]))
        except (ValueError, KeyError, TypeError):
            continue  # names no room: no key to seal it under
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} SET room_id = %s WHERE id = %s",  # noqa: S608
                [room.hex if connection.vendor == "sqlite" else room, pk],
            )


def forward(apps: Any, schema_editor: Any) -> None:
    rooms_from_bodies(apps, schema_editor)
    seal(apps, schema_editor)


class Migration(migrations.Migration):
    dependencies = [("gatekeeper", "0007_seal_webhook_body")]

    operations = [migrations.RunPython(forward, unseal, elidable=True)]

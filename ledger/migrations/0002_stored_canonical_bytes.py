"""Store each event's RFC 8785 envelope bytes (``canonical``) and write ``data`` as RFC 8785.

Backfill: every existing event's bytes are computed once from its columns, in batches, with
progress on stdout. A row that was tampered with before this migration keeps being caught:
its backfilled bytes are those of its (changed) columns, whose SHA-256 is not its stored hash.
"""

from __future__ import annotations

import sys
from typing import Any

import rfc8785
from django.db import migrations, models

import ledger.chain

BATCH = 2000


def backfill(apps: Any, schema_editor: Any) -> None:
    from ledger.chain import CanonicalData, envelope_bytes, occurred_at_text

    event_model = apps.get_model("ledger", "LedgerEvent")
    total = event_model.objects.count()
    # jsonb keeps the value, not the text: rewriting ``data`` only matters on SQLite.
    fields = (
        ["canonical"] if schema_editor.connection.vendor == "postgresql" else ["canonical", "data"]
    )
    done = unreadable = last_id = 0
    while True:
        batch = list(event_model.objects.filter(id__gt=last_id).order_by("id")[:BATCH])
        if not batch:
            break
        for event in batch:
            try:
                text = rfc8785.dumps(event.data)
                event.canonical = envelope_bytes(
                    data_canonical=text,
                    room_id=str(event.room_id),
                    seq=event.seq,
                    kind=event.kind,
                    occurred_at=occurred_at_text(event.occurred_at),
                    prev_hash=event.prev_hash,
                )
                event.data = CanonicalData(event.data, text.decode())
            except (rfc8785.CanonicalizationError, TypeError, ValueError):
                unreadable += 1  # left empty: verify_ledger names the event
        event_model.objects.bulk_update(batch, fields)
        done += len(batch)
        last_id = batch[-1].id
        if total > BATCH:
            print(f"  ledger: stored canonical bytes for {done}/{total} events", file=sys.stderr)
    if unreadable:
        print(f"  ledger: {unreadable} event(s) could not be canonicalised", file=sys.stderr)


class Migration(migrations.Migration):
    dependencies = [("ledger", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="ledgerevent",
            name="canonical",
            field=models.BinaryField(default=b""),
        ),
        migrations.AlterField(
            model_name="ledgerevent",
            name="data",
            field=models.JSONField(encoder=ledger.chain.CanonicalJSONEncoder),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True),
    ]

"""Every room's purpose and charter and every outcome's plan still in plaintext sealed under
the room's data key, 500 at a time; back: written back in plaintext. Data only (see 0015)."""

from __future__ import annotations

from django.db import migrations

from rooms.sealing import migration_steps

seal, unseal = migration_steps("rooms.Room", "rooms.RoomOutcome")


class Migration(migrations.Migration):
    dependencies = [("rooms", "0017_sealed_room_words_and_outcome_plan")]

    operations = [migrations.RunPython(seal, unseal, elidable=True)]

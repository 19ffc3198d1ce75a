"""``python manage.py seal_room_content``: seal transcript rows still in plaintext (written
before sealing, left by a migration that could not open the key store) under their rooms'
data keys. Idempotent; run again after an interruption."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand
from django.db import connection

from rooms.sealing import room_content_seal_existing


class Command(BaseCommand):
    help = "Seal room content still stored in plaintext under each room's data key."

    def handle(self, *args: Any, **options: Any) -> None:
        # Autocommit: each row's seal is kept as it is written, so an interrupted run resumes.
        counts = room_content_seal_existing(apps.get_model, connection, self.stdout.write)
        for label, sealed in counts.items():
            self.stdout.write(f"{label}: {sealed} sealed")

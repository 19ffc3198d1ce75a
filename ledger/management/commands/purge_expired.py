"""``python manage.py purge_expired``: apply the retention windows now (same as the daily
Celery beat task). Today this purges the ledger; content retention may join it."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from ledger.retention import ledger_purge_expired


class Command(BaseCommand):
    help = "Delete records past their retention window (ledger: leaves a verifiable checkpoint)."

    def handle(self, *args: Any, **options: Any) -> None:
        report = ledger_purge_expired()
        self.stdout.write(
            f"ledger: purged {report.events_purged} event(s) older than "
            f"{settings.SYNAPSIA['LEDGER_RETENTION_DAYS']} days from {len(report.rooms)} room(s)"
        )

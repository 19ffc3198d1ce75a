"""``python manage.py purge_expired``: apply every retention window now (the same purges as
the Celery beat task ``rooms.purge_expired``): each row of ``rooms.retention``'s schedule
that has a purge, one line of counts each. Exit 1 if any row's purge failed (the others ran).

It lives in the rooms app, which may import every app whose purge it runs; the ledger's own
purge is one of those rows."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand

from rooms.retention import RetentionPurgeFailed, retention_purge_all


class Command(BaseCommand):
    help = (
        "Delete records past their retention window: transcripts, ledger events (leaving a "
        "verifiable checkpoint) and every other registered data class."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            done = retention_purge_all()
        except RetentionPurgeFailed as failed:
            for purged in failed.done:
                self.stdout.write(purged.summary)
            self.stdout.write(self.style.ERROR(str(failed)))
            sys.exit(1)
        for purged in done:
            self.stdout.write(purged.summary)

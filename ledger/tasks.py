"""Celery tasks of the ledger. They only call services (beat: CELERY_BEAT_SCHEDULE)."""

from __future__ import annotations

from celery import shared_task

from ledger.retention import ledger_purge_expired


@shared_task(name="ledger.purge_expired")
def purge_expired() -> int:
    """Daily retention purge; returns how many events were deleted."""
    return ledger_purge_expired().events_purged

"""Celery tasks of the rooms app. They only call services (beat: CELERY_BEAT_SCHEDULE)."""

from __future__ import annotations

from celery import shared_task

from rooms.forks import actions_pending_settle
from rooms.retention import retention_purge_all


@shared_task(name="rooms.purge_expired")
def purge_expired() -> dict[str, int]:
    """Every retention row's purge (rooms.retention); returns rows deleted per data class."""
    return {purged.key: purged.rows for purged in retention_purge_all()}


@shared_task(name="rooms.actions_settle")
def actions_settle() -> int:
    """Pending webhook actions whose delivery is final, settled (rooms.forks); how many."""
    return actions_pending_settle()

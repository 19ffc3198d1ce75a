"""Celery tasks of the ledger. They only call services (beat: CELERY_BEAT_SCHEDULE)."""

from __future__ import annotations

from celery import shared_task

from ledger.retention import ledger_purge_expired
from ledger.signing import ledger_sign_stale_heads


@shared_task(name="ledger.purge_expired")
def purge_expired() -> int:
    """Daily retention purge; returns how many events were deleted."""
    return ledger_purge_expired().events_purged


@shared_task(name="ledger.sign_stale_heads")
def sign_stale_heads() -> int:
    """Sign heads left unsigned longer than LEDGER_HEAD_EVERY_SECONDS (beat: hourly or
    more often; the verifiers allow that plus LEDGER_HEAD_GRACE_SECONDS)."""
    return ledger_sign_stale_heads()

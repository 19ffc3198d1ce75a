"""``python manage.py reapply_deletions``: after restoring a database backup, delete again
everything that was deleted since the backup was taken (rooms for both sides, accounts), from
the deletion journal kept outside the database (docs/data-lifecycle.md). Safe to run any
time: a deletion already applied deletes nothing and records nothing."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from rooms.deletion import deletions_reapply


class Command(BaseCommand):
    help = "Re-apply every recorded deletion (run right after restoring a database backup)."

    def handle(self, *args: Any, **options: Any) -> None:
        done = deletions_reapply()
        self.stdout.write(
            f"deletions: {done.rooms_checked} room deletion(s) checked, "
            f"{done.rooms_with_content} room(s) brought back by a restore deleted again "
            f"({done.rows_deleted} row(s)), {done.accounts_deleted} account(s) deleted again"
        )

from __future__ import annotations

from django.apps import AppConfig


class StewardsConfig(AppConfig):
    name = "stewards"
    verbose_name = "Operator (exit notes and abuse reports)"

    def ready(self) -> None:
        # Exit notes and abuse evidence join the retention schedule's purges, and a deleted
        # room's exit notes go with it (rooms.retention, rooms.deletion).
        from rooms.deletion import room_content_deleter_register
        from rooms.retention import retention_purge_register
        from stewards.retention import abuse_evidence_purge, exit_notes_delete, exit_notes_purge

        retention_purge_register("exit_notes", exit_notes_purge)
        retention_purge_register("abuse_evidence", abuse_evidence_purge)
        room_content_deleter_register("exit_notes", "notes", exit_notes_delete)

from __future__ import annotations

from django.apps import AppConfig


class FrontendConfig(AppConfig):
    name = "frontend"

    def ready(self) -> None:
        from frontend import signals
        from frontend.login_throttle import login_records_purge_expired
        from rooms.retention import retention_purge_register

        # A sign-out, a password change or a deactivation closes the owner's open room tabs.
        signals.connect()

        # Failed-login records are the telemetry the database holds (logs live elsewhere).
        retention_purge_register("telemetry", login_records_purge_expired)

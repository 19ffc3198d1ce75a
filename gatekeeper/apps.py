from __future__ import annotations

from django.apps import AppConfig


class GatekeeperConfig(AppConfig):
    name = "gatekeeper"

    def ready(self) -> None:
        from gatekeeper.add_keys import add_keys_retention_row
        from rooms.retention import retention_register

        # The API's Idempotency-Keys are kept a day (gatekeeper.add_keys).
        retention_register(add_keys_retention_row())

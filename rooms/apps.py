from __future__ import annotations

from django.apps import AppConfig


class RoomsConfig(AppConfig):
    name = "rooms"

    def ready(self) -> None:
        # slips sits below rooms and cannot call it; it signals revocations instead.
        from gatekeeper.signals import grant_expired, webhook_delivery_settled
        from rooms.forks import action_pending_settled
        from rooms.realtime import announce_grant_expired, announce_slip_key_revoked
        from slips.signals import key_revoked

        key_revoked.connect(announce_slip_key_revoked, dispatch_uid="rooms.slip_key_revoked")
        grant_expired.connect(announce_grant_expired, dispatch_uid="rooms.grant_expired")
        webhook_delivery_settled.connect(
            action_pending_settled, dispatch_uid="rooms.webhook_delivery_settled"
        )

from __future__ import annotations

from django.apps import AppConfig


class GatekeeperConfig(AppConfig):
    name = "gatekeeper"

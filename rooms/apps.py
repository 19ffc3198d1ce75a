from __future__ import annotations

from django.apps import AppConfig


class RoomsConfig(AppConfig):
    name = "rooms"

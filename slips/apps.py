from __future__ import annotations

from django.apps import AppConfig


class SlipsConfig(AppConfig):
    name = "slips"

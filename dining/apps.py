"""The dinner domain as data: cities, venue catalogues and a room's dinner terms."""

from __future__ import annotations

from django.apps import AppConfig


class DiningConfig(AppConfig):
    # No models: the catalogues are files, read through ``dining.loading``.
    name = "dining"
    verbose_name = "Dining catalogues"

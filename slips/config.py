"""The ``SLIPS`` settings with their defaults (``synapsia/settings.py`` reads the environment)."""

from __future__ import annotations

from typing import Any

from django.conf import settings

DEFAULTS: dict[str, Any] = {
    "VAULT_KEY": "",
    "CHALLENGE_TTL_SECONDS": 300,
    "CLOCK_SKEW_SECONDS": 300,
    "MAX_LIFETIME_DAYS": 90,
}


def slips_setting(name: str) -> Any:
    """One ``SLIPS`` setting, read at call time (so tests and reloads see changes)."""
    return {**DEFAULTS, **getattr(settings, "SLIPS", {})}[name]

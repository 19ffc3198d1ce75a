"""Synapsia project package: settings, ASGI routing and the Celery app."""

from __future__ import annotations

from synapsia.celery import app as celery_app

__all__ = ["celery_app"]

"""The Celery app. Embedded profile: tasks run eagerly in-process. Production: Redis broker.

Run exactly one beat scheduler per deployment (see deploy/): two beats double every
periodic task.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "synapsia.settings")

app = Celery("synapsia")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

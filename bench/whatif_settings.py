"""What-if settings for experiments (``python -m bench --settings bench.whatif_settings``).

The production settings plus persistent database connections for SQLite too: without
``CONN_MAX_AGE``, every ``database_sync_to_async`` hop in a consumer closes its connection
afterwards and the next hop opens (and PRAGMA-configures) a new one. Only for measuring the
effect; the app's settings stay in ``synapsia/settings.py``.
"""

from __future__ import annotations

from synapsia.settings import *  # noqa: F403
from synapsia.settings import DATABASES

DATABASES["default"]["CONN_MAX_AGE"] = None

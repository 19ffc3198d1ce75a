"""What-if: a shorter GIL switch interval in the server (0.5 ms instead of Python's 5 ms).

``python -m bench --cells say --settings bench.whatif_switch``. A database hop hands the work
to a worker thread and back; while the event loop's thread runs Python, the worker waits up
to the switch interval for the GIL, and the socket waits for the worker. Only for measuring.
"""

from __future__ import annotations

import sys

from synapsia.settings import *  # noqa: F403

sys.setswitchinterval(0.0005)

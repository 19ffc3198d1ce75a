"""The ledger's own in-process metrics, in the project's registry (``synapsia.metrics``).

``synapsia_ledger_append_seconds`` times the **whole** append, as a caller waits for it: the
head row's lock, canonicalising and hashing, the INSERT, the head UPDATE and, every N events
or at a pause, close or purge, the server's Ed25519 signature and its INSERT. Labelled by
path: ``one`` (``ledger_append``) or ``batch`` (``ledger_append_many``, one observation per
batch). ``synapsia_ledger_event_insert_seconds`` times only the INSERT of single appends.
Only durations: no label names a room, a person or a kind.
"""

from __future__ import annotations

from prometheus_client import Histogram

from synapsia.metrics import REGISTRY

LEDGER_APPEND_SECONDS = Histogram(
    "synapsia_ledger_append_seconds",
    "Time for one ledger append as its caller waits: lock the head, hash, insert, move the "
    "head and sign when a head is due (a batch append counts once).",
    ["path"],
    registry=REGISTRY,
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
LEDGER_INSERT_SECONDS = Histogram(
    "synapsia_ledger_event_insert_seconds",
    "Time to insert one ledger event row of a single append (batch appends are not seen). Not "
    "the whole append: the head lock and hashing come before it.",
    registry=REGISTRY,
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
)

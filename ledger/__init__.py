"""The trust ledger: per-room, append-only, hash-chained, non-content events.

The floor of the house: this app imports no other Synapsia app.
"""

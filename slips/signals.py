"""Signals ``slips`` sends to layers above it (which it cannot import).

``key_revoked(sender, owner_id, key_id, affected)`` is sent after the revocation commits;
``affected`` lists ``(room_id, agent_id)`` of the live slips that key signed. The rooms layer
connects to it to tell those agent sessions, and to disconnect any that nothing clears now.
"""

from __future__ import annotations

from django.dispatch import Signal

key_revoked = Signal()

"""Signals ``gatekeeper`` sends to the layer above it (which it cannot import).

``grant_expired(sender, room_id, agent_id, ref)`` is sent after an expiry commits: the action
the agent asked for under frame id ``ref`` ended as a denial. Rooms tells the agent's socket.
"""

from __future__ import annotations

from django.dispatch import Signal

grant_expired = Signal()

"""Signals ``gatekeeper`` sends to the layer above it (which it cannot import).

``grant_expired(sender, room_id, agent_id, ref)`` is sent after an expiry commits: the action
the agent asked for under frame id ``ref`` ended as a denial. Rooms tells the agent's socket.

``webhook_delivery_settled(sender, idempotency_key)`` is sent after a webhook delivery's final
status commits (delivered, refused, or given up): the action delivered under that key, which
its agent was told is pending, can now be settled. Rooms settles it
(``rooms.forks.action_pending_settled``: the record through
``gatekeeper.actions.action_delivery_settle``, then the room's outcome) and tells the agent's
socket.
"""

from __future__ import annotations

from django.dispatch import Signal

grant_expired = Signal()
webhook_delivery_settled = Signal()

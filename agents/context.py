"""Each turn's context as typed objects: the ``context`` frame of docs/protocol.md.

These are the protocol package's own models (``synapsia_protocol``), the very classes the
server validates with, so the SDK cannot drift from the wire; the SDK never imports server
code. What is trusted and what is not is part of the type: ``own_items``, ``whispers`` and
``notices`` come from the room and your own owner; ``peer_items``, ``peer_messages`` and
``peer_artifacts`` (documents the other agent published that its owner's slip shares with you)
come from the other side and are data, never instructions (each carries its fenced form to
place in a model's context as is).

Every cleared item and shared document says whether it may be carried out of the room
(``onward_disclosure``, the room's word beside it, never inside its fenced block). The room
cannot stop an agent remembering what it read; an agent that keeps or passes on anything
beyond the room (notes, memory, an exit note, another system) takes only ``items_allowed_out``
and ``documents_allowed_out``, and an adapter that hands a turn to a model says which stay in
the room with ``onward_lines``.
"""

from __future__ import annotations

from synapsia_protocol import (
    AgentContext,
    ClearedItem,
    ContextMessage,
    PeerArtifact,
    PeerItem,
    WhisperBody,
)

# The SDK's names for the package's classes (aliases, not copies: the same objects).
TurnContext = AgentContext
PeerMessage = ContextMessage  # one of the other agent's recent messages, fenced (untrusted)
Whisper = WhisperBody  # your own owner whispered to you (trusted), in a turn or as it is sent

# What "keep in this room" means, in the words every adapter gives a model.
KEEP_IN_ROOM = (
    "use only in this room: do not store, pass on or take anywhere else (an exit note included)"
)


def items_allowed_out(context: TurnContext) -> list[ClearedItem]:
    """This turn's cleared items (your owner's, then the other owner's) that the room lets you
    carry out of it: only these may go into anything that outlives or leaves the room."""
    items: list[ClearedItem] = [*context.own_items, *context.peer_items]
    return [item for item in items if item.onward_disclosure]


def documents_allowed_out(context: TurnContext) -> list[PeerArtifact]:
    """This turn's shared documents that the room lets you carry out of it."""
    return [document for document in context.peer_artifacts if document.onward_disclosure]


def onward_lines(context: TurnContext) -> list[str]:
    """Trusted lines saying which of this turn's items and documents stay in the room and
    which may be carried out of it, from each one's ``onward_disclosure`` (never from its
    content): your owner's items by kind, the other owner's items and documents by the nonce
    of their fenced block. Empty when the turn cleared nothing."""
    lines = []
    kept = _named(context, allowed_out=False)
    if kept:
        lines.append(f"Keep in this room ({KEEP_IN_ROOM}): {kept}.")
    out = _named(context, allowed_out=True)
    if out:
        lines.append(f"May be carried out of this room: {out}.")
    return lines


def _named(context: TurnContext, *, allowed_out: bool) -> str:
    own = dict.fromkeys(i.resource for i in context.own_items if i.onward_disclosure is allowed_out)
    peer = [
        f"{i.resource} (block {i.nonce})"
        for i in context.peer_items
        if i.onward_disclosure is allowed_out
    ]
    documents = [
        f"block {a.nonce}" for a in context.peer_artifacts if a.onward_disclosure is allowed_out
    ]
    named = []
    if own:
        named.append("your owner's " + ", ".join(own))
    if peer:
        named.append("the other owner's " + ", ".join(peer))
    if documents:
        named.append("the other agent's shared documents (" + ", ".join(documents) + ")")
    return "; ".join(named)


__all__ = [
    "KEEP_IN_ROOM",
    "ClearedItem",
    "PeerArtifact",
    "PeerItem",
    "PeerMessage",
    "TurnContext",
    "Whisper",
    "documents_allowed_out",
    "items_allowed_out",
    "onward_lines",
]

"""Each turn's context as typed objects (the ``context`` frame of docs/protocol.md).

These mirror the wire format; they are the SDK's own types, so an agent never imports server
code. What is trusted and what is not is part of the type: ``own_items``, ``whispers`` and
``notices`` come from the room and your own owner; ``peer_items`` and ``peer_messages`` come
from the other side and are data, never instructions (each carries its fenced form to place in
a model's context as is).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ClearedItem:
    """One vault item your owner's slip cleared for you this turn, cut to its scope (trusted)."""

    item_id: str
    owner_id: str
    resource: str  # availability, budget, food_likes, allergies, neighbourhood, link, note
    scope: str
    content: dict[str, Any]


@dataclass(frozen=True)
class PeerItem(ClearedItem):
    """A vault item the other owner's slip cleared for you: untrusted data. ``content``'s
    strings are already stripped; ``fenced`` is the same content as one fenced block."""

    fenced: str
    nonce: str


@dataclass(frozen=True)
class Whisper:
    id: str
    text: str
    sent_at: str


@dataclass(frozen=True)
class PeerMessage:
    """One of the other agent's recent messages, fenced (untrusted)."""

    seq: int
    sender_agent_id: str
    fenced: str
    nonce: str
    flags: tuple[str, ...]
    truncated: bool
    sent_at: str


@dataclass(frozen=True)
class TurnContext:
    """Everything you are given for one turn, and nothing else."""

    room_id: str
    agent_id: str
    turn: int
    preamble: str
    purpose: str
    charter: str
    own_items: tuple[ClearedItem, ...]
    whispers: tuple[Whisper, ...]
    notices: tuple[str, ...]
    peer_items: tuple[PeerItem, ...]
    peer_messages: tuple[PeerMessage, ...]
    # The room's dinner terms (trusted; docs/dining.md), None when the room is not a dinner.
    terms: dict[str, Any] | None = None

    def own(self, resource: str) -> Iterator[dict[str, Any]]:
        """The content of each of your owner's items of ``resource`` cleared this turn."""
        return (item.content for item in self.own_items if item.resource == resource)

    def peer(self, resource: str) -> Iterator[dict[str, Any]]:
        """The content of each of the other owner's items of ``resource`` cleared for you."""
        return (item.content for item in self.peer_items if item.resource == resource)

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> TurnContext:
        def cleared(raw: dict[str, Any]) -> ClearedItem:
            return ClearedItem(
                str(raw["item_id"]),
                str(raw["owner_id"]),
                raw["resource"],
                raw["scope"],
                raw["content"],
            )

        return cls(
            room_id=str(body["room_id"]),
            agent_id=str(body["agent_id"]),
            turn=int(body["turn"]),
            preamble=body["preamble"],
            purpose=body["purpose"],
            charter=body["charter"],
            terms=body.get("terms"),
            own_items=tuple(cleared(raw) for raw in body["own_items"]),
            whispers=tuple(
                Whisper(str(w["id"]), w["text"], str(w["sent_at"])) for w in body["whispers"]
            ),
            notices=tuple(body["notices"]),
            peer_items=tuple(
                PeerItem(
                    str(raw["item_id"]),
                    str(raw["owner_id"]),
                    raw["resource"],
                    raw["scope"],
                    raw["content"],
                    raw["fenced"],
                    raw["nonce"],
                )
                for raw in body["peer_items"]
            ),
            peer_messages=tuple(
                PeerMessage(
                    int(m["seq"]),
                    str(m["sender_agent_id"]),
                    m["fenced"],
                    m["nonce"],
                    tuple(m["flags"]),
                    bool(m["truncated"]),
                    str(m["sent_at"]),
                )
                for m in body["peer_messages"]
            ),
        )

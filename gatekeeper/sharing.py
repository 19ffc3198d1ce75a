"""May a shared artifact reach the other agent? The Gatekeeper's answer (``decide``).

An agent publishes an artifact with the ``publish_artifact`` tool, which its owner's slip
must clear (``tool:publish_artifact``, operation ``act``: decided like every action). Whether
the *other* agent may then read it is the same slip record's ``recipient``: ``both`` or
``peer_agent`` shares what the agent publishes with the other agent; ``own_agent`` (the
narrowest, the default) keeps it with the two owners. So an owner says who reads their
agent's documents in the slip they signed, and nothing the agents write changes it.

Deciding reads the live slip (signature, key, expiry, recipient) every time, and the live
seat of the recipient; nothing is cached. A publish already spent one use of the record, and
sharing what it published is not another use: a record whose uses are all spent by
publishing still clears sharing those artifacts (every other check still applies).
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from django.utils import timezone

from gatekeeper.decision import Decision, Outcome, RoomFacts, decide, deny
from slips.verification import capability_verdict

ARTIFACT_TOOL_RESOURCE = "tool:publish_artifact"
# Verdicts of the slip record that clear sharing: see the module's docstring for the second.
_CLEARING_VERDICTS = frozenset({"cleared", "uses_exhausted"})


@dataclass(frozen=True)
class ArtifactShareRequest:
    """May the artifact ``publisher_agent_id`` published reach ``recipient_agent_id``?

    The facts are the caller's, read in its transaction just before deciding. Without a
    recipient (the other seat has no agent yet) only the publisher's slip is decided."""

    room: RoomFacts
    publisher_owner_id: int
    publisher_agent_id: UUID
    recipient_agent_id: UUID | None = None
    recipient_revoked: bool = False
    recipient_active: bool = True


@decide.register
def _decide_artifact_share(request: ArtifactShareRequest) -> Decision:
    if request.room.state != "open":
        return deny("room_not_open")
    if request.recipient_agent_id == request.publisher_agent_id:
        return deny("gatekeeper.ambiguous")  # an agent is never its own "other agent"
    if request.recipient_revoked:
        return deny("agent_revoked")
    if not request.recipient_active:
        return deny("agent_withdrawn")
    verdict = capability_verdict(
        room_id=request.room.room_id,
        owner_id=request.publisher_owner_id,
        agent_id=request.publisher_agent_id,
        resource=ARTIFACT_TOOL_RESOURCE,
        operation="act",
        recipient="peer_agent",
        now=timezone.now(),
    )
    if verdict.rule == "verification_error":
        return deny("slip_verification_error")  # a check that failed is never a pass
    if verdict.rule not in _CLEARING_VERDICTS:
        return deny(verdict.rule)
    return Decision(
        Outcome.ALLOW, "cleared", slip_id=verdict.slip_id, capability=verdict.capability
    )


def share_goes_onward(decision: Decision) -> bool:
    """Whether an allowed share lets the reader carry the document out of the room: the
    effective record's ``onward_disclosure`` (the publisher's slip met with the other owner's
    rule for the same tool, after the tier). A record whose uses are spent is judged no
    further than its uses, so it has no effective record: the document stays in the room."""
    return (
        decision.allowed
        and decision.capability is not None
        and decision.capability.onward_disclosure
    )

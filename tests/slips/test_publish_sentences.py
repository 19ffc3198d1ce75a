"""The publishing item's sentence says who reads what the agent publishes: ``both`` shares
the documents with the other agent, ``own_agent`` keeps them with the two owners, and
``peer_agent`` shares them without letting the agent publish (gatekeeper.sharing)."""

from __future__ import annotations

from typing import Any

import pytest

from slips.capabilities import Capability
from slips.sentences import capability_sentence, checklist_sentences
from tests.artifacts.conftest import publish, sign_publishing
from tests.conftest import OpenRoom

SHARED_WORDS = "share them with the other agent"


def _publishing(recipient: str) -> Capability:
    return Capability("tool:publish_artifact", "act", "call", recipient, 2**40, 5, False, "none")


def test_each_recipient_says_who_reads_the_documents() -> None:
    both = capability_sentence(_publishing("both"), details=False)
    own = capability_sentence(_publishing("own_agent"), details=False)
    peer = capability_sentence(_publishing("peer_agent"), details=False)
    assert both == (
        "Let my agent publish documents to the room and share them with the other agent."
    )
    assert SHARED_WORDS not in own and "the other agent is not given them" in own
    assert "Let the other agent read the documents my agent publishes" in peer
    assert "does not let my agent publish" in peer
    assert len({both, own, peer}) == 3
    detailed = capability_sentence(_publishing("both"))
    assert detailed.endswith(f"{SHARED_WORDS} (up to 5 times).")


def test_the_checklist_offers_the_sentence_for_each_recipient() -> None:
    sentences = checklist_sentences(tools=("tool:publish_artifact", "tool:book_table"))
    for recipient in ("own_agent", "both", "peer_agent"):
        key = f"tool:publish_artifact|act|call|{recipient}"
        assert sentences[key] == capability_sentence(_publishing(recipient), details=False)
    assert "tool:book_table|act|call|own_agent" in sentences
    assert "tool:book_table|act|call|both" not in sentences


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("recipient", "published", "shared"),
    [("both", True, True), ("own_agent", True, False), ("peer_agent", False, True)],
)
def test_the_sentence_matches_what_the_gatekeeper_does(
    make_open_room: Any, settings: Any, recipient: str, published: bool, shared: bool
) -> None:
    settings.SYNAPSIA = {**settings.SYNAPSIA, "TOOL_POLICY_DEFAULT": "allow_all"}
    room: OpenRoom = make_open_room()
    sign_publishing(room, room.a, recipient)
    result = publish(room, room.a)
    sentence = capability_sentence(_publishing(recipient), details=False)
    assert (result.status == "executed") is published
    assert ("does not let my agent publish" not in sentence) is published
    assert (SHARED_WORDS in sentence or "Let the other agent read" in sentence) is shared
    if published:
        from artifacts.models import Artifact

        assert Artifact.objects.get().shared_with_peer is shared

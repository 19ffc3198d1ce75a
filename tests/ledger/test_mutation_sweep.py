"""A randomized sweep of 10,000 mutations of a stored chain: every one is detected.

Mutations: change any field of any event (seq, kind, timestamp, any data value, prev_hash,
hash), delete an event, swap two, insert a forged one (with a correctly computed hash), and
truncate the tail (against the signed head / head row). Checked by the server's verifier
(``ledger.chain.chain_check``) and the independent standalone one (``ledger.verify_export``).
"""

from __future__ import annotations

import copy
import random
import uuid
from datetime import UTC, datetime, timedelta

from ledger.chain import (
    GENESIS_HASH,
    ChainEvent,
    HeadClaim,
    chain_check,
    event_hash,
    occurred_at_text,
)
from ledger.verify_export import FORMAT, Broken, verify
from tests.ledger.conftest import sample_events

MUTATIONS = 10_000
CHAIN_LENGTH = 12


def _chain(room_id: str) -> list[dict]:
    events, prev = [], GENESIS_HASH
    start = datetime(2026, 1, 1, tzinfo=UTC)
    # No pauses: a pause requires a signed head (test_rewrite_attacks), and this export
    # leaves signatures out to sweep the chain's own checks.
    records = [r for r in sample_events(2 * CHAIN_LENGTH) if r.kind != "room_paused"]
    for seq, record in enumerate(records[:CHAIN_LENGTH], start=1):
        data = record.model_dump(mode="json", exclude={"kind"})
        when = occurred_at_text(start + timedelta(seconds=seq, microseconds=seq))
        digest = event_hash(
            room_id=room_id, seq=seq, kind=record.kind, occurred_at=when, data=data, prev_hash=prev
        )
        events.append(
            {
                "seq": seq,
                "kind": record.kind,
                "occurred_at": when,
                "data": data,
                "prev_hash": prev,
                "hash": digest,
            }
        )
        prev = digest
    return events


def _changed(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + random.choice([-1, 1, 7])
    if value is None:
        return "x"
    text = str(value)
    i = random.randrange(len(text))
    replacement = random.choice([c for c in "0123456789abcdefxyz:-_." if c != text[i]])
    return text[:i] + replacement + text[i + 1 :]


def _mutate(events: list[dict], room_id: str) -> tuple[list[dict], dict]:
    """A mutated copy of the events and the head the verifier is given."""
    events = copy.deepcopy(events)
    head = {"seq": events[-1]["seq"], "hash": events[-1]["hash"]}
    choice = random.randrange(6)
    i = random.randrange(len(events))
    if choice == 0:  # change one field (any byte of any field)
        field = random.choice(["seq", "kind", "occurred_at", "prev_hash", "hash", "data"])
        if field == "data":
            key = random.choice(list(events[i]["data"]))
            events[i]["data"][key] = _changed(events[i]["data"][key])
        else:
            events[i][field] = _changed(events[i][field])
    elif choice == 1:  # delete
        del events[i]
        if not events:
            events, head = [], {"seq": 0, "hash": GENESIS_HASH}
    elif choice == 2:  # swap two distinct events (their contents, keeping positions)
        j = random.choice([k for k in range(len(events)) if k != i])
        events[i], events[j] = events[j], events[i]
    elif choice == 3:  # forge an event with a correct hash, anywhere, renumbering what follows
        prev = events[i - 1]["hash"] if i else GENESIS_HASH
        data = {"participant_id": "mallory", "participant_kind": "agent"}
        when = events[i]["occurred_at"]
        forged = {
            "seq": i + 1,
            "kind": "join",
            "occurred_at": when,
            "data": data,
            "prev_hash": prev,
        }
        forged["hash"] = event_hash(room_id=room_id, **forged)
        for later in events[i:]:
            later["seq"] += 1
        events.insert(i, forged)
    elif choice == 4:  # truncate the tail and rewrite the head to match (signed head remains)
        keep = random.randrange(len(events))
        events = events[:keep]
        head = {"seq": keep, "hash": events[-1]["hash"] if events else GENESIS_HASH}
    else:  # extend: append a forged event with a correct hash, head row not moved
        tip = events[-1]
        forged = {
            "seq": tip["seq"] + 1,
            "kind": "leave",
            "occurred_at": tip["occurred_at"],
            "data": {"participant_id": "a1", "participant_kind": "agent"},
            "prev_hash": tip["hash"],
        }
        forged["hash"] = event_hash(room_id=room_id, **forged)
        events.append(forged)
    return events, head


def _server_detects(room_id: str, events: list[dict], head: dict, signed: dict) -> bool:
    verdict = chain_check(
        room_id=room_id,
        events=(ChainEvent(room_id=room_id, **e) for e in events),
        claims=[HeadClaim(signed["seq"], signed["hash"], "signed head")],
        tip=HeadClaim(head["seq"], head["hash"], "head row"),
    )
    return not verdict.ok


def _standalone_detects(room_id: str, events: list[dict], head: dict) -> bool:
    # Signatures are tested elsewhere; here the signed head's (seq, hash) pin is what matters,
    # so the sweep checks the chain part of the export (head + checkpoint).
    export = {
        "format": FORMAT, "room_id": room_id, "checkpoint": {"seq": 0, "hash": GENESIS_HASH},
        "head": head, "events": events, "signed_heads": [],
        "signed_message_prefix": "synapsia-ledger-head-v1\n",
    }  # fmt: skip
    try:
        verify(export)
    except Broken:
        return True
    return False


def test_ten_thousand_random_mutations_are_all_detected() -> None:
    random.seed(20261129)
    room_id = str(uuid.uuid4())
    events = _chain(room_id)
    signed = {"seq": events[-1]["seq"], "hash": events[-1]["hash"]}
    assert not _server_detects(room_id, events, signed, signed)
    assert not _standalone_detects(room_id, events, signed)
    missed_server, missed_standalone, unpinned_truncations = [], [], 0
    for _ in range(MUTATIONS):
        mutated, head = _mutate(events, room_id)
        if not _server_detects(room_id, mutated, head, signed):
            missed_server.append((mutated, head))
        if not _standalone_detects(room_id, mutated, head):
            # A consistent truncation (head rewritten) is only caught against a signed head,
            # which the sweep's export leaves out; count those separately.
            if len(mutated) < len(events) and head["seq"] == len(mutated):
                unpinned_truncations += 1
            else:
                missed_standalone.append((mutated, head))
    print(f"{MUTATIONS} mutations; server verifier missed {len(missed_server)}")
    assert missed_server == []
    assert missed_standalone == []
    assert unpinned_truncations > 0  # the sweep did exercise truncation

"""Receipts for owners, exports a third party verifies with the standalone verifier."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from django.utils import timezone

from ledger.events import (
    ActionExecuted,
    Denial,
    Disclosure,
    FlareRaised,
    GrantApproved,
    GrantRequested,
    InjectionSuspected,
    Join,
    SlipSigned,
)
from ledger.models import LedgerEvent
from ledger.receipts import ReceiptItemDisclosures, receipt_build, receipt_export
from ledger.services import ledger_append
from ledger.signing import ledger_sign_head
from rooms.ledger_api import receipt_words

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def _negotiation(room_id) -> None:
    events = [
        Join(participant_id="agent-a", participant_kind="agent"),
        Join(participant_id="agent-b", participant_kind="agent"),
        SlipSigned(
            owner_id="1", agent_id="agent-a", slip_id="slip-1", key_id="k1", capability_count=3
        ),
        Disclosure(owner_id="1", item_id="budget", recipient_agent_id="agent-b", turn=1),
        Disclosure(owner_id="1", item_id="budget", recipient_agent_id="agent-b", turn=2),
        Disclosure(owner_id="1", item_id="allergies", recipient_agent_id="agent-b", turn=2),
        Denial(rule="slip.not_cleared", subject_id="agent-b", resource_id="calendar"),
        GrantRequested(grant_id="g1", action_id="act-1", owner_id="1"),
        GrantApproved(grant_id="g1", action_id="act-1", owner_id="1"),
        ActionExecuted(
            action_id="act-1", agent_id="agent-a", tool="book_table", grant_id="g1", outcome="ok"
        ),
        InjectionSuspected(source_agent_id="agent-b", message_seq=7, rule="fence.instruction"),
        FlareRaised(agent_id="agent-a", reason="loop"),
    ]  # fmt: skip
    for event in events:
        with transaction.atomic():
            ledger_append(room_id=room_id, event=event)


def test_receipt_summarises_the_room() -> None:
    room_id = uuid.uuid4()
    _negotiation(room_id)
    receipt = receipt_build(room_id=room_id)
    assert receipt.verified and receipt.head_seq == 12 and receipt.events == 12
    assert [p.participant_id for p in receipt.participants] == ["agent-a", "agent-b"]
    assert receipt.permissions_granted == 4  # 3 capabilities + 1 grant
    assert receipt.permissions_used == 4  # 3 disclosures + 1 action
    budget = next(d for d in receipt.disclosures_by_item if d.item_id == "budget")
    assert (budget.times, budget.recipients, budget.turns) == (2, ["agent-b"], [1, 2])
    assert receipt.denials_by_rule == {"slip.not_cleared": 1}
    assert receipt.grants["approved"] == 1 and receipt.actions["executed"] == 1
    assert [f.rule for f in receipt.flares] == ["loop"]
    assert [(i.agent_id, i.rule) for i in receipt.injections_suspected] == [
        ("agent-b", "fence.instruction")
    ]
    assert receipt.summary[0].startswith("Ledger verified: 12 events")
    words = receipt_words(receipt, {"agent-b": "Bob's agent"})
    # The ledger's own event number, never a message number the event does not name as such.
    assert "A message from Bob's agent was flagged (#11): " in "\n".join(words)
    LedgerEvent.objects.filter(room_id=room_id, seq=5).update(data={"turn": "x"})
    broken = receipt_build(room_id=room_id)
    assert not broken.verified and broken.first_bad_seq == 5 and broken.unreadable_events == 1
    assert "it breaks at #5" in broken.summary[0]


def test_an_item_disclosed_to_both_agents_says_how_often_each_had_it() -> None:
    """ "Twice to A and B" would not say whether each had it twice: with several recipients
    the sentence says "once each", or how many times in all."""
    room_id = uuid.uuid4()
    _negotiation(room_id)
    names = {"a": "Alice", "agent-a": "Alice's agent", "agent-b": "Bob's agent", "b": "Bob"}

    def said(times: int, recipients: list[str], turns: list[int]) -> list[str]:
        item = ReceiptItemDisclosures(
            owner_id="b", item_id="b", times=times, recipients=recipients, turns=turns
        )
        receipt = receipt_build(room_id=room_id).model_copy(update={"disclosures_by_item": [item]})
        return [w for w in receipt_words(receipt, names) if w.startswith("Disclosed")]

    assert said(2, ["agent-b", "agent-a"], [1, 1]) == [  # named in order, whoever had it first
        "Disclosed to Alice's agent and Bob's agent, once each (turn 1): Bob."
    ]
    assert said(5, ["agent-a", "agent-b"], [1, 2, 3]) == [
        "Disclosed 5 times in all, to Alice's agent and Bob's agent (turns 1, 2 and 3): Bob."
    ]
    assert said(2, ["agent-b"], [1, 2]) == ["Disclosed twice to Bob's agent (turns 1 and 2): Bob."]


def test_owners_read_the_ledger_and_strangers_get_404(make_open_room, make_owner) -> None:
    opened = make_open_room()
    room_id = opened.room.id
    base = LedgerEvent.objects.filter(room_id=room_id).count()  # rooms may log its own events
    _negotiation(room_id)
    ledger_sign_head(room_id=room_id)
    last = base + 12
    before = timezone.localdate()
    for seat in (opened.a, opened.b):
        client = Client()
        client.force_login(seat.owner)
        page = client.get(f"/api/rooms/{room_id}/ledger?limit=5").json()
        assert [e["seq"] for e in page["events"]] == [1, 2, 3, 4, 5] and page["next_after"] == 5
        rest = client.get(f"/api/rooms/{room_id}/ledger?after=5").json()
        assert rest["events"][-1]["seq"] == last and rest["next_after"] is None
        assert rest["head"]["seq"] == last and rest["signed_heads"][-1]["seq"] == last
        assert client.get(f"/api/rooms/{room_id}/receipt").json()["verified"] is True
        export = client.get(f"/api/rooms/{room_id}/receipt/export")
        assert export.status_code == 200 and len(export.json()["events"]) == last
        # Named by the day (the owner's, UTC until chosen), never by the room's id.
        assert export["Content-Disposition"] in {
            f'attachment; filename="synapsia-ledger-{day:%Y-%m-%d}.json"'
            for day in (before, timezone.localdate())
        }
        assert str(room_id) not in export["Content-Disposition"]
    stranger = Client()
    stranger.force_login(make_owner("mallory"))
    for path in ("ledger", "receipt", "receipt/export"):
        assert stranger.get(f"/api/rooms/{room_id}/{path}").status_code == 404
        assert Client().get(f"/api/rooms/{room_id}/{path}").status_code == 401


def _run_verifier(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """The verifier copied out of the project and run isolated (-I: no Synapsia, no Django)."""
    standalone = path.parent / "verify_export.py"
    shutil.copy(ROOT / "ledger" / "verify_export.py", standalone)
    return subprocess.run(
        [sys.executable, "-I", str(standalone), str(path), *extra],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=path.parent,
    )


def test_export_verifies_standalone_and_tampering_fails(make_chain, tmp_path) -> None:
    room_id = make_chain(10)
    ledger_sign_head(room_id=room_id)
    export = receipt_export(room_id)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(export))
    result = _run_verifier(good)
    assert result.returncode == 0, result.stderr
    # heads at the pauses (#4, #8, signed on append) and the one signed here (#10)
    assert (
        result.stdout.strip()
        == "The room's ledger: intact, events 1..10, 3 signed head(s) verified"
    )
    assert str(room_id) not in result.stdout
    # The module form works too (no Django imported).
    module = subprocess.run(
        [sys.executable, "-m", "ledger.verify_export", str(good)],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert module.returncode == 0, module.stderr

    def broken(mutate, *extra: str) -> str:
        copy = json.loads(json.dumps(export))
        mutate(copy)
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(copy))
        result = _run_verifier(path, *extra)
        assert result.returncode == 1, result.stdout
        return result.stderr

    assert "at seq 4" in broken(lambda e: e["events"][3]["data"].update(participant_id="x"))
    assert "at seq 6" in broken(lambda e: e["events"].pop(5))
    assert "at seq 3" in broken(lambda e: e["events"].__setitem__(slice(2, 4), e["events"][3:1:-1]))
    relinked = broken(lambda e: e["events"][2].update(prev_hash="0" * 64))
    assert relinked.strip() == (
        "BROKEN at seq 3: its link to the event before it does not match that event"
    )

    def forge_checkpoint(e: dict[str, Any]) -> None:
        # The first events cut and the checkpoint moved past them, with no purge saying so.
        e["checkpoint"] = {"seq": 3, "hash": e["events"][2]["hash"]}
        del e["events"][:3]

    forged = broken(forge_checkpoint)
    assert forged.strip() == (
        "BROKEN at seq 4: the record starts after event 3, but no retention clean-up in it "
        "says it removed the events up to there"
    )

    def truncate(e) -> None:  # drop the tail and rewrite the head: the signed head remembers
        del e["events"][8:]
        e["head"] = {"seq": 8, "hash": e["events"][-1]["hash"]}

    assert "at seq 9" in broken(truncate)

    def forge_signature(e) -> None:
        sig = bytearray(__import__("base64").b64decode(e["signed_heads"][0]["signature"]))
        sig[5] ^= 0x01
        e["signed_heads"][0]["signature"] = __import__("base64").b64encode(sig).decode()

    assert "signature is invalid" in broken(forge_signature)
    other_key = "A" * 43 + "="
    assert "untrusted key" in broken(lambda e: None, "--public-key", other_key)


def test_a_file_the_verifier_cannot_read_is_said_in_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What went wrong and what to do, never an exception's repr; exit 1 as for a break."""
    from ledger import verify_export

    missing = tmp_path / "synapsia-ledger-2026-12-07.json"
    assert verify_export.main([str(missing)]) == 1
    err = capsys.readouterr().err
    assert err.strip() == (
        f"Cannot read {missing}: no such file. Check the file's name and folder."
    )
    not_json = tmp_path / "notes.json"
    not_json.write_text("Friday at 19:30\n")
    assert verify_export.main([str(not_json)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"Cannot read {not_json}: it is not a ledger export (it stops")
    assert "Download the record again from the room's ledger page" in err
    a_list = tmp_path / "list.json"
    a_list.write_text("[1, 2]")
    assert verify_export.main([str(a_list)]) == 1
    assert capsys.readouterr().err.startswith(f"Cannot read {a_list}: it is not a ledger export")
    assert verify_export.main([str(tmp_path)]) == 1
    assert "it is a folder" in capsys.readouterr().err
    # Parsed, but a part the check needs is gone: a broken export, still in words.
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"format": verify_export.FORMAT, "room_id": "r"}))
    assert verify_export.main([str(partial)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"BROKEN: {partial} is not a complete ledger export")
    for internal in ("Error(", "Errno", "KeyError", "'checkpoint'"):
        assert internal not in err

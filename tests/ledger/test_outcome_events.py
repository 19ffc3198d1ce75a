"""The outcome in the ledger: ``outcome_recorded`` events verify like every event (server and
the standalone verifier), and the receipt says the outcome in words from codes alone."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import get_args

import pytest
from django.db import transaction

from ledger.events import Join, NoPlanReason, OutcomeRecorded
from ledger.receipts import NO_PLAN_REASON_WORDS, receipt_build, receipt_export
from ledger.services import ledger_append
from ledger.signing import ledger_sign_head
from ledger.verification import ledger_verify_room

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def _append(room_id: uuid.UUID, *events: object) -> None:
    for event in events:
        with transaction.atomic():
            ledger_append(room_id=room_id, event=event)  # type: ignore[arg-type]


def test_every_reason_code_has_words() -> None:
    assert set(NO_PLAN_REASON_WORDS) == set(get_args(NoPlanReason))


def test_no_agreement_from_both_sides_reads_as_both_reasons_in_words() -> None:
    room_id = uuid.uuid4()
    _append(
        room_id,
        Join(participant_id="agent-a", participant_kind="agent"),
        OutcomeRecorded(outcome="no_agreement", action_id="act-1", owner_id="1", reason="time"),
        OutcomeRecorded(outcome="no_agreement", action_id="act-2", owner_id="2", reason="budget"),
    )
    receipt = receipt_build(room_id=room_id)
    assert receipt.verified
    assert receipt.outcome is not None
    assert receipt.outcome.outcome == "no_agreement"
    assert receipt.outcome.reasons == {"1": "time", "2": "budget"}
    assert (
        "Outcome: no agreement (No time when both of you are free; "
        "No price within both of your budgets)." in receipt.summary
    )


def test_an_agreement_replaces_an_earlier_no_plan_and_the_export_verifies(tmp_path) -> None:
    room_id = uuid.uuid4()
    _append(
        room_id,
        OutcomeRecorded(outcome="no_agreement", action_id="act-1", owner_id="1", reason="venue"),
        OutcomeRecorded(outcome="agreed", action_id="act-2", owner_id="2"),
    )
    receipt = receipt_build(room_id=room_id)
    assert receipt.outcome is not None
    assert (receipt.outcome.outcome, receipt.outcome.reasons) == ("agreed", {})
    assert receipt.outcome.seq == 2
    assert any(line.startswith("Outcome: agreed, a table was booked") for line in receipt.summary)
    assert not any("no agreement" in line for line in receipt.summary)
    assert ledger_verify_room(room_id=room_id).ok

    ledger_sign_head(room_id=room_id)
    export = tmp_path / "export.json"
    export.write_text(json.dumps(receipt_export(room_id)))
    result = subprocess.run(
        [sys.executable, "-m", "ledger.verify_export", str(export)],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "intact, events 1..2" in result.stdout

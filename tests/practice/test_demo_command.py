"""`manage.py demo --headless`: the practice negotiation to its end with no browser, in each
profile (this module runs in both passes of `make test`), against a real Daphne process."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from typing import Any

import pytest
from django.core.management import call_command

from ledger.models import LedgerEvent
from ledger.verification import ledger_verify_room
from practice.models import PracticeOwner, PracticeRoom
from practice.seeding import practice_seed
from rooms.models import Message, RoomMember
from slips.models import DeviceKey, VaultItem
from synapsia.serving import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

BOBS_FIGURES = ("4000", "9000", "40.00", "90.00", "40 EUR", "90 EUR", "40-90", "40 to 90")
# What may hold those digits by chance in the demo's own report: a room's id, a booking's
# reference, the server's URL (its port). Taken out of the report before looking for Bob's
# figures, so a random id is never one; the agents' messages are searched as they are.
_BY_CHANCE = re.compile(r"[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}|\bbk-[0-9a-f]+|https?://\S+")


def _stated(figures: tuple[str, ...], text: str) -> list[str]:
    """Which of ``figures`` ``text`` states, ids, references and URLs aside."""
    words = _BY_CHANCE.sub(" ", text)
    return [f for f in figures if f in words]


def _demo(*flags: str) -> tuple[int, str, Any]:
    out = io.StringIO()
    try:
        call_command("demo", "--headless", "--timeout", "60", *flags, stdout=out)
        code = 0
    except SystemExit as exited:
        code = int(exited.code or 0)
    room = PracticeRoom.objects.order_by("-seeded_at").first()
    assert room is not None
    return code, out.getvalue(), room.room_id


def _events(room_id: Any, kind: str) -> list[LedgerEvent]:
    return list(LedgerEvent.objects.filter(room_id=room_id, kind=kind).order_by("seq"))


def _booked(room_id: Any) -> list[LedgerEvent]:
    return [e for e in _events(room_id, "action_executed") if e.data["tool"] == "book_table"]


def test_the_headless_demo_books_the_table_with_a_recorded_demo_approval() -> None:
    code, out, room_id = _demo()
    assert code == 0, out
    # The plan in words, in the room's time zone; no id, rule or ISO time in what it says.
    assert re.search(
        r"Alice's agent: booked — Osteria Kanal, \w+ \d{1,2} \w+ \d{4} at \d{2}:\d{2}, Berlin "
        r"time, \d+ EUR per person, table for 2 \(\d+ EUR in all\), booking bk-[0-9a-f]+$",
        out,
        re.M,
    ), out
    assert not re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-", out), out  # no UUID anywhere
    assert "approval_per_use" not in out and "awaiting_grant" not in out
    # No ISO time and no line of the negotiation's grammar, in the agents' logs or the report.
    assert not re.search(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}", out), out
    assert not re.search(r"\b(PROPOSE|ACCEPT|BOOKED) round=|venue=", out), out
    assert "[bob's agent] heard #1: a proposal, round 1" in out
    assert "[alice's agent] agreed on Osteria Kanal (Italian, Kreuzberg) on " in out
    assert (
        "stand-in owner: approved “book a table” with the demo key. Your permission slip says"
        in out
    )
    # The receipt as the owners' ledger page words it.
    assert "The server's own check: intact, " in out and "the room's ledger is intact: " in out
    # The demo owners by their names, as their pages call them.
    assert "Disclosed once to Alice's agent (turn 1): Alice's budget." in out
    # Shared with both agents, named in order whichever agent's turn came first: once each
    # (in the one turn each takes here), or how many times in all.
    assert re.search(
        r"Disclosed (to Alice's agent and Bob's agent, once each|\d+ times in all, to Alice's "
        r"agent and Bob's agent) \(turns? [\d, and]+\): Bob's budget\.$",
        out,
        re.M,
    ), out
    assert out.rstrip().endswith("practice negotiation completed")
    (approved,) = _events(room_id, "grant_approved")
    assert approved.data["key_custody"] == "demo_seeding"  # recorded as a stand-in's approval
    (executed,) = _booked(room_id)
    assert executed.data["outcome"] == "ok"
    assert ledger_verify_room(room_id=room_id).ok


def test_when_alice_says_no_nothing_is_booked_and_the_demo_exits_1() -> None:
    code, out, room_id = _demo("--owner-answer", "deny")
    assert code == 1, out
    assert (
        "stand-in owner: denied “book a table” and resumed the room. Your permission slip says"
        in out
    )
    refused = re.search(r"\[alice's agent\] said #\d+: My owner did not approve that booking", out)
    assert refused, out
    # After each refusal Alice's agent puts the next plan forward, until no message is left.
    assert re.search(r"\[alice's agent\] said #\d+: How about ", out[refused.end() :]), out
    assert out.rstrip().endswith("practice run FAILED (see above)")
    assert _booked(room_id) == []
    assert len(_events(room_id, "grant_denied")) >= 2
    assert ledger_verify_room(room_id=room_id).ok  # a refusal is recorded, not a breakage


def test_with_bobs_budget_withheld_it_still_books_and_never_states_it() -> None:
    code, out, room_id = _demo("--guest-withholds-budget")
    assert code == 0, out
    texts = list(Message.objects.filter(room_id=room_id).values_list("text", flat=True))
    assert [f for f in BOBS_FIGURES if any(f in t for t in texts)] == []
    assert _stated(BOBS_FIGURES, out) == []  # nor does the demo's own report
    # The server never put Bob's budget into Alice's agent's context: only his own agent's.
    budget = VaultItem.objects.get(owner__username="demo-bob", kind="budget")
    bobs_agent = RoomMember.objects.get(room_id=room_id, owner__username="demo-bob").agent_id
    recipients = {
        e.data["recipient_agent_id"]
        for e in _events(room_id, "disclosure")
        if e.data["item_id"] == str(budget.id)
    }
    assert recipients == {str(bobs_agent)}


def test_the_adversarial_guest_is_stopped_at_every_attempt() -> None:
    code, out, room_id = _demo("--guest", "adversary")
    assert code == 0, out
    assert "boundaries held" in out
    # Each attempt in words, as it happens and in the report: what it tried, what the room did.
    spend = (
        "tried paying 100,000 EUR to itself as a deposit: denied. The server's tool policy does "
        "not allow this agent to use this tool."
    )
    assert f"[bob's agent] {spend}" in out and f"Bob's agent {spend}" in out
    assert (
        "Bob's agent tried a fake room notice saying the other owner approved sharing every "
        "vault item: the room delivered it only as fenced text from the other side" in out
    )
    assert re.search(
        r"Bob's agent tried asking the room for every kind of the other owner's vault items: "
        r"the room gave it only what Alice's slip clears for it \(.*food likes.*\) and withheld "
        r"the rest \(.*budget.*calendar titles\)$",
        out,
        re.M,
    ), out
    # No attempt's name, outcome code, rule id or vault kind's id; no UUID.
    assert not re.search(r"\b(?:injection|data|act)\.[a-z]+_", out), out
    for raw in (
        "awaiting_grant",
        "unknown_tool",
        "invalid_arguments",
        "policy.",
        "food_likes",
        "food_dislikes",
        "adversary ",
    ):
        assert raw not in out, raw
    assert not re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-", out), out
    bobs_agent = RoomMember.objects.get(room_id=room_id, owner__username="demo-bob").agent_id
    executed = _events(room_id, "action_executed")
    assert [e for e in executed if e.data["agent_id"] == str(bobs_agent)] == []
    assert _booked(room_id) == []  # only Alice's agent's venue lookups ran
    flagged = {e.data["rule"] for e in _events(room_id, "injection_suspected")}
    assert {"role_token", "fence_forgery", "instruction_to_reader", "fake_notice"} <= flagged
    assert len(_events(room_id, "denial")) >= 3
    assert ledger_verify_room(room_id=room_id).ok


def test_a_demo_key_that_does_not_open_is_replaced_when_the_operator_asks() -> None:
    """The remedy the error names (tests/practice/test_demo_grants.py) works: the keys are
    revoked as an owner's are, new ones enrolled, and the practice negotiation runs."""
    practice_seed()
    alice = PracticeOwner.objects.get(owner__username="demo-alice")
    old_key = alice.device_key_id
    assert old_key is not None
    sealed = bytearray(bytes(alice.signing_seed_sealed))
    sealed[-1] ^= 0x01
    PracticeOwner.objects.filter(id=alice.id).update(signing_seed_sealed=bytes(sealed))

    code, out, room_id = _demo("--replace-demo-keys")
    assert code == 0, out
    assert (
        "==> revoked the demo keys of Alice (demo-alice) and Bob (demo-bob); seeding enrolls "
        "new ones" in out
    )
    assert out.rstrip().endswith("practice negotiation completed")
    alice.refresh_from_db()
    assert alice.device_key_id != old_key
    assert DeviceKey.objects.get(id=old_key).revoked_at is not None
    revoked = LedgerEvent.objects.filter(kind="key_revoked", data__key_id=str(old_key))
    assert revoked.exists()  # in the earlier practice room's ledger, as an owner's would be
    signed = {e.data["key_id"] for e in _events(room_id, "slip_signed")}
    assert str(alice.device_key_id) in signed and str(old_key) not in signed


def test_demo_refuses_an_unmigrated_database(tmp_path: Any) -> None:
    """A real, empty database (the embedded profile's file): it says what to run first."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["SYNAPSIA_SQLITE_PATH"] = str(tmp_path / "never-migrated.sqlite3")
    result = subprocess.run(
        [sys.executable, "manage.py", "demo", "--headless"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1, result.stdout
    assert "unapplied migrations: run `manage.py migrate` first" in result.stderr
    assert "seeding" not in result.stdout  # nothing was attempted

"""Who may read a room's ledger (``gatekeeper.ledger_access``) as a table: every kind of
reader x a live room's seat or a deleted room's record, against the rule written out here.

Pure: the users are unsaved ``User`` objects and the deletion record's ``owners`` a list, as
``rooms.ledger_api`` reads them; likewise the keys a witness may be signed with. The API end
to end is ``tests/rooms/test_deleted_room_ledger`` and ``tests/ledger/test_witnesses``.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.contrib.auth.models import User

from gatekeeper.ledger_access import (
    LedgerAccess,
    is_same_account,
    ledger_access,
    witness_key_usable,
)
from slips.models import DeviceKey, KeyCustody

JOINED = datetime(2026, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)
ALICE_PK, BOB_PK, MALLORY_PK = 7, 8, 9


def _user(pk: int, joined: datetime = JOINED, *, staff: bool = False, su: bool = False) -> User:
    return User(pk=pk, username=f"u{pk}", date_joined=joined, is_staff=staff, is_superuser=su)


# Reader kinds: (name, user, was alice or bob in the deletion record).
READERS: list[tuple[str, User, bool]] = [
    ("alice", _user(ALICE_PK), True),
    ("bob", _user(BOB_PK), True),
    ("a stranger", _user(MALLORY_PK), False),
    ("staff", _user(MALLORY_PK, staff=True), False),
    ("a superuser", _user(MALLORY_PK, staff=True, su=True), False),
    ("a later account with alice's id", _user(ALICE_PK, JOINED + timedelta(days=1)), False),
    ("alice's id joined a microsecond later", _user(ALICE_PK, JOINED + timedelta(0, 0, 1)), False),
    ("an unsaved user", User(username="nobody", date_joined=JOINED), False),
]
RECORD = [
    {"user_id": ALICE_PK, "date_joined": JOINED.isoformat()},
    {"user_id": BOB_PK, "date_joined": JOINED.isoformat()},
]
# The room: live (the reader holds a seat or not) or deleted (its record, or none at all).
ROOMS: list[tuple[str, bool, list[object] | None]] = [
    ("live, seated", True, None),
    ("live, no seat", False, None),
    ("deleted", False, list(RECORD)),
    ("deleted, record lists no owners (older record)", False, []),
    ("no such room", False, None),
]
CASES = list(itertools.product(READERS, ROOMS))


def _expected(seated: bool, former: bool, owners: list[object] | None) -> LedgerAccess:
    if seated:
        return LedgerAccess.SEATED
    if owners and former:
        return LedgerAccess.FORMER_OWNER
    return LedgerAccess.REFUSED


@pytest.mark.parametrize(("reader", "room"), CASES, ids=[f"{r[0]}|{m[0]}" for r, m in CASES])
def test_every_reader_and_room(
    reader: tuple[str, User, bool], room: tuple[str, bool, list[object] | None]
) -> None:
    _, user, former = reader
    _, seated, owners = room
    got = ledger_access(reader=user, holds_seat=seated, deleted_owners=owners)
    assert got == _expected(seated, former, owners)


def test_the_table_reaches_every_answer() -> None:
    answers = {ledger_access(reader=r[1], holds_seat=m[1], deleted_owners=m[2]) for r, m in CASES}
    assert answers == set(LedgerAccess)


@pytest.mark.parametrize(
    "entry",
    [
        "7",
        None,
        {"user_id": str(ALICE_PK), "date_joined": JOINED.isoformat()},  # id as text
        {"user_id": ALICE_PK},  # no moment joined
        {"user_id": ALICE_PK, "date_joined": "not a time"},
        {"user_id": ALICE_PK, "date_joined": JOINED.replace(tzinfo=None).isoformat()},  # naive
        {"date_joined": JOINED.isoformat()},
    ],
)
def test_an_entry_that_cannot_be_read_names_nobody(entry: object) -> None:
    alice = _user(ALICE_PK)
    assert not is_same_account(entry, alice)
    assert ledger_access(reader=alice, holds_seat=False, deleted_owners=[entry]) is (
        LedgerAccess.REFUSED
    )


def test_the_same_moment_in_another_zone_is_the_same_account() -> None:
    other_zone = JOINED.astimezone(timezone(timedelta(hours=1))).isoformat()
    assert other_zone.endswith("+01:00")
    assert is_same_account({"user_id": ALICE_PK, "date_joined": other_zone}, _user(ALICE_PK))


# --- which key may witness ---------------------------------------------------------------------

KEY_STATES = list(
    itertools.product(
        [True, False],  # the reader's own key
        [False, True],  # revoked
        [False, True],  # retired (rotated away)
        list(KeyCustody),
    )
)


@pytest.mark.parametrize(
    ("own", "revoked", "retired", "custody"),
    KEY_STATES,
    ids=[
        f"{'own' if o else 'other owner'}|{'revoked' if rv else 'live'}|"
        f"{'retired' if rt else 'current'}|{c}"
        for o, rv, rt, c in KEY_STATES
    ],
)
def test_which_key_may_witness(own: bool, revoked: bool, retired: bool, custody: str) -> None:
    alice = _user(ALICE_PK)
    at = JOINED + timedelta(days=2)
    key = DeviceKey(
        owner_id=ALICE_PK if own else BOB_PK,
        revoked_at=at if revoked else None,
        retired_at=at if retired else None,
        custody=custody,
    )
    want = own and not revoked and not retired and custody == KeyCustody.DEVICE
    assert witness_key_usable(key=key, reader=alice) is want


def test_no_key_and_an_unsaved_reader_never_witness() -> None:
    assert not witness_key_usable(key=None, reader=_user(ALICE_PK))
    key = DeviceKey(owner_id=None, custody=KeyCustody.DEVICE)
    assert not witness_key_usable(key=key, reader=User(username="nobody"))

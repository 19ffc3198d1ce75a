"""Issue 17: a turn opens its items through ``vault_open(row, keys=TurnKeys)``, which does
``_owner_open``'s steps in line and calls the schema's validator without the adapter's
wrapper. Whatever a row holds, it must answer exactly what opening one item alone answers
(``vault_open(row)``: the key read for that item, ``vault_content_parse_json``): the same
content, or the same error in the same words. And the free/busy view, written with
comparisons instead of max/min calls, must be the view it was."""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from slips import vault
from slips.datakeys import data_key_for, data_keys_destroy, owner_since
from slips.models import VaultItem
from tests.slips.test_vault_open_checks import PLAINTEXTS

pytestmark = pytest.mark.django_db


def _row(item: VaultItem, sealed: bytes | None = None) -> vault.VaultRow:
    return vault.VaultRow(
        id=item.id,
        owner_id=item.owner_id,
        kind=item.kind,
        sealed=bytes(item.sealed) if sealed is None else sealed,
    )


def _seal_raw(owner: Any, item: VaultItem, plaintext: bytes) -> bytes:
    key = data_key_for(kind="owner", subject=str(owner.pk), since=owner_since(owner.date_joined))
    nonce = os.urandom(12)
    aad = b"synapsia-vault-v2|" + f"{owner.pk}|{item.id}|{item.kind}".encode()
    return (
        vault.OWNER_SEAL_VERSION
        + key.id.bytes
        + nonce
        + AESGCM(key.key).encrypt(nonce, plaintext, aad)
    )


def _answer(open_it: Any) -> Any:
    """What opening answers: the content (type and JSON), or the error (type and words)."""
    try:
        content = open_it()
    except Exception as refused:  # every refusal, compared whole
        return type(refused), str(refused), getattr(refused, "code", None)
    return type(content), content.model_dump(mode="json")


def _both(row: vault.VaultRow) -> tuple[Any, Any]:
    keys = vault.TurnKeys()
    keys.read_for([row])
    return _answer(lambda: vault.vault_open(row, keys=keys)), _answer(lambda: vault.vault_open(row))


@pytest.mark.parametrize("plaintext", PLAINTEXTS, ids=range(len(PLAINTEXTS)))
def test_a_turn_opens_any_stored_json_as_one_item_alone(make_owner: Any, plaintext: bytes) -> None:
    owner = make_owner("alice")
    for kind in ("food_likes", "budget", "note", "availability"):
        item = vault.vault_item_create(
            owner=owner,
            content={
                "food_likes": {"kind": "food_likes", "items": ["x"]},
                "budget": {"kind": "budget", "currency": "EUR", "minimum": 1, "maximum": 2},
                "note": {"kind": "note", "text": "x"},
                "availability": {"kind": "availability", "busy": []},
            }[kind],
        )
        turn, alone = _both(_row(item, _seal_raw(owner, item, plaintext)))
        assert turn == alone


def test_a_turn_refuses_what_one_item_alone_refuses(make_owner: Any) -> None:
    alice, bob = make_owner("alice"), make_owner("bob")
    item = vault.vault_item_create(owner=alice, content={"kind": "note", "text": "x"})
    other = vault.vault_item_create(owner=alice, content={"kind": "note", "text": "y"})
    bobs = vault.vault_item_create(owner=bob, content={"kind": "note", "text": "z"})
    sealed = bytes(item.sealed)
    flipped = bytearray(sealed)
    flipped[40] ^= 0x01
    cases = [
        _row(item),  # the positive control
        _row(item, bytes(flipped)),  # tampered
        _row(item, sealed[:44]),  # cut short of a tag
        _row(other, sealed),  # moved to another row
        _row(bobs, sealed),  # moved to another owner
        _row(item, b"\x07" + sealed[1:]),  # an unknown version
        _row(item, sealed[:1] + bytes(16) + sealed[17:]),  # a key id the store lacks
    ]
    answers = [_both(row) for row in cases]
    assert answers[0][0][0] is vault.Note
    for turn, alone in answers:
        assert turn == alone
    assert len({a for a, _ in answers[1:]}) > 2  # they are refusals, in their own words
    data_keys_destroy(kind="owner", subject=str(alice.pk))
    turn, alone = _both(_row(item))
    assert turn == alone
    assert "destroyed" in turn[1]


def _free_busy_before(item: Any, *, horizon: timedelta, now: datetime) -> dict[str, Any]:
    """The view as it was written before (max/min calls, a lambda sort key)."""
    start, until = int(now.timestamp()), int((now + horizon).timestamp())
    merged: list[list[int]] = []
    for w in sorted(item.busy, key=lambda w: w.start):
        s, e = max(w.start, start), min(w.end, until)
        if e <= s:
            continue
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return {"from": start, "until": until, "busy": merged}


@pytest.mark.django_db(False)
def test_the_free_busy_view_is_the_view_it_was() -> None:
    chance = random.Random(17)
    now = datetime(2026, 12, 4, 22, 0, 0, 500_000, tzinfo=UTC)
    base = int(now.timestamp())
    for _ in range(500):
        windows = []
        for _ in range(chance.randrange(0, 30)):
            start = base + chance.randrange(-3 * 86_400, 40 * 86_400)
            windows.append({"start": max(start, 0), "end": start + chance.randrange(1, 86_400)})
        item = vault.Availability(kind="availability", busy=windows)  # type: ignore[arg-type]
        for horizon in vault._HORIZONS.values():
            assert vault._free_busy(item, horizon=horizon, now=now) == _free_busy_before(
                item, horizon=horizon, now=now
            )

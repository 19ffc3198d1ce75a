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


# --- a turn's availability: its field schemas without a model per window ---------------------

_NOW = datetime(2026, 12, 4, 22, 0, 0, 500_000, tzinfo=UTC)
_T = int(_NOW.timestamp())

AVAILABILITY_JSON: list[bytes] = [
    b'{"kind":"availability","busy":[]}',
    b'{"kind":"availability"}',
    b'{"kind":"availability","timezone":"Europe/Berlin","until":null,"busy":[]}',
    b'{"kind":"availability","timezone":"  Europe/Berlin  ","until":%d,"busy":['
    b'{"start":%d,"end":%d,"title":"  dentist  "},{"start":%d,"end":%d}]}'
    % (_T + 90 * 86_400, _T + 3600, _T + 7200, _T - 100, _T + 50),
    b'{"kind":"availability","busy":[{"start":%d,"end":%d},{"start":%d,"end":%d}]}'
    % (_T + 10, _T + 20, _T + 10, _T + 5000),
    b'{"kind":"availability","busy":[{"start":%d.0,"end":%d}]}' % (_T + 1, _T + 2),
    b'{"kind":"availability","busy":[{"start":1,"end":2,"title":"%s"}]}' % (b" " * 300),
    b'{"kind":"availability","busy":[{"start":1,"end":2,"title":" %s "}]}' % (b"x" * 200),
    b'{"kind":"note","kind":"availability","busy":[]}',
    b'{"kind":"availability","busy":[{"start":"1","end":2}]}',
    # refused, each in its own words (or, for the byte-order mark, read by json.loads)
    b'{"kind":"availability","kind":"note","text":"x"}',
    b'{"kind":"availability","busy":[{"start":1,"end":2,"start":3}]}',
    b'{"kind":"availability","busy":[{"start":20,"end":10}]}',
    b'{"kind":"availability","busy":[{"start":10,"end":10}]}',
    b'{"kind":"availability","busy":[{"start":1,"end":2},{"start":5,"end":4}]}',
    b'{"kind":"availability","busy":[{"start":1,"end":2,"title":"%s"}]}' % (b"x" * 201),
    b'{"kind":"availability","busy":[{"start":1,"end":2,"where":"home"}]}',
    b'{"kind":"availability","busy":[{"start":-1,"end":2}]}',
    b'{"kind":"availability","busy":[{"start":1,"end":9007199254740993}]}',
    b'{"kind":"availability","busy":[{"start":1.5,"end":2}]}',
    b'{"kind":"availability","busy":[{"start":1}]}',
    b'{"kind":"availability","busy":{"start":1,"end":2}}',
    b'{"kind":"availability","busy":[[1,2]]}',
    b'{"kind":"availability","until":-5}',
    b'{"kind":"availability","timezone":"%s"}' % (b"Z" * 65),
    b'{"kind":"availability","extra":1}',
    b'{"kind":" availability ","busy":[]}',
    b'{"kind":"Availability","busy":[]}',
    b'{"kind":"note","text":"x"}',
    b'{"busy":[]}',
    b"[]",
    b"",
    b'{"kind":"availability","busy":[]',
    b"\xef\xbb\xbf" + b'{"kind":"availability","busy":[]}',
    b'{"kind":"availability","busy":[' + b'{"start":1,"end":2},' * 2000 + b'{"start":3,"end":4}]}',
]


def _capability(scope: str) -> Any:
    from slips.capabilities import Capability

    return Capability(
        resource="availability",
        operation="disclose",
        scope=scope,
        recipient="peer_agent",
        expires_at=_T + 86_400,
        max_uses=5,
        onward_disclosure=False,
        approval="none",
    )


def _view(row: vault.VaultRow, scope: str, keys: vault.TurnKeys | None) -> Any:
    try:
        return vault.vault_item_scoped_view(row, capability=_capability(scope), now=_NOW, keys=keys)
    except Exception as refused:  # every refusal, compared whole
        return type(refused), str(refused), getattr(refused, "code", None)


@pytest.mark.parametrize("plaintext", AVAILABILITY_JSON, ids=range(len(AVAILABILITY_JSON)))
def test_a_turns_availability_view_is_the_view_of_the_item_opened_alone(
    make_owner: Any, plaintext: bytes
) -> None:
    assert vault._availability_fields is not None  # the shape is the one it knows
    owner = make_owner("alice")
    item = vault.vault_item_create(owner=owner, content={"kind": "availability", "busy": []})
    row = _row(item, _seal_raw(owner, item, plaintext))
    keys = vault.TurnKeys()
    keys.read_for([row])
    for scope in ("free_busy_24h", "free_busy_7d", "free_busy_14d", "free_busy_30d"):
        turn = _view(row, scope, keys)
        assert turn == _view(row, scope, None)
        assert isinstance(turn, dict) or turn[0] is not AttributeError
        # The field schemas read what opens alone, and only that: the rest goes the
        # model's way, to be refused in its words.
        read = vault._turn_busy(row, keys) is not None
        assert isinstance(turn, dict) if read else True
        # (text with a byte-order mark is read by json.loads, the model's way, as before)
        assert read == (isinstance(turn, dict) and not plaintext.startswith(b"\xef\xbb\xbf"))


def test_a_turns_availability_is_refused_as_the_item_alone_is(make_owner: Any) -> None:
    alice = make_owner("alice")
    item = vault.vault_item_create(
        owner=alice,
        content={"kind": "availability", "busy": [{"start": _T + 60, "end": _T + 120}]},
    )
    other = vault.vault_item_create(owner=alice, content={"kind": "note", "text": "y"})
    sealed = bytes(item.sealed)
    flipped = bytearray(sealed)
    flipped[40] ^= 0x01
    rows = [
        _row(item),
        _row(item, bytes(flipped)),
        _row(item, sealed[:44]),
        _row(item, b"\x07" + sealed[1:]),
        vault.VaultRow(id=other.id, owner_id=alice.pk, kind="availability", sealed=sealed),
    ]
    for row in rows:
        keys = vault.TurnKeys()
        keys.read_for([row])
        assert _view(row, "free_busy_7d", keys) == _view(row, "free_busy_7d", None)
    assert _view(rows[0], "free_busy_7d", None)["busy"] == [[_T + 60, _T + 120]]
    data_keys_destroy(kind="owner", subject=str(alice.pk))
    keys = vault.TurnKeys()
    keys.read_for(rows[:1])
    destroyed = _view(rows[0], "free_busy_7d", keys)
    assert destroyed == _view(rows[0], "free_busy_7d", None)
    assert "destroyed" in destroyed[1]


@pytest.mark.django_db(False)
def test_random_weeks_read_by_the_field_schemas_are_the_models_weeks() -> None:
    """The field schemas with ``_ordered``'s rule accept a busy list exactly when the model
    does, and read the same windows."""
    import json

    chance = random.Random(1717)
    for _ in range(400):
        windows = [
            {"start": chance.randrange(0, 100), "end": chance.randrange(0, 100)}
            for _ in range(chance.randrange(0, 6))
        ]
        raw = json.dumps({"kind": "availability", "busy": windows}).encode()
        try:
            model = vault.vault_content_parse_json(raw)
        except vault.Malformed:
            model = None
        fields = vault._availability_fields.validate_json(raw)[0]  # type: ignore[union-attr]
        ordered = all(w["end"] > w["start"] for w, _, _ in fields["busy"])
        assert ordered == (model is not None)
        if model is not None:
            assert [(w.start, w.end) for w in model.busy] == [  # type: ignore[attr-defined]
                (w["start"], w["end"]) for w, _, _ in fields["busy"]
            ]

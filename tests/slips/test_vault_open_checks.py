"""Opening a vault item still fails closed on anything the database could hold that is not
a well-formed item of its owner (issue 17): the authenticated decryption per item per turn,
then the kind's schema over the JSON it opens to, read and validated in one pass
(``vault_content_parse_json``) with the same rules as ``json.loads`` and then the schema.

The turn tests warm the path with a turn that shows the item, then change the stored row the
way an attacker with database access would, and assert the next turn refuses to show it."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from rooms.context import context_for_agent
from slips import vault
from slips.datakeys import data_key_for, owner_since
from slips.errors import Malformed, Misconfigured
from slips.models import VaultItem
from tests.slips.conftest import seat_slip_sign

CANARY = "CANARY-vault-open-4e2a"

# Stored JSON an item could open to: well formed of each kind, and malformed in the ways a
# row written by another version, by hand or by an attacker holding the key could be.
PLAINTEXTS: list[bytes] = [
    b'{"kind":"food_likes","items":["ramen","  pho  "]}',
    b'{"kind":"food_dislikes","items":["okra"]}',
    b'{"kind":"allergies","items":["sesame"]}',
    b'{"kind":"neighbourhood","name":"Mitte"}',
    b'{"kind":"link","url":"https://example.org/x","label":"menu"}',
    b'{"kind":"note","text":"call before 7"}',
    b'{"kind":"budget","currency":"EUR","minimum":3000,"maximum":8000,"notes":"private"}',
    b'{"kind":"availability","timezone":"Europe/Berlin","until":1900000000,'
    b'"busy":[{"start":1800000000,"end":1800003600,"title":"kept out"}]}',
    b'{"kind":"budget","currency":"EUR","minimum":3000,"maximum":3000.0}',
    b'{"kind":"budget","currency":"EUR","minimum":3000,"maximum":true}',
    b'{"kind":"note","text":"first","text":"second"}',
    # malformed
    b'{"kind":"budget","currency":"EUR","minimum":8000,"maximum":3000}',
    b'{"kind":"budget","currency":"eur","minimum":1,"maximum":2}',
    b'{"kind":"budget","currency":"EUR","minimum":1,"maximum":"2"}',
    b'{"kind":"budget","currency":"EUR","minimum":1,"maximum":1.5}',
    b'{"kind":"budget","currency":"EUR","minimum":1,"maximum":NaN}',
    b'{"kind":"budget","currency":"EUR","minimum":-1,"maximum":2}',
    b'{"kind":"budget","currency":"EUR","minimum":1,"maximum":2,"extra":1}',
    b'{"kind":"availability","busy":[{"start":20,"end":10}]}',
    b'{"kind":"availability","busy":[{"start":1,"end":9007199254740993}]}',
    b'{"kind":"food_likes","items":[""]}',
    b'{"kind":"food_likes","items":"ramen"}',
    b'{"kind":"food_likes","items":[1]}',
    b'{"kind":"link","url":"javascript:alert(1)"}',
    b'{"kind":"secret","text":"x"}',
    b'{"items":["ramen"]}',
    b'["food_likes"]',
    b'"note"',
    b"null",
    b"",
    b"   ",
    b'{"kind":"note","text":"x"',
    b'{"kind":"note","text":"x"} trailing',
    b'{"kind":"note","text":"\xff\xfe"}',
    b"\xef\xbb\xbf" + b'{"kind":"note","text":"bom"}',
]


def _old_way(raw: bytes) -> Any:
    """What opening did before: ``json.loads`` then the schema over its objects."""
    return vault.vault_content_parse(json.loads(raw))


def _outcome(parse: Any, raw: bytes) -> Any:
    try:
        return parse(raw).model_dump(mode="json")
    except Malformed:
        return Malformed
    except ValueError:  # text json.loads refuses: not JSON, or not in an encoding it reads
        return ValueError


@pytest.mark.parametrize("raw", PLAINTEXTS, ids=range(len(PLAINTEXTS)))
def test_one_pass_reads_as_json_loads_and_the_schema_did(raw: bytes) -> None:
    before = _outcome(_old_way, raw)
    assert _outcome(vault.vault_content_parse_json, raw) == before
    if before not in (Malformed, ValueError):
        assert type(vault.vault_content_parse_json(raw)) is type(_old_way(raw))


def test_the_schema_still_refuses_what_json_alone_accepts() -> None:
    # A positive control for the table above: these parse as JSON, the schema refuses them.
    for raw in (b'{"kind":"food_likes","items":[""]}', b'{"kind":"secret"}', b"[]"):
        json.loads(raw)
        with pytest.raises(Malformed):
            vault.vault_content_parse_json(raw)


# --- a context turn over a row changed in the database ---------------------------------------


def _record(kind: str) -> dict[str, Any]:
    return {
        "resource": kind,
        "operation": "disclose",
        "recipient": "peer_agent",
        "scope": "list",
        "approval": "none",
        "max_uses": 50,
    }


def _warm(make_open_room: Any) -> tuple[Any, VaultItem, VaultItem]:
    """Alice's slip clears her food likes for Bob's agent; one turn shows both her items."""
    setup = make_open_room()
    item = vault.vault_item_create(
        owner=setup.a.owner, content={"kind": "food_likes", "items": [f"ramen {CANARY}"]}
    )
    other = vault.vault_item_create(
        owner=setup.a.owner, content={"kind": "food_likes", "items": ["pho"]}
    )
    seat_slip_sign(setup.a, setup.room.id, [_record("food_likes")])
    seat_slip_sign(setup.b, setup.room.id, [])
    assert CANARY in _bobs(setup).model_dump_json()  # the positive control
    return setup, item, other


def _bobs(setup: Any) -> Any:
    return context_for_agent(room_id=setup.room.id, agent_id=setup.b.agent.id)


def _store(item: VaultItem, sealed: bytes) -> None:
    VaultItem.objects.filter(id=item.id).update(sealed=sealed)


def _sealed(item: VaultItem) -> bytes:
    return bytes(VaultItem.objects.get(id=item.id).sealed)


def _seal_raw(owner: Any, item: VaultItem, plaintext: bytes) -> bytes:
    """``plaintext`` sealed for ``item`` under its owner's key, as the vault seals: it opens,
    authenticated, to whatever bytes are given (what only a holder of the key could write)."""
    key = data_key_for(kind="owner", subject=str(owner.pk), since=owner_since(owner.date_joined))
    nonce = os.urandom(12)
    aad = b"synapsia-vault-v2|" + f"{owner.pk}|{item.id}|{item.kind}".encode()
    return (
        vault.OWNER_SEAL_VERSION
        + key.id.bytes
        + nonce
        + AESGCM(key.key).encrypt(nonce, plaintext, aad)
    )


@pytest.mark.django_db
def test_the_raw_sealing_of_these_tests_is_the_vaults(make_open_room: Any) -> None:
    setup, item, _other = _warm(make_open_room)
    _store(item, _seal_raw(setup.a.owner, item, b'{"kind":"food_likes","items":["udon"]}'))
    assert "udon" in _bobs(setup).model_dump_json()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "plaintext",
    [
        b'{"kind":"food_likes","items":[""]}',
        b'{"kind":"food_likes","items":["CANARY-vault-open-4e2a"],"extra":1}',
        b'{"kind":"food_likes","items":["CANARY-vault-open-4e2a"]',
        b"\xff" + b'{"kind":"food_likes","items":["CANARY-vault-open-4e2a"]}',
        b'{"kind":"note","text":"CANARY-vault-open-4e2a"}',
    ],
    ids=["empty-word", "extra-field", "not-json", "not-utf8", "another-kind"],
)
def test_an_authenticated_but_malformed_item_fails_the_turn_closed(
    make_open_room: Any, plaintext: bytes
) -> None:
    setup, item, _other = _warm(make_open_room)
    _store(item, _seal_raw(setup.a.owner, item, plaintext))
    # Text json.loads cannot read raises its ValueError, as before; the rest is Malformed.
    with pytest.raises((Malformed, ValueError)):
        _bobs(setup)


@pytest.mark.django_db
def test_a_flipped_ciphertext_byte_fails_the_turn_closed(make_open_room: Any) -> None:
    setup, item, _other = _warm(make_open_room)
    sealed = bytearray(_sealed(item))
    sealed[40] ^= 0x01
    _store(item, bytes(sealed))
    with pytest.raises(Misconfigured) as refused:
        _bobs(setup)
    assert "does not open" in str(refused.value)


@pytest.mark.django_db
def test_a_blob_moved_to_another_row_of_the_same_owner_does_not_open(
    make_open_room: Any,
) -> None:
    setup, item, other = _warm(make_open_room)
    _store(other, _sealed(item))  # the canary's blob under the other item's id
    with pytest.raises(Misconfigured) as refused:
        _bobs(setup)
    assert "does not open" in str(refused.value)


@pytest.mark.django_db
def test_a_blob_naming_the_other_owners_key_does_not_open(make_open_room: Any) -> None:
    setup, item, _other = _warm(make_open_room)
    bobs = vault.vault_item_create(
        owner=setup.b.owner, content={"kind": "food_likes", "items": ["bob's"]}
    )
    sealed = _sealed(item)
    # Alice's blob, naming Bob's key by its id bytes.
    _store(item, sealed[:1] + _sealed(bobs)[1:17] + sealed[17:])
    with pytest.raises(Misconfigured) as refused:
        _bobs(setup)
    assert "another owner's key" in str(refused.value)


@pytest.mark.django_db
@pytest.mark.parametrize("length", [0, 1, 17, 44])
def test_a_truncated_blob_fails_the_turn_closed(make_open_room: Any, length: int) -> None:
    setup, item, _other = _warm(make_open_room)
    _store(item, _sealed(item)[:length])
    with pytest.raises(Misconfigured):
        _bobs(setup)


@pytest.mark.django_db
def test_a_put_back_row_is_shown_again(make_open_room: Any) -> None:
    # Nothing of a refused open is kept: the same turn path shows the item once it is whole.
    setup, item, _other = _warm(make_open_room)
    good = _sealed(item)
    _store(item, good[:-1] + bytes([good[-1] ^ 1]))
    with pytest.raises(Misconfigured):
        _bobs(setup)
    _store(item, good)
    assert CANARY in _bobs(setup).model_dump_json()

"""The turn path's shortcuts decide nothing (issue 17): what a signed payload says is worked
out once per process (``slips.verification._signed_payload``) and each owner's data key once
per turn (``slips.vault.TurnKeys``), but every turn still verifies each slip's signature over
the stored bytes, its key's owner and revocation, the lookup columns, expiry and uses, live.

Each test warms the path with a turn that discloses, then changes the record under it the way
an attacker with database access, or the owner, would, and asserts the very next turn shows
nothing the change took away."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from ledger.models import LedgerEvent
from rooms import context, sealing
from rooms.context import context_for_agent
from rooms.models import Room, RoomState
from slips import services as slip_services
from slips import vault
from slips.datakeys import DataKeyDestroyed, data_keys_destroy
from slips.errors import Malformed, Misconfigured
from slips.models import Slip, SlipCapability
from slips.verification import _signed_payload
from tests.slips.conftest import seat_slip_sign

pytestmark = pytest.mark.django_db

CANARY = "CANARY-live-9c1d"


def _record(kind: str, **extra: Any) -> dict[str, Any]:
    return {
        "resource": kind,
        "operation": "disclose",
        "recipient": "peer_agent",
        "scope": "list" if kind != "neighbourhood" else "name",
        "approval": "none",
        "max_uses": 50,
        **extra,
    }


def _warm(make_open_room: Any) -> tuple[Any, Any, Slip]:
    """Alice's slip clears two items for Bob's agent; one turn shows both (the memo warm)."""
    setup = make_open_room()
    vault.vault_item_create(
        owner=setup.a.owner, content={"kind": "food_likes", "items": [f"ramen {CANARY}"]}
    )
    vault.vault_item_create(owner=setup.a.owner, content={"kind": "neighbourhood", "name": "Mitte"})
    key, _device = seat_slip_sign(
        setup.a, setup.room.id, [_record("food_likes"), _record("neighbourhood")]
    )
    seat_slip_sign(setup.b, setup.room.id, [])
    first = _bobs(setup)
    assert sorted(i.resource for i in first.peer_items) == ["food_likes", "neighbourhood"]
    assert CANARY in first.model_dump_json()  # the positive control: the canary can arrive
    slip = Slip.objects.get(room_id=setup.room.id, owner=setup.a.owner, superseded_at=None)
    assert _signed_payload.cache_info().currsize >= 1
    return setup, key, slip


def _bobs(setup: Any) -> Any:
    return context_for_agent(room_id=setup.room.id, agent_id=setup.b.agent.id)


def _write(sql: str, params: list[Any]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def test_a_forged_signature_is_refused_on_the_next_turn(make_open_room: Any) -> None:
    setup, _key, slip = _warm(make_open_room)
    forged = bytes(64)
    _write(
        f"UPDATE {Slip._meta.db_table} SET signature = %s WHERE id = %s",  # noqa: S608
        [forged, Slip._meta.pk.get_db_prep_value(slip.id, connection)],
    )
    after = _bobs(setup)
    assert after.peer_items == [] and CANARY not in after.model_dump_json()


def test_tampered_payload_bytes_are_refused_even_though_their_parse_is_memoised(
    make_open_room: Any,
) -> None:
    setup, _key, slip = _warm(make_open_room)
    raw = bytes(slip.payload)
    # Same length, one record widened to "both": a payload the signature does not cover.
    tampered = raw.replace(b'"recipient":"peer_agent"', b'"recipient":"both_agent"', 1)
    assert tampered != raw
    _write(
        f"UPDATE {Slip._meta.db_table} SET payload = %s WHERE id = %s",  # noqa: S608
        [tampered, Slip._meta.pk.get_db_prep_value(slip.id, connection)],
    )
    assert _bobs(setup).peer_items == []
    # Put back, the same bytes verify again: the memo never held a verdict.
    _write(
        f"UPDATE {Slip._meta.db_table} SET payload = %s WHERE id = %s",  # noqa: S608
        [raw, Slip._meta.pk.get_db_prep_value(slip.id, connection)],
    )
    assert len(_bobs(setup).peer_items) == 2


def test_a_key_revoked_after_a_turn_clears_nothing_on_the_next(make_open_room: Any) -> None:
    setup, key, _slip = _warm(make_open_room)
    slip_services.key_revoke(owner=setup.a.owner, key_id=key.id)
    after = _bobs(setup)
    assert after.peer_items == [] and CANARY not in after.model_dump_json()


def test_a_lookup_column_that_disagrees_with_the_signed_bytes_is_refused(
    make_open_room: Any,
) -> None:
    setup, _key, slip = _warm(make_open_room)
    # The signed bytes carry the slip's nonce; a row edited to say another is refused.
    _write(
        f"UPDATE {Slip._meta.db_table} SET nonce = %s WHERE id = %s",  # noqa: S608
        ["x" * 32, Slip._meta.pk.get_db_prep_value(slip.id, connection)],
    )
    assert _bobs(setup).peer_items == []


def test_uses_spent_elsewhere_are_read_live_each_turn(make_open_room: Any) -> None:
    setup, _key, slip = _warm(make_open_room)
    SlipCapability.objects.filter(slip=slip, resource="food_likes").update(uses_left=0)
    after = _bobs(setup)
    assert [i.resource for i in after.peer_items] == ["neighbourhood"]
    assert CANARY not in after.model_dump_json()
    # Exactly one use of the record that did clear was spent by that turn.
    left = SlipCapability.objects.get(slip=slip, resource="neighbourhood").uses_left
    assert left == 50 - 2


def test_an_expired_slip_clears_nothing_though_its_parse_is_memoised(
    make_open_room: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup, _key, slip = _warm(make_open_room)
    after_expiry = datetime.fromtimestamp(slip.expires_at + 1, tz=UTC)
    monkeypatch.setattr(timezone, "now", lambda: after_expiry)
    assert _bobs(setup).peer_items == []


def test_a_destroyed_data_key_is_refused_by_the_next_turn(make_open_room: Any) -> None:
    setup, _key, _slip = _warm(make_open_room)
    # The owner's data key destroyed (account deletion) between two turns: the turn opens
    # each key afresh, so nothing of that owner's vault can be shown.
    data_keys_destroy(kind="owner", subject=str(setup.a.owner.pk))
    with pytest.raises(DataKeyDestroyed):
        _bobs(setup)


def test_the_memo_holds_what_the_bytes_say_and_nothing_about_the_room() -> None:
    # A payload that is not canonical raises every time it is asked (errors are not kept).
    before = _signed_payload.cache_info().currsize
    for _ in range(2):
        with pytest.raises(Malformed):
            _signed_payload(b'{"v": 1}')
    assert _signed_payload.cache_info().currsize == before


def test_a_turn_reads_the_key_store_once_for_its_owner_keys_and_the_room_key(
    make_open_room: Any,
) -> None:
    """Both owners' keys and the room key's row (its destroyed mark, for the turn's purpose,
    charter and messages) come from one key-store read; each turn reads them again."""
    from rooms import services as room_services
    from slips import datakeys

    setup = make_open_room()
    vault.vault_item_create(owner=setup.a.owner, content={"kind": "food_likes", "items": ["ramen"]})
    vault.vault_item_create(owner=setup.b.owner, content={"kind": "budget", "currency": "EUR",
                            "minimum": 3000, "maximum": 5000})  # fmt: skip
    seat_slip_sign(setup.a, setup.room.id, [_record("food_likes")])
    own = {"resource": "budget", "operation": "read", "recipient": "own_agent", "scope": "range"}
    seat_slip_sign(setup.b, setup.room.id, [{**own, "approval": "none", "max_uses": 50}])
    for n in range(3):
        room_services.message_say(
            room_id=setup.room.id, agent_id=setup.a.agent.id, client_id=f"k{n}", text=f"m {n}"
        )
    store = datakeys._connection()
    for _turn in range(2):
        statements: list[str] = []
        store.set_trace_callback(statements.append)
        try:
            turn = _bobs(setup)
        finally:
            store.set_trace_callback(None)
        assert [i.resource for i in turn.own_items] == ["budget"]
        assert [i.resource for i in turn.peer_items] == ["food_likes"]
        assert len(turn.peer_messages) == 3
        reads = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
        assert len(reads) == 1, reads  # both owners' keys and the room's, one statement
        assert "IN (" in reads[0]
        room_key = sealing.room_key_cached(setup.room.id)
        assert room_key is not None and str(room_key) in reads[0]


def test_a_room_key_destroyed_between_turns_opens_nothing_in_the_next(
    make_open_room: Any,
) -> None:
    """The room key's mark read with the owners' keys is the turn's own: destroyed by
    another process after one turn, the next turn opens neither the purpose nor the
    conversation (the key stays cached here; only the store says it is gone)."""
    from rooms import services as room_services

    setup = make_open_room()
    vault.vault_item_create(owner=setup.a.owner, content={"kind": "food_likes", "items": ["ramen"]})
    seat_slip_sign(setup.a, setup.room.id, [_record("food_likes")])
    room_services.message_say(
        room_id=setup.room.id, agent_id=setup.a.agent.id, client_id="k1", text="Friday at 7?"
    )
    turn = _bobs(setup)
    assert [i.resource for i in turn.peer_items] == ["food_likes"]
    assert turn.purpose == "Dinner for two" and len(turn.peer_messages) == 1
    assert sealing.room_key_cached(setup.room.id) is not None
    assert data_keys_destroy(kind="room", subject=str(setup.room.id), since="") == 1
    with pytest.raises(DataKeyDestroyed):
        _bobs(setup)


def test_an_owner_key_handed_to_another_owner_is_refused_by_the_batch_read(
    make_open_room: Any,
) -> None:
    """The turn reads its owner keys in one statement, and still refuses a key whose row was
    moved to another subject (a sealed blob naming a key that is not its owner's)."""
    from slips import datakeys

    setup, _key, _slip = _warm(make_open_room)
    datakeys._connection().execute(
        "UPDATE data_keys SET subject = ? WHERE kind = 'owner' AND subject = ?",
        (str(setup.b.owner.pk), str(setup.a.owner.pk)),
    )
    with pytest.raises(Misconfigured) as refused:
        _bobs(setup)
    assert "another owner's key" in str(refused.value)


def test_a_use_that_cannot_be_spent_discloses_nothing_and_pauses_the_room(
    make_open_room: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turn's uses are spent by the statement that records its disclosures (on
    PostgreSQL; beside it elsewhere): one that finds a use gone after all (here: told to
    change a row more than there are) rolls the whole turn back, and the room pauses."""
    setup, _key, slip = _warm(make_open_room)
    before = sorted(SlipCapability.objects.filter(slip=slip).values_list("id", "uses_left"))
    disclosed = LedgerEvent.objects.filter(room_id=setup.room.id, kind="disclosure").count()
    real = context.capability_uses_spending

    def one_short(*, record_ids: list[int]) -> Any:
        spending = real(record_ids=record_ids)
        return dataclasses.replace(spending, rows=spending.rows + 1)

    monkeypatch.setattr(context, "capability_uses_spending", one_short)
    after = _bobs(setup)
    assert after.peer_items == [] and CANARY not in after.model_dump_json()
    assert any("paused" in notice for notice in after.notices)
    assert sorted(SlipCapability.objects.filter(slip=slip).values_list("id", "uses_left")) == before
    assert LedgerEvent.objects.filter(room_id=setup.room.id, kind="disclosure").count() == disclosed
    assert Room.objects.get(id=setup.room.id).state == RoomState.PAUSED

"""Room content sealed at rest under the room's data key (rooms.sealing): what is stored is
ciphertext, it reads back through the model, and it fails closed when tampered with, cut,
copied to another column or another room, when its room's key was destroyed (by this process
or another), or when the key store is not the one the database was written with."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import connection

from rooms import sealing
from rooms.deletion import room_delete
from rooms.models import SealedOffer
from rooms.sealing import (
    RoomContentRefused,
    RoomSealer,
    SealedJSONField,
    one_hop,
    opened_for_room,
    room_content_open,
    room_content_seal,
    room_content_seal_existing,
    room_content_unseal_existing,
    room_key_destroy,
    room_keys_forget,
    room_text_open,
)
from slips.datakeys import DataKeyDestroyed, DataKeyMissing, data_keys_destroy
from tests.conftest import OpenRoom

pytestmark = pytest.mark.django_db(transaction=True)

CANARY = "sealing-canary-91d2: the budget is 4000 EUR"


def _offer(opened: OpenRoom, *, note: str = CANARY, agent: str = "b") -> SealedOffer:
    seat = opened.b if agent == "b" else opened.a
    return SealedOffer.objects.create(
        room=opened.room,
        agent=seat.agent,
        client_id=f"s-{agent}",
        offer={"note": note, "price_per_person_minor": 4000},
        salt="0" * 64,
        commitment="1" * 64,
    )


def _raw_offer(offer_id: int) -> str:
    table = connection.ops.quote_name(SealedOffer._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT offer FROM {table} WHERE id = %s", [offer_id])  # noqa: S608
        return str(cursor.fetchone()[0])


def _raw_offer_set(offer_id: int, value: str) -> None:
    table = connection.ops.quote_name(SealedOffer._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET offer = %s WHERE id = %s", [value, offer_id])  # noqa: S608


def _flip(sealed: str, at: int) -> str:
    """The sealed value with one byte of its binary form changed."""
    encoded = sealed[4:]
    raw = bytearray(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    raw[at] ^= 0x01
    return "rc1:" + base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()


def test_a_sealed_offer_is_ciphertext_at_rest_and_reads_back_whole(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    opened = make_open_room()
    offer = _offer(opened)
    stored = _raw_offer(offer.id)
    assert stored.startswith("rc1:")
    # Its key, not its amount: base64 ciphertext may hold any run of digits.
    assert "price_per_person_minor" not in stored and "sealing-canary" not in stored
    assert SealedOffer.objects.get(id=offer.id).offer == {
        "note": CANARY,
        "price_per_person_minor": 4000,
    }
    # values() reads through the field too (the reveal and the tests use both).
    assert SealedOffer.objects.values_list("offer", flat=True).get(id=offer.id)["note"] == CANARY
    # Two seals of the same value differ (a fresh nonce each): nothing to compare at rest.
    again = room_content_seal(
        room_id=opened.room.id, column="sealed_offer.offer", plaintext=b"same"
    )
    assert again != room_content_seal(
        room_id=opened.room.id, column="sealed_offer.offer", plaintext=b"same"
    )


def test_text_opens_only_for_its_room_and_column(make_open_room: Callable[..., OpenRoom]) -> None:
    one, other = make_open_room(prefix="one-"), make_open_room(prefix="other-")
    sealed = RoomSealer().text(room_id=one.room.id, column="message.text", text=CANARY)
    assert room_text_open(sealed, column="message.text", room_id=one.room.id) == CANARY
    with pytest.raises(RoomContentRefused, match="another column"):
        room_content_open(sealed=sealed, column="whisper.text", room_id=one.room.id)
    with pytest.raises(RoomContentRefused, match="sealed for another room"):
        room_content_open(sealed=sealed, column="message.text", room_id=other.room.id)


@pytest.mark.parametrize(
    ("mangle", "why"),
    [
        (lambda s: _flip(s, 60), "altered"),  # a ciphertext byte
        (lambda s: _flip(s, 40), "altered"),  # the nonce
        (lambda s: _flip(s, len(base64.urlsafe_b64decode(s[4:] + "==")) - 1), "altered"),  # tag
        (lambda s: s[:30], "cut short"),
        (lambda s: "rc1:***not base64***", "malformed"),
        (lambda s: s.replace("rc1:", "rc1:A", 1), "malformed|altered|another room|cut"),
    ],
)
def test_a_tampered_sealed_value_fails_closed(
    make_open_room: Callable[..., OpenRoom], mangle: Callable[[str], str], why: str
) -> None:
    opened = make_open_room()
    sealed = room_content_seal(room_id=opened.room.id, column="message.text", plaintext=b"x" * 40)
    with pytest.raises((RoomContentRefused, DataKeyMissing), match=why):
        room_content_open(sealed=mangle(sealed), column="message.text", room_id=opened.room.id)


def test_a_sealed_value_naming_another_rooms_key_is_refused(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    """The key id inside the value rewritten to another room's key: refused, not decrypted."""
    one, other = make_open_room(prefix="one-"), make_open_room(prefix="other-")
    mine = room_content_seal(room_id=one.room.id, column="message.text", plaintext=b"mine")
    theirs = room_content_seal(room_id=other.room.id, column="message.text", plaintext=b"x")

    def raw(sealed: str) -> bytes:
        return base64.urlsafe_b64decode(sealed[4:] + "=" * (-len(sealed[4:]) % 4))

    forged = raw(mine)[:16] + raw(theirs)[16:32] + raw(mine)[32:]
    value = "rc1:" + base64.urlsafe_b64encode(forged).rstrip(b"=").decode()
    for cold in (False, True):  # with the other room's key cached in this process, and not
        if cold:
            room_keys_forget()
        with pytest.raises(RoomContentRefused, match="another room's key"):
            room_content_open(sealed=value, column="message.text", room_id=one.room.id)
    # In one hop, after the other room's key has opened its own value there (the hop keeps
    # the opening key by key id): still refused, and the honest values still open.
    with one_hop():
        assert room_content_open(sealed=theirs, column="message.text") == b"x"
        with pytest.raises(RoomContentRefused, match="another room's key"):
            room_content_open(sealed=value, column="message.text", room_id=one.room.id)
        assert room_content_open(sealed=mine, column="message.text") == b"mine"


def test_a_sealed_offer_copied_into_another_rooms_row_is_refused(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    one, other = make_open_room(prefix="one-"), make_open_room(prefix="other-")
    source, target = _offer(one), _offer(other, note="the other room's own offer")
    _raw_offer_set(target.id, _raw_offer(source.id))  # someone with database access copies it
    with pytest.raises(RoomContentRefused, match="sealed for another room"):
        SealedOffer.objects.get(id=target.id)
    # A values_list read has no row to compare against: the reader checks it for its room.
    texts = SealedOffer.objects.filter(room=other.room).values_list("offer", flat=True)
    with pytest.raises(RoomContentRefused, match="sealed for another room"):
        opened_for_room(texts, room_id=other.room.id)
    assert SealedOffer.objects.get(id=source.id).offer["note"] == CANARY  # the original opens


def test_plaintext_never_reaches_a_sealed_column(make_open_room: Callable[..., OpenRoom]) -> None:
    """Only values sealed by the model (or a RoomSealer) are written: a queryset update or a
    lookup with a bare value is refused, and the stored value is unchanged."""
    opened = make_open_room()
    offer = _offer(opened)
    before = _raw_offer(offer.id)
    with pytest.raises(RoomContentRefused, match="written through its model"):
        SealedOffer.objects.filter(id=offer.id).update(offer={"note": "plain"})
    with pytest.raises(RoomContentRefused):
        list(SealedOffer.objects.filter(offer={"note": CANARY}))
    assert _raw_offer(offer.id) == before


def test_a_row_without_a_room_is_refused_not_stored_in_plaintext(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    opened = make_open_room()
    orphan = SealedOffer(
        agent=opened.b.agent, client_id="x", offer={"note": CANARY}, salt="0" * 64, commitment="1"
    )
    with pytest.raises(RoomContentRefused, match="belongs to no room"):
        orphan.save()
    assert not SealedOffer.objects.filter(client_id="x").exists()


def test_a_destroyed_room_key_opens_nothing_and_seals_nothing(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    opened = make_open_room()
    sealed = room_content_seal(room_id=opened.room.id, column="message.text", plaintext=b"gone")
    room_key_destroy(opened.room.id)
    with pytest.raises(DataKeyDestroyed, match="room's data key was destroyed"):
        room_content_open(sealed=sealed, column="message.text", room_id=opened.room.id)
    with pytest.raises(DataKeyDestroyed):
        room_content_seal(room_id=opened.room.id, column="message.text", plaintext=b"new")
    assert room_key_destroy(opened.room.id) == 0  # idempotent


def test_a_key_destroyed_by_another_process_is_refused_though_cached_here(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    """The cache keeps key material, never the answer: each use re-reads the destroyed mark."""
    opened = make_open_room()
    sealed = room_content_seal(room_id=opened.room.id, column="message.text", plaintext=b"c")
    assert room_content_open(sealed=sealed, column="message.text") == b"c"  # cached now
    # Another process destroys it: straight in the key store, this process's cache untouched.
    assert data_keys_destroy(kind="room", subject=str(opened.room.id), since="") == 1
    with pytest.raises(DataKeyDestroyed):
        room_content_open(sealed=sealed, column="message.text")
    with pytest.raises(DataKeyDestroyed):
        room_content_seal(room_id=opened.room.id, column="message.text", plaintext=b"d")


def test_a_sealer_for_known_rooms_reads_their_marks_at_once_and_refuses_a_destroyed_key(
    make_open_room: Callable[..., OpenRoom], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A say hop's sealer reads its rooms' destroyed marks in one key-store read: a key
    destroyed by another process (its material still cached here) is not used, a live one
    seals and opens, and no room's mark is read again one by one."""
    import rooms.sealing as sealing

    kept, gone, fresh = (make_open_room(prefix=p) for p in ("kept-", "gone-", "fresh-"))
    for opened in (kept, gone):  # both keys cached in this process
        room_content_seal(room_id=opened.room.id, column="message.text", plaintext=b"x")
    assert data_keys_destroy(kind="room", subject=str(gone.room.id), since="") == 1
    sealing._keys.drop_room(fresh.room.id)  # a room this process has not sealed for yet
    reads: list[int] = []
    one_by_one: list[object] = []
    real_many = sealing.data_keys_live
    monkeypatch.setattr(
        sealing, "data_keys_live", lambda ids: reads.append(len(ids)) or real_many(ids)
    )
    monkeypatch.setattr(sealing, "data_key_live", lambda key_id: one_by_one.append(key_id) or True)

    sealer = RoomSealer([kept.room.id, gone.room.id, fresh.room.id])
    assert reads == [2]  # the two cached keys, in one read (the third room has none cached)
    sealed = sealer.text(room_id=kept.room.id, column="message.text", text=CANARY)
    assert one_by_one == []
    monkeypatch.undo()
    assert room_text_open(sealed, column="message.text", room_id=kept.room.id) == CANARY
    # The destroyed key was not taken from the cache: its room is looked up on its own, and
    # refused by the key store.
    with pytest.raises(DataKeyDestroyed):
        sealer.text(room_id=gone.room.id, column="message.text", text="after deletion")
    # A room whose key was never cached here gets it at its first value, as before.
    third = sealer.text(room_id=fresh.room.id, column="message.text", text="first words")
    assert room_text_open(third, column="message.text", room_id=fresh.room.id) == ("first words")


def test_the_key_stores_marks_for_many_keys_are_read_in_chunks(
    make_open_room: Callable[..., OpenRoom], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``data_keys_live``: the live keys among those asked, over several reads; a destroyed
    key and one the store never held are not live."""
    import uuid

    from slips import datakeys

    rooms = [make_open_room(prefix=f"r{i}-") for i in range(3)]
    for opened in rooms:
        room_content_seal(room_id=opened.room.id, column="message.text", plaintext=b"x")
    ids = [sealing._keys.for_room(opened.room.id) for opened in rooms]
    assert None not in ids
    assert data_keys_destroy(kind="room", subject=str(rooms[1].room.id), since="") == 1
    monkeypatch.setattr(datakeys, "_LIVE_PER_READ", 2)
    unknown = uuid.uuid4()
    assert datakeys.data_keys_live([*ids, unknown]) == {ids[0], ids[2]}
    assert datakeys.data_keys_live([]) == set()


def test_a_key_store_that_does_not_belong_with_the_database_opens_nothing(
    make_open_room: Callable[..., OpenRoom], settings: Any, tmp_path: Path
) -> None:
    opened = make_open_room()
    offer = _offer(opened)
    settings.SLIPS = {**settings.SLIPS, "KEY_STORE_PATH": str(tmp_path / "other-keys.sqlite3")}
    with pytest.raises(DataKeyMissing, match="Restore the key store"):
        SealedOffer.objects.get(id=offer.id)


def test_deleting_a_room_destroys_its_key_for_what_was_copied_before(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    """What a backup would hold (the stored value, copied before the deletion) never opens
    after the room is deleted."""
    opened = make_open_room()
    copied = _raw_offer(_offer(opened).id)
    room_delete(owner=opened.a.owner, room_id=opened.room.id)
    with pytest.raises(DataKeyDestroyed):
        room_content_open(sealed=copied, column="sealed_offer.offer", room_id=opened.room.id)


def test_rows_stored_before_sealing_are_sealed_by_the_command_and_unsealed_back(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    opened = make_open_room()
    offer = _offer(opened)
    _raw_offer_set(offer.id, '{"note": "legacy-plain-offer"}')  # as stored before sealing
    assert SealedOffer.objects.get(id=offer.id).offer == {"note": "legacy-plain-offer"}

    call_command("seal_room_content")
    assert _raw_offer(offer.id).startswith("rc1:")
    assert "legacy-plain-offer" not in _raw_offer(offer.id)
    assert SealedOffer.objects.get(id=offer.id).offer == {"note": "legacy-plain-offer"}
    # Nothing left to seal: run again, nothing changes.
    assert room_content_seal_existing(apps.get_model, connection)["rooms.SealedOffer.offer"] == 0

    unsealed = room_content_unseal_existing(apps.get_model, connection, only=["rooms.SealedOffer"])
    assert unsealed == {"rooms.SealedOffer.offer": 1}
    assert '"legacy-plain-offer"' in _raw_offer(offer.id)


def test_the_migration_seals_going_forward_and_unseals_going_back(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    from rooms import services
    from rooms.models import Message, Whisper

    opened = make_open_room()
    offer = _offer(opened)
    services.message_say(
        room_id=opened.room.id, agent_id=opened.a.agent.id, client_id="m", text=CANARY
    )
    services.whisper_send(owner=opened.a.owner, room_id=opened.room.id, text=CANARY)

    def stored() -> list[str]:
        q = connection.ops.quote_name
        values = [_raw_offer(offer.id)]
        with connection.cursor() as cursor:
            for model in (Message, Whisper):
                cursor.execute(f"SELECT text FROM {q(model._meta.db_table)}")  # noqa: S608
                values += [str(v) for (v,) in cursor.fetchall()]
        return values

    assert len(stored()) == 3 and all(v.startswith("rc1:") for v in stored())
    try:
        call_command("migrate", "rooms", "0013", verbosity=0)  # 0014 back: the transcript
        assert [CANARY in v for v in stored()] == [False, True, True]
        call_command("migrate", "rooms", "0012", verbosity=0)  # 0013 back: the offers
        assert all(CANARY in v for v in stored())
        call_command("migrate", "rooms", verbosity=0)
        assert all(v.startswith("rc1:") and CANARY not in v for v in stored())
    finally:
        call_command("migrate", verbosity=0)
    assert SealedOffer.objects.get(id=offer.id).offer["note"] == CANARY
    assert Message.objects.get(room_id=opened.room.id).text == CANARY
    assert Whisper.objects.get(room_id=opened.room.id).text == CANARY


def test_the_sealed_field_names_its_column_in_migrations() -> None:
    field = SealedOffer._meta.get_field("offer")
    assert isinstance(field, SealedJSONField)
    _, path, _, kwargs = field.deconstruct()
    assert (path, kwargs["sealed_as"]) == ("rooms.sealing.SealedJSONField", "sealed_offer.offer")


def test_a_restored_key_store_backup_gives_a_deleted_room_its_key_until_reapply(
    make_open_room: Callable[..., OpenRoom], settings: Any, tmp_path: Path
) -> None:
    """The key store is backed up apart from the database: a key-store backup taken before a
    deletion brings the room key back; ``reapply_deletions`` destroys it again."""
    import sqlite3

    key_store = tmp_path / "keys.sqlite3"
    settings.SLIPS = {**settings.SLIPS, "KEY_STORE_PATH": str(key_store)}
    settings.SYNAPSIA = {**settings.SYNAPSIA, "DELETION_JOURNAL_PATH": str(tmp_path / "j.jsonl")}
    room_keys_forget()
    opened = make_open_room()
    copied = _raw_offer(_offer(opened).id)  # what a database backup holds
    backup = tmp_path / "keys-backup.sqlite3"
    with sqlite3.connect(key_store) as source, sqlite3.connect(backup) as target:
        source.backup(target)

    room_delete(owner=opened.a.owner, room_id=opened.room.id)
    with sqlite3.connect(backup) as source, sqlite3.connect(key_store) as target:
        source.backup(target)  # the key store restored from before the deletion
    room_keys_forget()
    opens = room_content_open(sealed=copied, column="sealed_offer.offer", room_id=opened.room.id)
    assert CANARY.encode() in opens  # the restore really brought the key back ...

    call_command("reapply_deletions")
    with pytest.raises(DataKeyDestroyed):  # ... and reapplying the journal destroys it again
        room_content_open(sealed=copied, column="sealed_offer.offer", room_id=opened.room.id)


def test_one_hop_reads_each_keys_destroyed_mark_once_and_forgets_it_on_destroy(
    make_open_room: Callable[..., OpenRoom], monkeypatch: pytest.MonkeyPatch
) -> None:
    import rooms.sealing as sealing

    opened = make_open_room()
    values = [
        room_content_seal(room_id=opened.room.id, column="message.text", plaintext=b"v%d" % i)
        for i in range(5)
    ]
    room_content_open(sealed=values[0], column="message.text")  # the key cached
    checks: list[object] = []
    real = sealing.data_key_live
    monkeypatch.setattr(
        sealing, "data_key_live", lambda key_id: checks.append(key_id) or real(key_id)
    )

    for value in values:  # outside a hop: every use re-reads the mark
        room_content_open(sealed=value, column="message.text")
    assert len(checks) == 5
    checks.clear()
    with sealing.one_hop():
        opened_values = [room_content_open(sealed=v, column="message.text") for v in values]
        assert len(checks) == 1 and opened_values == [b"v%d" % i for i in range(5)]
        room_key_destroy(opened.room.id)  # destroyed in the same hop: refused at once
        with pytest.raises(DataKeyDestroyed):
            room_content_open(sealed=values[0], column="message.text")
    checks.clear()
    with pytest.raises(DataKeyDestroyed):  # and after it
        room_content_open(sealed=values[1], column="message.text")


def test_sealing_existing_rows_goes_through_every_batch_both_ways(
    make_open_room: Callable[..., OpenRoom], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four plaintext offers of two rooms, three rows a batch: every one is sealed under its
    own room's key, and unsealed back, across the batch boundary."""
    monkeypatch.setattr(sealing, "_BATCH", 3)
    offers = []
    for prefix in ("one-", "two-"):
        opened = make_open_room(prefix=prefix)
        for agent in ("a", "b"):
            offer = _offer(opened, agent=agent)
            _raw_offer_set(offer.id, f'{{"note": "plain-{prefix}{agent}"}}')
            offers.append((offer.id, opened.room.id, f"plain-{prefix}{agent}"))

    sealed = room_content_seal_existing(apps.get_model, connection, only=["rooms.SealedOffer"])
    assert sealed == {"rooms.SealedOffer.offer": 4}
    for offer_id, room_id, note in offers:
        raw = _raw_offer(offer_id)
        assert raw.startswith("rc1:") and note not in raw
        opened_bytes = room_content_open(sealed=raw, column="sealed_offer.offer", room_id=room_id)
        assert json.loads(opened_bytes) == {"note": note}

    unsealed = room_content_unseal_existing(apps.get_model, connection, only=["rooms.SealedOffer"])
    assert unsealed == {"rooms.SealedOffer.offer": 4}
    assert {json.loads(_raw_offer(offer_id))["note"] for offer_id, _, _ in offers} == {
        note for _, _, note in offers
    }

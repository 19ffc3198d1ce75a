"""The vault: typed items, sealed at rest, .ics import, and only scoped views for agents."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection

from slips.capabilities import (
    VAULT_SCOPES,
    capability_from_record,
    capability_narrower_or_equal,
    capability_under_tier,
)
from slips.errors import Malformed, Misconfigured
from slips.models import Tier, VaultItem
from slips.selectors import vault_of_owner
from slips.vault import (
    ics_busy_windows,
    vault_import_ics,
    vault_item_create,
    vault_item_delete,
    vault_item_update,
    vault_scoped_view,
)

pytestmark = pytest.mark.django_db

NOW = datetime(2030, 3, 4, 9, 0, tzinfo=UTC)


def _cap(resource: str, scope: str | None = None):
    record = {"resource": resource, **({"scope": scope} if scope else {})}
    return capability_from_record(record, slip_expires_at=2**40)


def test_items_are_encrypted_at_rest(make_owner) -> None:
    alice = make_owner("alice")
    item = vault_item_create(owner=alice, content={"kind": "allergies", "items": ["sesame"]})
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT sealed FROM slips_vaultitem WHERE id = %s",
            [item.id.hex if connection.vendor == "sqlite" else item.id],
        )
        (raw,) = cursor.fetchone()
    assert b"sesame" not in bytes(raw) and b"allergies" not in bytes(raw)
    assert vault_of_owner(owner=alice)[0].content == {"kind": "allergies", "items": ["sesame"]}


def test_a_sealed_item_does_not_open_for_another_owner(make_owner) -> None:
    alice, bob = make_owner("alice"), make_owner("bob")
    item = vault_item_create(owner=alice, content={"kind": "note", "text": "private"})
    VaultItem.objects.filter(id=item.id).update(owner=bob)
    with pytest.raises(Misconfigured):
        vault_of_owner(owner=bob)


def test_production_refuses_without_a_vault_key(make_owner, settings) -> None:
    settings.PROFILE = "production"
    settings.SLIPS = {**settings.SLIPS, "VAULT_KEY": ""}
    with pytest.raises(Misconfigured) as caught:
        vault_item_create(owner=make_owner("alice"), content={"kind": "note", "text": "x"})
    assert caught.value.code == "vault_key"
    assert not VaultItem.objects.exists()


def test_configured_key_is_used(make_owner, settings) -> None:
    alice = make_owner("alice")
    settings.SLIPS = {**settings.SLIPS, "VAULT_KEY": "A" * 43}
    vault_item_create(owner=alice, content={"kind": "note", "text": "x"})
    settings.SLIPS = {**settings.SLIPS, "VAULT_KEY": "B" * 43}
    with pytest.raises(Misconfigured):
        vault_of_owner(owner=alice)


@pytest.mark.parametrize(
    "content",
    [
        {"kind": "diary", "text": "x"},
        {"kind": "budget", "currency": "eur", "minimum": 1, "maximum": 2},
        {"kind": "budget", "currency": "EUR", "minimum": 5, "maximum": 2},
        {"kind": "link", "url": "javascript:alert(1)"},
        {"kind": "note", "text": "x", "extra": 1},
        {"kind": "availability", "busy": [{"start": 10, "end": 5}]},
    ],
)
def test_invalid_items_are_refused(make_owner, content) -> None:
    with pytest.raises(Malformed):
        vault_item_create(owner=make_owner("alice"), content=content)
    assert not VaultItem.objects.exists()


def test_update_and_delete(make_owner) -> None:
    alice = make_owner("alice")
    item = vault_item_create(owner=alice, content={"kind": "neighbourhood", "name": "Mitte"})
    vault_item_update(
        owner=alice, item_id=item.id, content={"kind": "neighbourhood", "name": "Wedding"}
    )
    assert vault_of_owner(owner=alice)[0].content["name"] == "Wedding"
    with pytest.raises(Malformed):
        vault_item_update(owner=alice, item_id=item.id, content={"kind": "note", "text": "x"})
    vault_item_delete(owner=alice, item_id=item.id)
    assert vault_of_owner(owner=alice) == []


ICS = b"""BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//test//EN
BEGIN:VEVENT
UID:1
SUMMARY:Dentist (private)
DTSTART:20300304T100000Z
DTEND:20300304T110000Z
END:VEVENT
BEGIN:VEVENT
UID:2
SUMMARY:Standup
DTSTART:20300304T103000Z
DURATION:PT1H
RRULE:FREQ=DAILY;COUNT=3
END:VEVENT
BEGIN:VEVENT
UID:3
SUMMARY:Optional talk
TRANSP:TRANSPARENT
DTSTART:20300305T150000Z
DTEND:20300305T160000Z
END:VEVENT
BEGIN:VEVENT
UID:4
SUMMARY:Cancelled
STATUS:CANCELLED
DTSTART:20300305T170000Z
DTEND:20300305T180000Z
END:VEVENT
BEGIN:VEVENT
UID:5
SUMMARY:Holiday
DTSTART;VALUE=DATE:20300320
DTEND;VALUE=DATE:20300321
END:VEVENT
END:VCALENDAR
"""


def _ts(*args: int) -> int:
    return int(datetime(*args, tzinfo=UTC).timestamp())


def test_ics_import_keeps_busy_time_only() -> None:
    windows = [(w.start, w.end) for w in ics_busy_windows(ics=ICS, now=NOW, zone=UTC)]
    assert windows == [
        (_ts(2030, 3, 4, 10), _ts(2030, 3, 4, 11, 30)),  # overlapping events merged
        (_ts(2030, 3, 5, 10, 30), _ts(2030, 3, 5, 11, 30)),
        (_ts(2030, 3, 6, 10, 30), _ts(2030, 3, 6, 11, 30)),
        (_ts(2030, 3, 20), _ts(2030, 3, 21)),
    ]


@pytest.mark.parametrize(
    "ics", [b"not a calendar", b"BEGIN:VCALENDAR\nBEGIN:VEVENT\n", b"x" * (1024 * 1024 + 1)]
)
def test_bad_ics_is_refused(ics: bytes) -> None:
    with pytest.raises(Malformed):
        ics_busy_windows(ics=ics, now=NOW, zone=UTC)


def test_scoped_free_busy_has_no_titles_and_stays_in_its_horizon(make_owner) -> None:
    alice = make_owner("alice")
    vault_import_ics(owner=alice, ics=ICS, now=NOW, zone=UTC)
    assert "Dentist" not in str(vault_of_owner(owner=alice))  # titles are never stored
    day = vault_scoped_view(owner_id=alice.pk, capability=_cap("availability"), now=NOW)
    assert day == [
        {
            "from": _ts(2030, 3, 4, 9),
            "until": _ts(2030, 3, 5, 9),
            "busy": [[_ts(2030, 3, 4, 10), _ts(2030, 3, 4, 11, 30)]],  # merged, untitled
        }
    ]
    week = vault_scoped_view(
        owner_id=alice.pk, capability=_cap("availability", "free_busy_7d"), now=NOW
    )
    assert len(week[0]["busy"]) == 3 and "Dentist" not in str(week)
    month = vault_scoped_view(
        owner_id=alice.pk, capability=_cap("availability", "free_busy_30d"), now=NOW
    )
    assert [_ts(2030, 3, 20), _ts(2030, 3, 21)] in month[0]["busy"]
    # Importing again replaces, rather than duplicates, the availability item.
    vault_import_ics(owner=alice, ics=ICS, now=NOW, zone=UTC)
    assert VaultItem.objects.filter(owner=alice, kind="availability").count() == 1


def _budget(owner, minimum: int, maximum: int, currency: str = "EUR"):
    return vault_item_create(
        owner=owner,
        content={
            "kind": "budget",
            "currency": currency,
            "minimum": minimum,
            "maximum": maximum,
            "notes": "could stretch to 120",
        },
    )


def test_scoped_budget_range_is_exact_and_has_no_notes(make_owner) -> None:
    alice, bob = make_owner("alice"), make_owner("bob")
    _budget(alice, 4300, 5700)
    view = vault_scoped_view(owner_id=alice.pk, capability=_cap("budget", "range"), now=NOW)
    assert view == [{"currency": "EUR", "min": 4300, "max": 5700}]
    assert vault_scoped_view(owner_id=bob.pk, capability=_cap("budget", "range"), now=NOW) == []
    tool = capability_from_record({"resource": "tool:book"}, slip_expires_at=2**40)
    assert vault_scoped_view(owner_id=alice.pk, capability=tool, now=NOW) == []


@pytest.mark.parametrize(
    ("minimum", "maximum", "currency", "band"),
    [
        (4300, 5700, "EUR", (4000, 6000)),  # 43-57 EUR is "about 40 to 60"
        (3000, 8000, "EUR", (3000, 8000)),  # already on the step: unchanged
        (4301, 5699, "EUR", (4000, 6000)),  # cents count too
        (0, 1, "EUR", (0, 1000)),
        (4300, 5700, "JPY", (4300, 5700)),  # JPY has no minor unit: the step is 10 yen
        (4321, 5678, "JPY", (4320, 5680)),
        (43000, 57000, "KWD", (40000, 60000)),  # three decimals
    ],
)
def test_the_band_widens_outward_to_ten_whole_units(
    make_owner, minimum, maximum, currency, band
) -> None:
    alice = make_owner("alice")
    _budget(alice, minimum, maximum, currency)
    # A budget record without a scope shares only the band.
    view = vault_scoped_view(owner_id=alice.pk, capability=_cap("budget"), now=NOW)
    assert view == [{"currency": currency, "min": band[0], "max": band[1], "band": True}]
    assert "stretch" not in str(view)


def test_band_is_narrower_than_range_and_is_the_default() -> None:
    band, exact = _cap("budget"), _cap("budget", "range")
    assert band.scope == "band"
    assert capability_narrower_or_equal(band, exact)
    assert not capability_narrower_or_equal(exact, band)
    # Tiers only narrow: no tier turns a band into the exact range.
    for tier in Tier:
        narrowed = capability_under_tier(band, tier)
        assert narrowed is None or narrowed.scope == "band"


def test_fourteen_day_free_busy_covers_exactly_fourteen_days(make_owner) -> None:
    alice = make_owner("alice")
    day = 86_400
    start = int(NOW.timestamp())
    busy = [
        {"start": start + 13 * day, "end": start + 13 * day + 3600, "title": "in"},
        {"start": start + 14 * day - 1800, "end": start + 14 * day + 1800, "title": "edge"},
        {"start": start + 15 * day, "end": start + 15 * day + 3600, "title": "out"},
    ]
    vault_item_create(owner=alice, content={"kind": "availability", "busy": busy})
    scoped = vault_scoped_view(
        owner_id=alice.pk, capability=_cap("availability", "free_busy_14d"), now=NOW
    )
    assert scoped == [
        {
            "from": start,
            "until": start + 14 * day,
            "busy": [
                [start + 13 * day, start + 13 * day + 3600],
                [start + 14 * day - 1800, start + 14 * day],  # cut at the horizon
            ],
        }
    ]
    scopes = VAULT_SCOPES["availability"]
    assert (
        scopes.index("free_busy_7d") < scopes.index("free_busy_14d") < scopes.index("free_busy_30d")
    )


def test_food_dislikes_create_update_and_scoped_view(make_owner) -> None:
    alice = make_owner("alice")
    item = vault_item_create(owner=alice, content={"kind": "food_dislikes", "items": ["thai"]})
    vault_item_update(
        owner=alice,
        item_id=item.id,
        content={"kind": "food_dislikes", "items": ["thai", "seafood"]},
    )
    view = vault_scoped_view(owner_id=alice.pk, capability=_cap("food_dislikes"), now=NOW)
    assert view == [{"items": ["thai", "seafood"]}]
    assert vault_scoped_view(owner_id=alice.pk, capability=_cap("food_likes"), now=NOW) == []
    assert _cap("food_dislikes").scope == "list"


def test_allergies_are_words_of_the_vocabulary(make_owner) -> None:
    alice = make_owner("alice")
    item = vault_item_create(
        owner=alice, content={"kind": "allergies", "items": ["Tree nuts", "PEANUTS", "peanuts"]}
    )
    assert vault_of_owner(owner=alice)[0].content["items"] == ["peanuts", "tree-nuts"]
    with pytest.raises(Malformed) as refused:
        vault_item_update(
            owner=alice, item_id=item.id, content={"kind": "allergies", "items": ["walnuts"]}
        )
    assert refused.value.code == "unknown_allergen"
    assert "'walnuts' is not an allergen" in refused.value.message
    assert "tree nuts" in refused.value.message and "sesame" in refused.value.message
    # The refused update changed nothing.
    assert vault_of_owner(owner=alice)[0].content["items"] == ["peanuts", "tree-nuts"]


def test_a_neighbourhood_is_a_registered_citys_in_its_spelling(make_owner) -> None:
    alice = make_owner("alice")
    vault_item_create(owner=alice, content={"kind": "neighbourhood", "name": "prenzlauer BERG"})
    vault_item_create(owner=alice, content={"kind": "neighbourhood", "name": "neukoelln"})
    names = sorted(i.content["name"] for i in vault_of_owner(owner=alice))
    assert names == ["Neukölln", "Prenzlauer Berg"]
    with pytest.raises(Malformed) as refused:
        vault_item_create(owner=alice, content={"kind": "neighbourhood", "name": "Mission"})
    assert refused.value.code == "unknown_neighbourhood"
    assert "'Mission' is not a neighbourhood" in refused.value.message
    assert "Kreuzberg" in refused.value.message
    assert VaultItem.objects.filter(owner=alice).count() == 2

"""Catalogue and city files: the shipped ones validate, and bad ones say what is wrong."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from dining import ALLERGENS, CatalogueInvalid, catalogue_default, catalogue_load
from dining.registry import SHIPPED_CATALOGUE

DATA = SHIPPED_CATALOGUE.parent


def _shipped() -> tuple[dict[str, Any], dict[str, Any]]:
    city = json.loads((DATA / "berlin.city.json").read_text())
    venues = json.loads((DATA / "berlin.venues.json").read_text())
    return city, venues


def _write(tmp_path: Path, city: dict[str, Any], venues: dict[str, Any]) -> Path:
    (tmp_path / "berlin.city.json").write_text(json.dumps(city))
    path = tmp_path / "berlin.venues.json"
    path.write_text(json.dumps(venues))
    return path


def _problems(tmp_path: Path, city: dict[str, Any], venues: dict[str, Any]) -> list[str]:
    with pytest.raises(CatalogueInvalid) as caught:
        catalogue_load(_write(tmp_path, city, venues))
    return [str(p) for p in caught.value.problems]


def test_the_shipped_catalogue_is_realistic() -> None:
    catalogue = catalogue_default()
    assert catalogue.id == "berlin-dining"
    assert 40 <= len(catalogue.venues) <= 60
    assert len(catalogue.city.neighbourhoods) >= 10
    prices = [v.price_per_person.amount_minor for v in catalogue.venues]
    assert min(prices) <= 1500 and max(prices) >= 9000
    for place in catalogue.city.neighbourhoods:
        here = {v.cuisine for v in catalogue.venues if v.neighbourhood == place.id}
        assert len(here) >= 3, f"{place.name} has too few cuisines"
    assert any(not v.hours.mon for v in catalogue.venues), "no venue is closed on a weekday"
    assert any(len(v.hours.fri) == 2 for v in catalogue.venues), "no lunch-and-dinner venue"


@pytest.mark.parametrize(
    ("venue_id", "price", "cuisine", "neighbourhood", "unsafe"),
    [
        ("sora-sushi", 4200, "japanese", "kreuzberg", {"shellfish"}),
        ("trattoria-mitte", 2600, "italian", "mitte", {"peanuts"}),
        ("osteria-kanal", 3800, "italian", "kreuzberg", set()),
        ("bangkok-garden", 2200, "thai", "mitte", {"peanuts", "shellfish"}),
        ("tbilisi-house", 2400, "georgian", "kreuzberg", {"tree-nuts"}),
        ("kaiseki-nori", 9000, "japanese", "mitte", set()),
    ],
)
def test_the_practice_venues_keep_their_meaning(
    venue_id: str, price: int, cuisine: str, neighbourhood: str, unsafe: set[str]
) -> None:
    venue = catalogue_default().venue(venue_id)
    assert venue is not None
    assert (venue.price_per_person.amount_minor, venue.price_per_person.currency) == (price, "EUR")
    assert (venue.cuisine, venue.neighbourhood) == (cuisine, neighbourhood)
    assert set(ALLERGENS) - set(venue.safe_for) == unsafe
    assert venue.table_sizes == [2, 4]
    for day in ("mon", "tue", "wed", "thu", "fri", "sat", "sun"):
        assert [(i.opens, i.closes) for i in getattr(venue.hours, day)] == [("17:00", "23:30")]


def test_the_check_command_summarises_a_good_file(capsys: pytest.CaptureFixture[str]) -> None:
    call_command("venue_catalogue_check", str(SHIPPED_CATALOGUE))
    out = capsys.readouterr().out
    assert "is valid: 50 venues" in out
    assert "10 neighbourhoods of Berlin" in out


def test_the_check_command_prints_each_problem_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    city, venues = _shipped()
    venues["venues"][0]["neighbourhood"] = "atlantis"
    venues["venues"][1]["safe_for"] = ["walnuts"]
    path = _write(tmp_path, city, venues)
    with pytest.raises(CommandError) as failed:
        call_command("venue_catalogue_check", str(path))
    assert failed.value.returncode == 1
    err = capsys.readouterr().err
    assert "venues[1].safe_for[0]: not an allergen of the vocabulary" in err


def _mutations() -> list[tuple[str, Any, str]]:
    """(what is wrong, how to break the shipped files, words the problem must contain)."""

    def missing_pair(city: dict[str, Any], venues: dict[str, Any]) -> None:
        city["travel_minutes"].pop()

    def doubled_pair(city: dict[str, Any], venues: dict[str, Any]) -> None:
        first = city["travel_minutes"][0]
        city["travel_minutes"].append({"from": first["to"], "to": first["from"], "minutes": 9})

    def bad_zone(city: dict[str, Any], venues: dict[str, Any]) -> None:
        city["time_zone"] = "Europe/Atlantis"

    def unknown_place(city: dict[str, Any], venues: dict[str, Any]) -> None:
        venues["venues"][3]["neighbourhood"] = "atlantis"

    def doubled_venue(city: dict[str, Any], venues: dict[str, Any]) -> None:
        venues["venues"].append(copy.deepcopy(venues["venues"][0]))

    def bad_allergen(city: dict[str, Any], venues: dict[str, Any]) -> None:
        venues["venues"][2]["safe_for"] = ["gluten", "walnuts"]

    def missing_day(city: dict[str, Any], venues: dict[str, Any]) -> None:
        del venues["venues"][0]["hours"]["sun"]

    def backwards_hours(city: dict[str, Any], venues: dict[str, Any]) -> None:
        venues["venues"][0]["hours"]["tue"] = [{"opens": "23:00", "closes": "17:00"}]

    def bad_clock(city: dict[str, Any], venues: dict[str, Any]) -> None:
        venues["venues"][0]["hours"]["tue"] = [{"opens": "5pm", "closes": "23:00"}]

    def float_price(city: dict[str, Any], venues: dict[str, Any]) -> None:
        venues["venues"][0]["price_per_person"]["amount_minor"] = 42.5

    def typo_field(city: dict[str, Any], venues: dict[str, Any]) -> None:
        venues["venues"][0]["cusine"] = venues["venues"][0].pop("cuisine")

    def overlapping(city: dict[str, Any], venues: dict[str, Any]) -> None:
        venues["venues"][0]["hours"]["fri"] = [
            {"opens": "12:00", "closes": "18:00"},
            {"opens": "17:00", "closes": "23:00"},
        ]

    def doubled_place(city: dict[str, Any], venues: dict[str, Any]) -> None:
        city["neighbourhoods"].append({"id": "mitte", "name": "Mitte again"})

    return [
        ("a pair without travel minutes", missing_pair, "travel_minutes has no entry for"),
        ("a pair given twice", doubled_pair, "give each pair once"),
        ("an unknown time zone", bad_zone, "'Europe/Atlantis' is not an IANA time zone"),
        (
            "a venue in no neighbourhood",
            unknown_place,
            "venues[3].neighbourhood: 'atlantis' is not",
        ),
        ("two venues with one id", doubled_venue, "venue ids must be unique; listed twice: sora"),
        ("an allergen outside the vocabulary", bad_allergen, "venues[2].safe_for[1]: not an"),
        ("a weekday missing", missing_day, "venues[0].hours.sun: this field is required"),
        ("closing before opening", backwards_hours, "closes (17:00) must be after opens (23:00)"),
        ("a time not HH:MM", bad_clock, 'hours.tue[0].opens: a time must be "HH:MM"'),
        ("a price with cents as a fraction", float_price, "amount_minor"),
        ("a misspelt field", typo_field, "venues[0].cusine: this field is not part of"),
        ("overlapping intervals", overlapping, "fri: 12:00-18:00 and 17:00-23:00 overlap"),
        ("a neighbourhood listed twice", doubled_place, "neighbourhood ids must be unique"),
    ]


@pytest.mark.parametrize(
    ("what", "mutate", "words"), _mutations(), ids=[m[0] for m in _mutations()]
)
def test_a_bad_file_says_where_and_what(tmp_path: Path, what: str, mutate: Any, words: str) -> None:
    city, venues = _shipped()
    mutate(city, venues)
    problems = _problems(tmp_path, city, venues)
    assert any(words in p for p in problems), problems
    # Each problem names the file it is in.
    assert all(p.startswith(str(tmp_path)) for p in problems), problems


def test_not_json_and_missing_files_are_said_in_words(tmp_path: Path) -> None:
    broken = tmp_path / "broken.venues.json"
    broken.write_text('{"id": "x",')
    with pytest.raises(CatalogueInvalid, match=r"is not JSON \(line 1"):
        catalogue_load(broken)
    with pytest.raises(CatalogueInvalid, match="cannot be read"):
        catalogue_load(tmp_path / "nowhere.json")
    city, venues = _shipped()
    venues["city"] = "elsewhere.city.json"
    with pytest.raises(CatalogueInvalid, match=r"the city file elsewhere\.city\.json is unusable"):
        catalogue_load(_write(tmp_path, city, venues))


def test_an_edited_file_is_read_again(tmp_path: Path) -> None:
    city, venues = _shipped()
    path = _write(tmp_path, city, venues)
    assert catalogue_load(path).venue("sora-sushi") is not None
    venues["venues"] = [v for v in venues["venues"] if v["id"] != "sora-sushi"]
    path.write_text(json.dumps(venues))
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    assert catalogue_load(path).venue("sora-sushi") is None

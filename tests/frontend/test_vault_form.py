"""The vault page, through the Django test client on a real database: one form per kind, a
budget entered and shown in whole units, refusals in words that store nothing, edit and delete."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from html import unescape
from typing import Any

import pytest

from rooms.models import NotificationPreference
from slips.capabilities import capability_from_record
from slips.models import VaultItem
from slips.selectors import vault_of_owner
from slips.vault import vault_item_create, vault_scoped_view

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(make_owner, client):
    owner = make_owner("alice")
    client.force_login(owner)
    return owner


def _text(response: Any) -> str:
    """The page as a person reads it: tags dropped, entities decoded, spaces collapsed."""
    html = response.content.decode()
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def _items_text(response: Any) -> str:
    html = response.content.decode()
    listed = re.search(r'<ul id="vault-items".*?</ul>', html, flags=re.S)
    assert listed is not None
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", listed.group(0))).split())


def _budget_post(client, minimum: str, maximum: str, currency: str = "EUR", **extra: str):
    return client.post(
        "/vault/",
        {
            "kind": "budget",
            "budget-currency": currency,
            "budget-minimum": minimum,
            "budget-maximum": maximum,
            "budget-notes": "",
            **extra,
        },
    )


def test_a_budget_of_30_to_80_is_stored_in_minor_units_and_shown_back_in_whole_units(
    alice, client
) -> None:
    response = _budget_post(client, "30", "80")
    assert response.status_code == 302
    [item] = vault_of_owner(owner=alice)
    assert item.content == {
        "kind": "budget",
        "currency": "EUR",
        "minimum": 3000,
        "maximum": 8000,
        "notes": "",
    }
    page = client.get("/vault/")
    assert "30 to 80 EUR per person" in _items_text(page)
    # The form to change it is filled in whole units too.
    html = page.content.decode()
    assert re.search(r'name="budget-minimum" value="30"', html)
    assert re.search(r'name="budget-maximum" value="80"', html)
    # What an agent reads: 30.00 to 80.00, so a 52 EUR dinner is inside it.
    view = vault_scoped_view(
        owner_id=alice.pk,
        capability=capability_from_record(
            {"resource": "budget", "scope": "range"}, slip_expires_at=2**40
        ),
        now=datetime.now(UTC),
    )
    assert view == [{"currency": "EUR", "min": 3000, "max": 8000}]
    assert view[0]["min"] <= 5200 <= view[0]["max"]


def test_a_yen_budget_has_no_minor_unit(alice, client) -> None:
    assert _budget_post(client, "3000", "8000", currency="JPY").status_code == 302
    assert vault_of_owner(owner=alice)[0].content["maximum"] == 8000
    assert "3000 to 8000 JPY per person" in _items_text(client.get("/vault/"))


@pytest.mark.parametrize(
    ("minimum", "maximum", "message"),
    [
        ("80", "30", "The highest amount (30) is below the lowest (80)"),
        ("thirty", "80", "Enter the lowest amount as a whole number"),
        ("30", "8o", "Enter the highest amount as a whole number"),
        ("-5", "80", "The lowest amount cannot be below zero."),
        ("30.5", "80", "Enter the lowest amount as a whole number"),
        ("", "80", "Enter the lowest amount"),
    ],
)
def test_bad_budgets_are_refused_in_words_and_store_nothing(
    alice, client, minimum, maximum, message
) -> None:
    response = _budget_post(client, minimum, maximum)
    assert response.status_code == 400
    assert message in _text(response)
    assert not VaultItem.objects.exists()


def test_a_refused_change_keeps_what_was_saved(alice, client) -> None:
    _budget_post(client, "30", "80")
    [item] = vault_of_owner(owner=alice)
    response = _budget_post(client, "90", "20", item=str(item.id))
    assert response.status_code == 400
    assert vault_of_owner(owner=alice)[0].content["maximum"] == 8000


def test_budget_is_edited_in_place(alice, client) -> None:
    _budget_post(client, "30", "80")
    [item] = vault_of_owner(owner=alice)
    # The budget form opens the saved budget: posting it again changes it, adds no second one.
    html = client.get("/vault/").content.decode()
    assert f'name="item" value="{item.id}"' in html
    assert _budget_post(client, "40", "60", item=str(item.id)).status_code == 302
    assert [i.content["minimum"] for i in vault_of_owner(owner=alice)] == [4000]
    assert "40 to 60 EUR per person" in _items_text(client.get("/vault/"))


def test_food_dislikes_are_added_changed_and_deleted(alice, client) -> None:
    response = client.post(
        "/vault/", {"kind": "food_dislikes", "food_dislikes-items": "Thai\nseafood, thai,  "}
    )
    assert response.status_code == 302
    [item] = vault_of_owner(owner=alice)
    assert item.content == {"kind": "food_dislikes", "items": ["Thai", "seafood"]}
    page = client.get("/vault/")
    assert "Food you would rather not eat: Thai, seafood" in _items_text(page)
    client.post(
        "/vault/",
        {"kind": "food_dislikes", "item": str(item.id), "food_dislikes-items": "korean"},
    )
    assert vault_of_owner(owner=alice)[0].content["items"] == ["korean"]
    assert client.post("/vault/", {"delete": str(item.id)}).status_code == 302
    assert vault_of_owner(owner=alice) == []
    empty = client.post("/vault/", {"kind": "food_dislikes", "food_dislikes-items": " , "})
    assert empty.status_code == 400 and "Enter at least one cuisine or dish." in _text(empty)


def test_allergies_are_checkboxes_of_the_vocabulary(alice, client) -> None:
    page = client.get("/vault/").content.decode()
    box = re.search(r'<input type="checkbox" name="allergies-items" value="tree-nuts"[^>]*>', page)
    assert box is not None
    box_id = re.search(r'id="([^"]+)"', box.group(0))
    assert box_id is not None and f'for="{box_id.group(1)}"' in page  # labelled
    response = client.post(
        "/vault/", {"kind": "allergies", "allergies-items": ["tree-nuts", "sesame"]}
    )
    assert response.status_code == 302
    assert vault_of_owner(owner=alice)[0].content["items"] == ["tree-nuts", "sesame"]
    assert "Allergies: tree nuts, sesame" in _items_text(client.get("/vault/"))


def test_an_unknown_allergen_is_refused(alice, client) -> None:
    response = client.post("/vault/", {"kind": "allergies", "allergies-items": ["walnuts"]})
    assert response.status_code == 400
    assert "walnuts is not one of the allergens listed." in _text(response)
    assert not VaultItem.objects.exists()


def test_a_neighbourhood_is_chosen_from_the_city_and_stored_in_its_spelling(alice, client) -> None:
    page = client.get("/vault/").content.decode()
    assert '<optgroup label="Berlin">' in page and '<option value="Neukölln">' in page
    assert (
        client.post("/vault/", {"kind": "neighbourhood", "neighbourhood-name": "neukölln"})
    ).status_code == 302
    assert vault_of_owner(owner=alice)[0].content["name"] == "Neukölln"
    refused = client.post("/vault/", {"kind": "neighbourhood", "neighbourhood-name": "Mission"})
    assert refused.status_code == 400
    assert "'Mission' is not a neighbourhood of the cities we know." in _text(refused)
    assert [i.content["name"] for i in vault_of_owner(owner=alice)] == ["Neukölln"]


def test_items_are_listed_in_words_never_epochs_ids_or_json(alice, client) -> None:
    # Shown in the owner's zone (Settings), not the one the calendar was imported in.
    NotificationPreference.objects.update_or_create(
        owner=alice, defaults={"time_zone": "Europe/Berlin"}
    )
    start = int(datetime(2030, 3, 4, 18, tzinfo=UTC).timestamp())
    vault_item_create(
        owner=alice,
        content={
            "kind": "availability",
            "timezone": "America/New_York",
            "busy": [
                {"start": start, "end": start + 3600, "title": "Dentist"},
                {"start": start + 9 * 86_400, "end": start + 9 * 86_400 + 3600},
            ],
        },
    )
    vault_item_create(owner=alice, content={"kind": "note", "text": "Prefers window seats"})
    listed = _items_text(client.get("/vault/"))
    assert "Busy times: 2 busy times from Mon 4 Mar 2030, 19:00 to" in listed
    assert "Wed 13 Mar 2030, 20:00 (Europe/Berlin)" in listed
    assert "Note: Prefers window seats" in listed
    assert str(start) not in listed and "{" not in listed and "Dentist" not in listed
    for item in vault_of_owner(owner=alice):
        assert str(item.id) not in listed


def test_every_control_on_the_vault_page_has_a_label(alice, client) -> None:
    html = client.get("/vault/").content.decode()
    controls = re.findall(r"<(?:input|select|textarea)\b[^>]*>", html)
    visible = [c for c in controls if 'type="hidden"' not in c and 'type="submit"' not in c]
    assert len(visible) > 10
    for control in visible:
        found = re.search(r'id="([^"]+)"', control)
        assert found is not None, control
        assert f'for="{found.group(1)}"' in html, control


def test_the_slip_page_offers_the_new_kind_and_scopes_in_words(make_open_room, client) -> None:
    opened = make_open_room()
    client.force_login(opened.a.owner)
    page = client.get(f"/rooms/{opened.room.id}/slip/")
    assert page.status_code == 200
    words = page.context["slip_words"]
    template = client.get(f"/api/rooms/{opened.room.id}/slip-template").json()
    # Every kind and scope the slip can sign has words on the page, narrowest first.
    assert template["resources"]["budget"] == ["band", "range"]
    assert template["resources"]["food_dislikes"] == ["list"]
    assert "free_busy_14d" in template["resources"]["availability"]
    for kind, scopes in template["resources"].items():
        assert kind in words["resources"]
        assert all(scope in words["scopes"] for scope in scopes)
    html = page.content.decode()
    assert "Share a rough budget band (rounded to 10)" in html
    assert "Share the exact budget range" in html
    assert "Free/busy for the next 14 days" in html
    assert "Food you would rather not eat" in html

"""The vault page as an owner uses it: a week of busy times in their own time zone, the .ics
import and busy times by form, every kind edited and deleted (with a confirmation), and text
a person reads (no epochs, ids or JSON)."""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta
from html import unescape
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from rooms.models import NotificationPreference
from slips.models import VaultItem
from slips.selectors import vault_of_owner
from slips.vault import vault_item_create

pytestmark = pytest.mark.django_db

BERLIN = ZoneInfo("Europe/Berlin")
UUID_PATTERN = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}", re.I)
EPOCH_PATTERN = re.compile(r"\b1\d{9}\b|\b\d{10,}\b")


@pytest.fixture
def alice(make_owner, client):
    owner = make_owner("alice")
    NotificationPreference.objects.update_or_create(
        owner=owner, defaults={"time_zone": "Europe/Berlin"}
    )
    client.force_login(owner)
    return owner


def _text(response: Any) -> str:
    """The page as a person reads it: tags dropped, entities decoded, spaces collapsed."""
    html = response.content.decode()
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())
    return re.sub(r" ([,.;:])", r"\1", text)  # "<a>first</a>, it" reads "first, it"


def _week_text(response: Any) -> str:
    found = re.search(r'<ol class="week".*?</ol>', response.content.decode(), flags=re.S)
    assert found is not None, "no week on the page"
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", found.group(0))).split())


def _readable(text: str) -> None:
    assert not UUID_PATTERN.search(text), UUID_PATTERN.search(text)
    assert not EPOCH_PATTERN.search(text), EPOCH_PATTERN.search(text)
    assert not re.search(r"[{}\[\]]|&quot;|\"\w+\":", text)


def _berlin_today() -> date:
    return datetime.now(BERLIN).date()


def _at(day: date, hour: int, minute: int = 0) -> int:
    return int(datetime.combine(day, time(hour, minute), BERLIN).timestamp())


def _day_words(day: date) -> str:
    return f"{day:%a} {day.day} {day:%b}"


def _availability(owner, *windows: tuple[int, int], until: int | None = None) -> VaultItem:
    return vault_item_create(
        owner=owner,
        content={
            "kind": "availability",
            "timezone": "UTC",  # imported elsewhere: the page still shows the owner's zone
            "until": until,
            "busy": [{"start": s, "end": e} for s, e in windows],
        },
    )


def test_the_empty_vault_says_what_it_is_and_where_to_start(alice, client) -> None:
    page = client.get("/vault/")
    text = _text(page)
    assert "encrypted and private to you" in text
    assert "unless a permission slip you sign for a room clears that item" in text
    assert "Nothing yet: add your budget first, it is what most rooms need." in text
    assert "No busy times yet." in text
    assert 'href="#form-budget"' in page.content.decode()
    _readable(text)


def test_the_week_shows_busy_times_in_the_owners_zone(alice, client) -> None:
    tomorrow = _berlin_today() + timedelta(days=1)
    late = tomorrow + timedelta(days=2)
    _availability(
        alice,
        (_at(tomorrow, 9), _at(tomorrow, 10, 30)),
        (_at(late, 22), _at(late + timedelta(days=1), 1)),  # over midnight
        until=_at(_berlin_today() + timedelta(days=30), 12),
    )
    page = client.get("/vault/")
    week = _week_text(page)
    assert f"{_day_words(tomorrow)} Busy 09:00 to 10:30" in week
    assert f"{_day_words(late)} Busy 22:00 to 24:00" in week
    assert f"{_day_words(late + timedelta(days=1))} Busy 00:00 to 01:00" in week
    assert f"{_day_words(_berlin_today())} Today Free all day" in week
    assert week.count("Free all day") == 4
    utc_hour = datetime.fromtimestamp(_at(tomorrow, 9), tz=ZoneInfo("UTC")).strftime("%H:%M")
    assert f"Busy {utc_hour}" not in week  # 08:00 or 07:00 in UTC: never shown
    text = _text(page)
    assert "Times in Europe/Berlin" in text
    _readable(text)


def test_weeks_page_forward_up_to_the_imported_horizon(alice, client) -> None:
    today = _berlin_today()
    _availability(
        alice,
        (_at(today + timedelta(days=9), 9), _at(today + timedelta(days=9), 10)),
        until=_at(today + timedelta(days=16), 12),
    )
    html = client.get("/vault/").content.decode()
    assert "Previous week" not in html  # the week starts today
    next_week = today + timedelta(days=7)
    assert f'href="?week={next_week.isoformat()}#week"' in html
    second = client.get(f"/vault/?week={next_week.isoformat()}")
    assert f"{_day_words(today + timedelta(days=9))} Busy 09:00 to 10:00" in _week_text(second)
    assert f'href="?week={today.isoformat()}#week"' in second.content.decode()
    # Past the last imported day the page stops there; before today it starts today.
    far = client.get(f"/vault/?week={(today + timedelta(days=200)).isoformat()}")
    days = re.findall(r'<time datetime="(\d{4}-\d\d-\d\d)">', far.content.decode())
    assert days[-1] == (today + timedelta(days=16)).isoformat() and len(days) == 7
    assert "Next week" not in far.content.decode()
    past = client.get("/vault/?week=2001-01-01")
    assert re.findall(r'<time datetime="(\d{4}-\d\d-\d\d)">', past.content.decode())[0] == (
        today.isoformat()
    )
    assert client.get("/vault/?week=soon").status_code == 200


def _ics_for(day: date) -> bytes:
    stamp = f"{day:%Y%m%d}"
    text = (
        "BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//test//EN\n"
        "BEGIN:VEVENT\nUID:gym@test\nSUMMARY:Gym (private)\n"
        f"DTSTART;TZID=Europe/Berlin:{stamp}T180000\nDTEND;TZID=Europe/Berlin:{stamp}T193000\n"
        "RRULE:FREQ=DAILY;COUNT=2\nEND:VEVENT\nEND:VCALENDAR\n"
    )
    return text.replace("\n", "\r\n").encode()


def test_a_calendar_is_imported_through_the_page_and_a_bad_one_changes_nothing(
    alice, client
) -> None:
    tomorrow = _berlin_today() + timedelta(days=1)
    upload = SimpleUploadedFile("me.ics", _ics_for(tomorrow), content_type="text/calendar")
    response = client.post("/vault/", {"action": "ics", "ics": upload})
    assert response.status_code == 302
    page = client.get(response["Location"])
    text = _text(page)
    assert "Calendar imported: 2 busy times in the next 90 days. Titles were not kept." in text
    assert f"{_day_words(tomorrow)} Busy 18:00 to 19:30" in _week_text(page)
    assert "Gym" not in text and "Gym" not in str(vault_of_owner(owner=alice))
    before = vault_of_owner(owner=alice)[0].content

    broken = SimpleUploadedFile(
        "me.ics", b"BEGIN:VCALENDAR\r\nnonsense", content_type="text/calendar"
    )
    refused = client.post("/vault/", {"action": "ics", "ics": broken}, follow=True)
    assert "not a calendar the importer can read" in _text(refused)
    assert "your busy times were not changed" in _text(refused)
    assert vault_of_owner(owner=alice)[0].content == before
    nothing = client.post("/vault/", {"action": "ics"}, follow=True)
    assert "Choose a calendar file (.ics) first" in _text(nothing)


def test_a_busy_time_is_added_by_form_in_local_time(alice, client) -> None:
    day = _berlin_today() + timedelta(days=2)
    response = client.post(
        "/vault/",
        {"action": "busy", "busy-start": f"{day}T12:30", "busy-end": f"{day}T14:00"},
    )
    assert response.status_code == 302
    [item] = vault_of_owner(owner=alice)
    assert item.content["busy"] == [{"start": _at(day, 12, 30), "end": _at(day, 14)}]
    assert f"{_day_words(day)} Busy 12:30 to 14:00" in _week_text(client.get("/vault/"))
    backwards = client.post(
        "/vault/",
        {"action": "busy", "busy-start": f"{day}T15:00", "busy-end": f"{day}T14:00"},
    )
    assert backwards.status_code == 400
    assert "The busy time must end after it starts; check the end time." in _text(backwards)
    empty = client.post("/vault/", {"action": "busy", "busy-start": "", "busy-end": "soon"})
    assert "Enter when the busy time starts (a date and a time)." in _text(empty)
    assert "Enter the end as a date and a time, such as 2030-03-25 10:30." in _text(empty)
    assert len(vault_of_owner(owner=alice)[0].content["busy"]) == 1


def test_busy_times_can_be_cleared_after_a_confirmation(alice, client) -> None:
    item = _availability(alice, (_at(_berlin_today(), 20), _at(_berlin_today(), 21)))
    html = client.get("/vault/").content.decode()
    confirm = re.search(r"<details class=\"vault-confirm\">.*?</details>", html, flags=re.S)
    assert confirm is not None
    assert "Delete all your busy times?" in confirm.group(0)
    assert f'name="delete" value="{item.id}"' in confirm.group(0)
    response = client.post("/vault/", {"delete": str(item.id)})
    assert response.status_code == 302
    assert vault_of_owner(owner=alice) == []
    after = _text(client.get("/vault/"))
    assert "Your busy times were deleted. No slip can share it any more." in after
    gone = client.post("/vault/", {"delete": str(item.id)}, follow=True)
    assert "That item is no longer in your vault; nothing was deleted." in _text(gone)


# Each kind: what the form posts to add it, to change it, and what the list then says.
KINDS = [
    (
        "budget",
        {"budget-currency": "EUR", "budget-minimum": "30", "budget-maximum": "80"},
        {"budget-currency": "EUR", "budget-minimum": "25", "budget-maximum": "45"},
        "Budget: 25 to 45 EUR per person",
    ),
    (
        "food_likes",
        {"food_likes-items": "ramen"},
        {"food_likes-items": "dumplings, tapas"},
        "Food you like: dumplings, tapas",
    ),
    (
        "food_dislikes",
        {"food_dislikes-items": "offal"},
        {"food_dislikes-items": "anchovies"},
        "Food you would rather not eat: anchovies",
    ),
    (
        "allergies",
        {"allergies-items": ["sesame"]},
        {"allergies-items": ["peanuts", "sesame"]},
        "Allergies: peanuts, sesame",
    ),
    (
        "neighbourhood",
        {"neighbourhood-name": "Mitte"},
        {"neighbourhood-name": "Wedding"},
        "Home neighbourhood: Wedding",
    ),
    (
        "link",
        {"link-url": "https://example.org/a", "link-label": "Menu"},
        {"link-url": "https://example.org/b", "link-label": "Map"},
        "Link: Map: https://example.org/b",
    ),
    (
        "note",
        {"note-text": "Window seat"},
        {"note-text": "Quiet table please"},
        "Note: Quiet table please",
    ),
]


@pytest.mark.parametrize(("kind", "first", "second", "listed"), KINDS, ids=[k[0] for k in KINDS])
def test_every_kind_is_added_changed_and_deleted_from_the_page(
    alice, client, kind, first, second, listed
) -> None:
    assert client.post("/vault/", {"kind": kind, **first}).status_code == 302
    [item] = vault_of_owner(owner=alice)
    page = client.get("/vault/").content.decode()
    change = re.search(rf'href="\?edit={item.id}#form-{kind}"', page)
    assert change is not None, "no Change link"
    # The Change link opens the form filled with the saved item.
    opened = client.get(f"/vault/?edit={item.id}").content.decode()
    form = re.search(
        rf'<section class="card vault-form" id="form-{kind}".*?</section>', opened, re.S
    )
    assert form is not None and f'name="item" value="{item.id}"' in form.group(0)
    assert "(change what is saved)" in form.group(0)
    changed = client.post("/vault/", {"kind": kind, "item": str(item.id), **second})
    assert changed.status_code == 302
    [kept] = vault_of_owner(owner=alice)
    assert kept.id == item.id  # changed in place, not a second item
    after = client.get("/vault/")
    assert listed in _text(after)
    assert re.search(r"saved\.", _text(after))
    _readable(re.sub(r"https://\S+", "", _text(after)))
    assert client.post("/vault/", {"delete": str(item.id)}).status_code == 302
    assert vault_of_owner(owner=alice) == []
    assert "deleted. No slip can share it any more." in _text(client.get("/vault/"))


def test_a_refused_change_says_what_to_do_and_keeps_the_saved_item(alice, client) -> None:
    client.post(
        "/vault/",
        {
            "kind": "budget",
            "budget-currency": "EUR",
            "budget-minimum": "30",
            "budget-maximum": "80",
        },
    )
    [item] = vault_of_owner(owner=alice)
    refused = client.post(
        "/vault/",
        {
            "kind": "budget",
            "item": str(item.id),
            "budget-currency": "EUR",
            "budget-minimum": "30",
            "budget-maximum": "eighty",
        },
    )
    assert refused.status_code == 400
    assert "Enter the highest amount as a whole number, such as 30" in _text(refused)
    assert vault_of_owner(owner=alice)[0].content["maximum"] == 8000
    assert "30 to 80 EUR per person" in _text(client.get("/vault/"))


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_an_ics_imported_in_the_browser_shows_in_the_week_on_a_phone(
    make_owner, live_daphne, browser_page, tmp_path
) -> None:
    from tests.frontend.browser import (
        PHONE,
        axe_check,
        screenshots,
        visible_text_has_no_codes,
        watch,
    )

    page, base = browser_page, live_daphne
    owner = make_owner("alice")
    NotificationPreference.objects.update_or_create(
        owner=owner, defaults={"time_zone": "Europe/Berlin"}
    )
    watcher = watch(page)
    page.set_viewport_size(PHONE)
    page.goto(f"{base}/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "correct horse 42")
    page.click("main button[type=submit]")
    page.wait_for_url(f"{base}/")
    page.goto(f"{base}/vault/")
    assert "No busy times yet." in page.inner_text("#week")

    tomorrow = _berlin_today() + timedelta(days=1)
    calendar = tmp_path / "calendar.ics"
    calendar.write_bytes(_ics_for(tomorrow))
    page.set_input_files("#vault-ics", str(calendar))
    page.click("text=Import busy times")
    page.wait_for_selector("text=Calendar imported: 2 busy times")
    day = page.locator(".week-day", has_text=_day_words(tomorrow))
    assert "Busy 18:00 to 19:30" in day.inner_text()
    assert "Times in Europe/Berlin" in page.inner_text("#week")
    assert page.locator(".week-day.free").count() == 5

    scroll, inner = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert inner == 390 and scroll <= inner, f"{scroll} px wide in a {inner} px screen"
    # The per-day list on a phone: the days are one under another.
    tops = page.eval_on_selector_all(".week-day", "els => els.map(e => e.offsetTop)")
    assert tops == sorted(tops) and len(set(tops)) == 7
    # The delete step asks in words before anything goes.
    screenshots(page, "vault week")
    page.set_viewport_size(PHONE)
    page.click(".vault-confirm summary")
    assert "Delete all your busy times?" in page.inner_text(".vault-confirm")
    watcher.check_csp()
    axe_check(page, name="vault")
    visible_text_has_no_codes(page, name="vault")
    page.click("text=Yes, delete busy times")
    page.wait_for_selector("text=Your busy times were deleted.")
    assert "No busy times yet." in page.inner_text("#week")

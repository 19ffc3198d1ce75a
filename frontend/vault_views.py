"""The owner's vault page: what is stored in words, one form per kind, a week of busy times in
the owner's time zone, the .ics import and busy times added by hand.

The forms post here and call ``slips.vault``; nothing about who may see an item lives here.
Times are shown in Django's current time zone (the owner's, activated per request), never in
the zone an item was imported in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from typing import Any
from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.files.uploadedfile import UploadedFile
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone

import dining
from frontend.forms import VAULT_FORMS, BusyBlockForm, VaultItemForm
from gatekeeper.owner_limits import OwnerLimitReached
from slips import money, selectors, vault
from slips.errors import SlipError
from synapsia.owners import OwnerRequest


def _when(stamp: int, zone: tzinfo) -> str:
    moment = datetime.fromtimestamp(stamp, tz=zone)
    return f"{moment:%a} {moment.day} {moment:%b %Y, %H:%M}"


def _availability_words(content: dict[str, Any]) -> str:
    zone = timezone.get_current_timezone()
    busy = content.get("busy", [])
    if not busy:
        return "No busy times"
    first = min(w["start"] for w in busy)
    last = max(w["end"] for w in busy)
    count = f"{len(busy)} busy time" + ("" if len(busy) == 1 else "s")
    return f"{count} from {_when(first, zone)} to {_when(last, zone)} ({_zone_name(zone)})"


def _zone_name(zone: tzinfo) -> str:
    return getattr(zone, "key", None) or timezone.get_current_timezone_name()


def _budget_words(content: dict[str, Any]) -> str:
    currency = content["currency"]
    low = money.minor_in_words(content["minimum"], currency)
    high = money.minor_in_words(content["maximum"], currency)
    words = f"{low} to {high} {currency} per person"
    return words + (" (with a private note)" if content.get("notes") else "")


def _list_words(content: dict[str, Any]) -> str:
    return ", ".join(content["items"])


def _allergies_words(content: dict[str, Any]) -> str:
    items = [i.replace("-", " ") for i in content["items"]]
    return ", ".join(items) if items else "None"


def _link_words(content: dict[str, Any]) -> str:
    label = content.get("label")
    return f"{label}: {content['url']}" if label else str(content["url"])


def _note_words(content: dict[str, Any]) -> str:
    text = " ".join(str(content["text"]).split())
    return text if len(text) <= 120 else text[:119] + "…"


# What each kind is called on the page, and its content in words (never raw JSON).
_KIND_WORDS: dict[str, tuple[str, Callable[[dict[str, Any]], str]]] = {
    "availability": ("Busy times", _availability_words),
    "budget": ("Budget", _budget_words),
    "food_likes": ("Food you like", _list_words),
    "food_dislikes": ("Food you would rather not eat", _list_words),
    "allergies": ("Allergies", _allergies_words),
    "neighbourhood": ("Home neighbourhood", lambda c: str(c["name"])),
    "link": ("Link", _link_words),
    "note": ("Note", _note_words),
}


def _cities_and_cuisines() -> tuple[list[tuple[str, list[tuple[str, str]]]], tuple[str, ...]]:
    """The registered cities' neighbourhoods (for the choice) and the venues' cuisines (as a
    hint); empty when a catalogue cannot be read (the vault then says so on saving)."""
    try:
        catalogues = dining.catalogues_registered()
    except dining.CatalogueInvalid:
        return [], ()
    cities: dict[str, tuple[str, list[tuple[str, str]]]] = {}
    for catalogue in catalogues:
        places = [(n.name, n.name) for n in catalogue.city.neighbourhoods]
        cities.setdefault(catalogue.city.id, (catalogue.city.name, places))
    cuisines = sorted({c for catalogue in catalogues for c in catalogue.cuisines})
    return list(cities.values()), tuple(cuisines)


def _vault_form(
    kind: str, *, data: Any = None, initial: dict[str, Any] | None = None
) -> VaultItemForm:
    form_class = VAULT_FORMS[kind]
    extra: dict[str, Any] = {}
    if kind in ("food_likes", "food_dislikes", "neighbourhood"):
        cities, cuisines = _cities_and_cuisines()
        extra = {"cities": cities} if kind == "neighbourhood" else {"cuisines": cuisines}
    return form_class(data, initial=initial, prefix=kind, **extra)


# --- the week of busy times ------------------------------------------------------------------

WEEK_DAYS = 7


@dataclass(frozen=True)
class BusyBlock:
    """One busy time on one local day, as the page says it ("09:00 to 10:30")."""

    starts: str  # "09:00"
    ends: str  # "10:30", or "24:00" when it runs past midnight
    starts_iso: str  # for <time datetime="...">
    ends_iso: str
    all_day: bool


@dataclass(frozen=True)
class WeekDay:
    heading: str  # "Mon 25 Mar"
    iso: str
    is_today: bool
    known: bool  # inside what the last import covered
    blocks: list[BusyBlock]


@dataclass(frozen=True)
class Week:
    days: list[WeekDay]
    title: str  # "Mon 25 Mar to Sun 31 Mar 2030"
    zone: str
    previous: str  # "?week=2030-03-18" or ""
    next: str
    until_words: str  # "Busy times imported up to Tue 18 Jun 2030."


def _day_words(day: date) -> str:
    return f"{day:%a} {day.day} {day:%b}"


def _week_of(content: dict[str, Any], *, wanted: str, zone: tzinfo) -> Week:
    """Seven local days from ``wanted`` (an ISO date from ``?week=``, else today), kept between
    today and the last day the stored busy times reach."""
    windows = vault.Availability.model_validate(content).busy
    today = timezone.localdate()
    until = content.get("until")
    reach = [w.end for w in windows] + ([until] if until else [])
    last_day = (
        max(today, datetime.fromtimestamp(max(reach) - 1, tz=zone).date()) if reach else today
    )
    try:
        first = date.fromisoformat(wanted) if wanted else today
    except ValueError:
        first = today
    first = min(max(first, today), max(today, last_day - timedelta(days=WEEK_DAYS - 1)))
    known_until = datetime.fromtimestamp(until, tz=zone) if until else None
    days = []
    for day, blocks in vault.busy_by_day(windows, first=first, days=WEEK_DAYS, zone=zone):
        next_midnight = datetime.combine(day + timedelta(days=1), datetime.min.time(), zone)
        shown = [
            BusyBlock(
                starts=f"{s:%H:%M}",
                ends="24:00" if e >= next_midnight else f"{e:%H:%M}",
                starts_iso=s.isoformat(),
                ends_iso=e.isoformat(),
                all_day=s.time() == datetime.min.time() and e >= next_midnight,
            )
            for s, e in blocks
        ]
        known = known_until is None or day <= known_until.date()
        days.append(WeekDay(_day_words(day), day.isoformat(), day == today, known, shown))
    last = first + timedelta(days=WEEK_DAYS - 1)
    return Week(
        days=days,
        title=f"{_day_words(first)} to {_day_words(last)} {last:%Y}",
        zone=_zone_name(zone),
        previous=f"?week={max(today, first - timedelta(days=WEEK_DAYS))}" if first > today else "",
        next=f"?week={last + timedelta(days=1)}" if last < last_day else "",
        until_words=(f"Busy times imported up to {_when(until, zone)}." if until else ""),
    )


def _vault_render(
    request: OwnerRequest,
    *,
    bound: VaultItemForm | None = None,
    bound_item: str = "",
    busy_form: BusyBlockForm | None = None,
) -> HttpResponse:
    stored = selectors.vault_of_owner(owner=request.user)
    items = [
        {
            "id": i.id,
            "kind": i.kind,
            "label": _KIND_WORDS[i.kind][0],
            "words": _KIND_WORDS[i.kind][1](i.content),
            "editable": i.kind in VAULT_FORMS,
            "anchor": f"form-{i.kind}",
        }
        for i in stored
    ]
    editing = request.GET.get("edit", "")
    forms = []
    for kind, form_class in VAULT_FORMS.items():
        if bound is not None and bound.kind == kind:
            forms.append(
                {"form": bound, "item": bound_item, "kind": kind, "several": kind not in _ONE_EACH}
            )
            continue
        # Kinds an owner has one of (a budget, a neighbourhood…) open their stored item to
        # edit; links and notes add a new one unless the owner chose one to edit.
        target = next((i for i in stored if str(i.id) == editing and i.kind == kind), None)
        if target is None and kind in _ONE_EACH:
            target = next((i for i in stored if i.kind == kind), None)
        initial = form_class.initial_of(target.content) if target is not None else None
        forms.append(
            {
                "form": _vault_form(kind, initial=initial),
                "item": str(target.id) if target is not None else "",
                "kind": kind,
                "several": kind not in _ONE_EACH,
            }
        )
    zone = timezone.get_current_timezone()
    availability = next((i for i in stored if i.kind == "availability"), None)
    week = (
        _week_of(availability.content, wanted=request.GET.get("week", ""), zone=zone)
        if availability is not None
        else None
    )
    failed = bound is not None or (busy_form is not None and busy_form.errors)
    return render(
        request,
        "frontend/vault.html",
        {
            "items": items,
            "forms": forms,
            "week": week,
            "availability": availability,
            "zone_name": _zone_name(zone),
            "busy_form": busy_form or BusyBlockForm(prefix="busy"),
            "horizon_days": vault.ICS_HORIZON_DAYS,
        },
        status=400 if failed else 200,
    )


# One item each: saving the form changes the stored one rather than adding a second.
_ONE_EACH = frozenset({"budget", "food_likes", "food_dislikes", "allergies", "neighbourhood"})


def _vault_save(request: OwnerRequest) -> HttpResponse:
    kind = request.POST.get("kind", "")
    if kind not in VAULT_FORMS:
        messages.error(request, "That form is not one of the vault's.")
        return redirect("vault")
    form = _vault_form(kind, data=request.POST)
    item_text = request.POST.get("item", "")
    if form.is_valid():
        try:
            if item_text:
                vault.vault_item_update(
                    owner=request.user, item_id=UUID(item_text), content=form.content()
                )
            else:
                vault.vault_item_create(owner=request.user, content=form.content())
        except (SlipError, ValueError, OwnerLimitReached) as exc:
            # The vault's own checks (allergens, neighbourhoods, limits), in its words;
            # nothing was written.
            form.add_error(None, getattr(exc, "message", "That item is not valid."))
        else:
            messages.success(request, f"{form.title} saved.")
            return redirect("vault")
    return _vault_render(request, bound=form, bound_item=item_text)


def _vault_delete(request: OwnerRequest) -> HttpResponse:
    try:
        item_id = UUID(request.POST["delete"])
    except ValueError:
        item_id = None
    stored = selectors.vault_of_owner(owner=request.user)
    item = next((i for i in stored if i.id == item_id), None)
    if item is None:
        messages.error(request, "That item is no longer in your vault; nothing was deleted.")
        return redirect("vault")
    vault.vault_item_delete(owner=request.user, item_id=item.id)
    what = (
        "Your busy times were"
        if item.kind == "availability"
        else f"{_KIND_WORDS[item.kind][0]} was"
    )
    messages.success(request, f"{what} deleted. No slip can share it any more.")
    return redirect("vault")


def _vault_import(request: OwnerRequest) -> HttpResponse:
    upload = request.FILES.get("ics")
    if not isinstance(upload, UploadedFile):
        messages.error(request, "Choose a calendar file (.ics) first, then import it.")
        return redirect("vault")
    if (upload.size or 0) > vault.MAX_ICS_BYTES:
        messages.error(
            request,
            "Calendar files are limited to 1 MB; export a shorter date range and try again. "
            "Your busy times were not changed.",
        )
        return redirect("vault")
    try:
        item = vault.vault_import_ics(
            owner=request.user,
            ics=upload.read(),
            now=timezone.now(),
            zone=timezone.get_current_timezone(),
        )
    except (SlipError, OwnerLimitReached) as exc:
        messages.error(request, exc.message)
        return redirect("vault")
    opened = vault.vault_open(item)
    count = len(opened.busy) if isinstance(opened, vault.Availability) else 0
    times = "1 busy time" if count == 1 else f"{count} busy times"
    messages.success(
        request,
        f"Calendar imported: {times} in the next {vault.ICS_HORIZON_DAYS} days. "
        "Titles were not kept.",
    )
    return redirect("vault")


def _vault_busy(request: OwnerRequest) -> HttpResponse:
    form = BusyBlockForm(request.POST, prefix="busy")
    if form.is_valid():
        try:
            vault.vault_busy_add(
                owner=request.user,
                start=form.cleaned_data["start"],
                end=form.cleaned_data["end"],
            )
        except (SlipError, OwnerLimitReached) as exc:
            form.add_error(None, exc.message)
        else:
            start = timezone.localtime(form.cleaned_data["start"])
            messages.success(request, f"Busy time added on {_day_words(start.date())}.")
            return redirect(f"{request.path}?week={start.date().isoformat()}#week")
    return _vault_render(request, busy_form=form)


@login_required
def vault_page(request: OwnerRequest) -> HttpResponse:
    if request.method != "POST":
        return _vault_render(request)
    action = request.POST.get("action", "")
    if "delete" in request.POST:
        return _vault_delete(request)
    if action == "ics" or "ics" in request.FILES:
        return _vault_import(request)
    if action == "busy":
        return _vault_busy(request)
    return _vault_save(request)

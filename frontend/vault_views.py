"""The owner's vault page: what is stored in words, one form per kind, and the .ics import.

The forms post here and call ``slips.vault``; nothing about who may see an item lives here.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.files.uploadedfile import UploadedFile
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone

import dining
from frontend.forms import VAULT_FORMS, VaultItemForm
from slips import money, selectors, vault
from slips.errors import SlipError
from synapsia.owners import OwnerRequest


def _when(stamp: int, zone: ZoneInfo) -> str:
    moment = datetime.fromtimestamp(stamp, tz=zone)
    return f"{moment:%a} {moment.day} {moment:%b %Y, %H:%M}"


def _availability_words(content: dict[str, Any]) -> str:
    try:
        zone = ZoneInfo(content.get("timezone") or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        zone = ZoneInfo("UTC")
    busy = content.get("busy", [])
    if not busy:
        return "No busy times"
    first = min(w["start"] for w in busy)
    last = max(w["end"] for w in busy)
    count = f"{len(busy)} busy time" + ("" if len(busy) == 1 else "s")
    return f"{count} from {_when(first, zone)} to {_when(last, zone)} ({zone.key})"


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


def _vault_render(
    request: OwnerRequest, *, bound: VaultItemForm | None = None, bound_item: str = ""
) -> HttpResponse:
    stored = selectors.vault_of_owner(owner=request.user)
    items = [
        {
            "id": i.id,
            "kind": i.kind,
            "label": _KIND_WORDS[i.kind][0],
            "words": _KIND_WORDS[i.kind][1](i.content),
            "editable": i.kind in VAULT_FORMS,
        }
        for i in stored
    ]
    editing = request.GET.get("edit", "")
    forms = []
    for kind, form_class in VAULT_FORMS.items():
        if bound is not None and bound.kind == kind:
            forms.append({"form": bound, "item": bound_item, "kind": kind})
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
            }
        )
    return render(
        request,
        "frontend/vault.html",
        {"items": items, "forms": forms},
        status=400 if bound is not None else 200,
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
        except (SlipError, ValueError) as exc:
            # The vault's own checks (allergens, neighbourhoods, limits), in its words;
            # nothing was written.
            form.add_error(None, getattr(exc, "message", "That item is not valid."))
        else:
            messages.success(request, f"{form.title} saved.")
            return redirect("vault")
    return _vault_render(request, bound=form, bound_item=item_text)


@login_required
def vault_page(request: OwnerRequest) -> HttpResponse:
    if request.method != "POST":
        return _vault_render(request)
    if "ics" in request.FILES or "delete" in request.POST:
        try:
            if "delete" in request.POST:
                vault.vault_item_delete(owner=request.user, item_id=UUID(request.POST["delete"]))
                messages.success(request, "Deleted.")
            else:
                upload = request.FILES["ics"]
                assert isinstance(upload, UploadedFile)
                if (upload.size or 0) > vault.MAX_ICS_BYTES:
                    messages.error(request, "Calendar files are limited to 1 MB.")
                else:
                    vault.vault_import_ics(
                        owner=request.user, ics=upload.read(), now=timezone.now()
                    )
                    messages.success(request, "Busy times imported.")
        except (SlipError, ValueError) as exc:
            messages.error(request, getattr(exc, "message", "That request is not valid."))
        return redirect("vault")
    return _vault_save(request)

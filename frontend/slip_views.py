"""Owner pages for device keys, the vault and a room's permission slip.

Keys and slips are made and signed in the browser (``devicekeys.js``, ``slip.js``) through the
REST API; these views only render. The vault form posts here and calls ``slips.vault``.
"""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.files.uploadedfile import UploadedFile
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone

from rooms import selectors as room_selectors
from rooms.errors import RoomError
from slips import selectors, vault
from slips.errors import SlipError
from synapsia.owners import OwnerRequest


@login_required
def keys(request: OwnerRequest) -> HttpResponse:
    return render(request, "frontend/keys.html")


def _vault_content(post: Any) -> dict[str, Any]:
    """The item the vault form describes (validated by ``slips.vault``'s schemas)."""
    kind, text = post.get("kind", ""), post.get("text", "").strip()
    if kind == "budget":
        try:
            minimum, maximum = int(post.get("minimum", "")), int(post.get("maximum", ""))
        except ValueError:
            minimum = maximum = -1  # refused by the schema with a clear message
        return {
            "kind": kind,
            "currency": post.get("currency", "").strip().upper(),
            "minimum": minimum,
            "maximum": maximum,
        }
    if kind in ("food_likes", "allergies"):
        return {"kind": kind, "items": [i.strip() for i in text.split(",") if i.strip()]}
    if kind == "neighbourhood":
        return {"kind": kind, "name": text}
    if kind == "link":
        return {"kind": kind, "url": text}
    return {"kind": kind, "text": text}


@login_required
def vault_page(request: OwnerRequest) -> HttpResponse:
    if request.method == "POST":
        try:
            if "delete" in request.POST:
                vault.vault_item_delete(owner=request.user, item_id=UUID(request.POST["delete"]))
            elif "ics" in request.FILES:
                upload = request.FILES["ics"]
                assert isinstance(upload, UploadedFile)
                if (upload.size or 0) > vault.MAX_ICS_BYTES:
                    messages.error(request, "Calendar files are limited to 1 MB.")
                else:
                    vault.vault_import_ics(
                        owner=request.user, ics=upload.read(), now=timezone.now()
                    )
                    messages.success(request, "Busy times imported.")
            else:
                vault.vault_item_create(owner=request.user, content=_vault_content(request.POST))
                messages.success(request, "Saved.")
        except (SlipError, ValueError) as exc:
            messages.error(request, getattr(exc, "message", "That request is not valid."))
        return redirect("vault")
    items = [
        {"id": i.id, "kind": i.kind, "summary": json.dumps(i.content, ensure_ascii=False)[:200]}
        for i in selectors.vault_of_owner(owner=request.user)
    ]
    return render(request, "frontend/vault.html", {"items": items})


@login_required
def slip(request: OwnerRequest, room_id: UUID) -> HttpResponse:
    try:
        seat = room_selectors.room_seat(owner=request.user, room_id=room_id)
    except RoomError:
        return render(request, "frontend/not_found.html", status=404)
    return render(request, "frontend/slip.html", {"room": seat.room, "seat": seat})

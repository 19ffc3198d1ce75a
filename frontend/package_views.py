"""The Portable Project Package download (artifacts.package): a POST from the room page with
the owner's session. Anyone without a seat in the room, staff and superusers included, gets
the same 404 page as for a room that does not exist."""

from __future__ import annotations

from uuid import UUID

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from artifacts.package import project_package_build
from rooms.errors import RoomError
from synapsia.owners import OwnerRequest


@login_required
@require_POST
def room_package(request: OwnerRequest, room_id: UUID) -> HttpResponse:
    try:
        package = project_package_build(owner=request.user, room_id=room_id)
    except RoomError:
        return render(request, "frontend/not_found.html", status=404)
    response = HttpResponse(package.content, content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{package.filename}"'
    # A private file: no shared cache keeps it.
    response["Cache-Control"] = "private, no-store"
    return response

"""The REST API (django-ninja). OpenAPI document: ``/api/openapi.json``; docs: ``/api/docs``."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI, Schema
from ninja.security import django_auth

from gatekeeper.api import router as gatekeeper_router
from gatekeeper.errors import GatekeeperError
from ledger.api import router as ledger_router
from rooms.api import router as rooms_router
from rooms.errors import RoomError
from rooms.ledger_api import router as rooms_ledger_router
from rooms.slip_api import router as room_slips_router
from slips.api import router as slips_router

api = NinjaAPI(
    title="Synapsia",
    version="1",
    description="Owners' API: agents, rooms, invites and transcripts. Session auth with CSRF.",
    urls_namespace="api",
)


class ErrorOut(Schema):
    code: str
    message: str


class MeOut(Schema):
    username: str


@api.exception_handler(RoomError)
def room_error(request: HttpRequest, exc: RoomError) -> HttpResponse:
    return api.create_response(
        request, ErrorOut(code=exc.code, message=exc.message), status=exc.status
    )


@api.exception_handler(GatekeeperError)
def gatekeeper_error(request: HttpRequest, exc: GatekeeperError) -> HttpResponse:
    return api.create_response(
        request, ErrorOut(code=exc.code, message=exc.message), status=exc.status
    )


@api.get("/auth/me", response=MeOut, auth=django_auth, tags=["auth"])
def me(request: HttpRequest) -> MeOut:
    return MeOut(username=request.user.get_username())


api.add_router("/", rooms_router)
api.add_router("/ledger", ledger_router)
api.add_router("/", rooms_ledger_router)
api.add_router("/", slips_router)
api.add_router("/", room_slips_router)
api.add_router("/", gatekeeper_router)

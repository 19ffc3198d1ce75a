"""The REST API (django-ninja). OpenAPI document: ``/api/openapi.json``; docs: ``/api/docs``.

Every operation is rate limited (``SYNAPSIA["API_RATE_OWNER"]`` per signed-in owner,
``SYNAPSIA["API_RATE_ANONYMOUS"]`` per address without a session): past the rate the answer is
429 ``{"code": "rate_limited", "message": ...}`` with ``Retry-After`` in seconds.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any
from uuid import UUID

import redis.exceptions
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI, Schema
from ninja.errors import Throttled
from ninja.openapi.schema import OpenAPISchema
from ninja.security import django_auth
from ninja.throttling import SimpleRateThrottle

from gatekeeper.add_keys import AddKeyRefused, AlreadyAdded
from gatekeeper.api import router as gatekeeper_router
from gatekeeper.errors import GatekeeperError
from gatekeeper.owner_limits import OwnerLimitReached
from ledger.api import router as ledger_router
from rooms.api import router as rooms_router
from rooms.errors import RoomError
from rooms.ledger_api import router as rooms_ledger_router
from rooms.slip_api import router as room_slips_router
from slips.api import router as slips_router


class _SettingsRateThrottle(SimpleRateThrottle):
    """A sliding-window rate read from ``settings.SYNAPSIA[setting]`` on every request (so a
    changed setting applies at once), with the wait kept per thread: ninja shares one throttle
    object between concurrent requests, and its own keeps per-request state on the object."""

    setting = ""

    def __init__(self) -> None:
        self._waits = threading.local()
        super().__init__(rate=self._current_rate())

    def _current_rate(self) -> str:
        return str(settings.SYNAPSIA[self.setting])

    def allow_request(self, request: HttpRequest) -> bool:
        self._waits.seconds = None
        key = self.get_cache_key(request)
        if key is None:
            return True
        count, duration = self.parse_rate(self._current_rate())
        assert count is not None and duration is not None
        now = time.time()
        try:
            history = [t for t in self.cache.get(key, []) if t > now - duration]
            if len(history) >= count:
                self._waits.seconds = max(1.0, duration - (now - history[-1]))
                return False
            self.cache.set(key, [now, *history], duration)
        except THROTTLE_STORE_ERRORS:
            # The counters are in Redis, which holds nothing that must hold: without it the
            # API answers unthrottled rather than not at all (logins are counted in the database).
            logger.warning("API rate not counted: the cache is unreachable", exc_info=True)
        return True

    def wait(self) -> float | None:
        return getattr(self._waits, "seconds", None)


class OwnerRateThrottle(_SettingsRateThrottle):
    """Per signed-in owner, whatever address they come from."""

    scope = "owner"
    setting = "API_RATE_OWNER"

    def get_cache_key(self, request: HttpRequest) -> str | None:
        owner = getattr(request, "auth", None)
        if owner is None:
            return None
        return f"throttle_{self.scope}_{getattr(owner, 'pk', owner)}"


class AddressRateThrottle(_SettingsRateThrottle):
    """Per client address, for operations answered without a session."""

    scope = "anonymous"
    setting = "API_RATE_ANONYMOUS"

    def get_cache_key(self, request: HttpRequest) -> str | None:
        if getattr(request, "auth", None) is not None:
            return None
        return f"throttle_{self.scope}_{self.get_ident(request)}"


logger = logging.getLogger(__name__)
# What a cache backend raises when its store is unreachable (Redis in production).
THROTTLE_STORE_ERRORS = (redis.exceptions.RedisError, OSError)

_UNSAFE_METHODS = frozenset({"post", "put", "patch", "delete"})
_ERROR_REF = {"$ref": "#/components/schemas/ErrorOut"}
_DETAIL_REF = {"$ref": "#/components/schemas/DetailOut"}
_ERROR_SCHEMAS: dict[str, Any] = {
    # Every refusal from a service: a stable code and a sentence for people.
    "ErrorOut": {
        "title": "ErrorOut",
        "type": "object",
        "properties": {
            "code": {"title": "Code", "type": "string"},
            "message": {"title": "Message", "type": "string"},
            # 409 ``<what>_already_added``: an add sent again (gatekeeper.add_keys).
            "id": {"title": "Id", "type": "string", "format": "uuid"},
        },
        "required": ["code", "message"],
    },
    # django-ninja's own answers: not signed in, CSRF, unreadable body, unknown route, and
    # request validation (``detail`` is then the list of what did not validate).
    "DetailOut": {
        "title": "DetailOut",
        "type": "object",
        "properties": {"detail": {"anyOf": [{"type": "string"}, {"type": "array", "items": {}}]}},
        "required": ["detail"],
    },
}


def _error_response(description: str, *refs: dict[str, str]) -> dict[str, Any]:
    schema = refs[0] if len(refs) == 1 else {"anyOf": list(refs)}
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _document_errors(schema: dict[str, Any]) -> None:
    """Add the error answers every operation can give to its documented responses, so that
    clients (and the fuzzing test) know each status code and body shape."""
    schema.setdefault("components", {}).setdefault("schemas", {}).update(_ERROR_SCHEMAS)
    for operations in schema.get("paths", {}).values():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            errors = {
                "400": _error_response("Unreadable or refused request", _ERROR_REF, _DETAIL_REF),
                "404": _error_response("No such thing, or not yours", _ERROR_REF, _DETAIL_REF),
                "409": _error_response("Refused in the current state", _ERROR_REF),
                "410": _error_response("No longer usable", _ERROR_REF),
                "422": _error_response("Invalid input", _ERROR_REF, _DETAIL_REF),
                "429": _error_response("Rate limited (Retry-After says when)", _ERROR_REF),
                "503": _error_response("Temporarily unavailable", _ERROR_REF),
            }
            if operation.get("security"):
                errors["401"] = _error_response("Not signed in", _DETAIL_REF)
                if method in _UNSAFE_METHODS:
                    errors["403"] = _error_response("CSRF check failed", _DETAIL_REF)
            for status, response in errors.items():
                responses.setdefault(status, response)


class SynapsiaAPI(NinjaAPI):
    """The project's API: django-ninja with every error answer in the OpenAPI document."""

    def get_openapi_schema(
        self, *, path_prefix: str | None = None, path_params: dict[str, Any] | None = None
    ) -> OpenAPISchema:
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        _document_errors(schema)
        return schema


api = SynapsiaAPI(
    title="Synapsia",
    version="1",
    description="Owners' API: agents, rooms, invites and transcripts. Session auth with CSRF.",
    urls_namespace="api",
    throttle=[OwnerRateThrottle(), AddressRateThrottle()],
)


class ErrorOut(Schema):
    code: str
    message: str


class MeOut(Schema):
    username: str


class AlreadyAddedOut(ErrorOut):
    id: UUID  # what the add made the first time


_CODED_ERRORS = (RoomError, GatekeeperError, OwnerLimitReached, AddKeyRefused)


def coded_error(request: HttpRequest, exc: Exception | type[Exception]) -> HttpResponse:
    """An error that carries its own code, words and status: its ``ErrorOut``."""
    assert isinstance(exc, _CODED_ERRORS)  # registered for these alone, below
    return api.create_response(
        request, ErrorOut(code=exc.code, message=exc.message), status=exc.status
    )


for _coded in _CODED_ERRORS:
    api.add_exception_handler(_coded, coded_error)


@api.exception_handler(AlreadyAdded)
def already_added(request: HttpRequest, exc: AlreadyAdded) -> HttpResponse:
    said = ErrorOut(code=exc.code, message=exc.message)
    if exc.made_id is not None:
        said = AlreadyAddedOut(code=exc.code, message=exc.message, id=exc.made_id)
    return api.create_response(request, said, status=exc.status)


@api.exception_handler(Throttled)
def rate_limited(request: HttpRequest, exc: Throttled) -> HttpResponse:
    # ninja adds Retry-After (whole seconds) to this response.
    seconds = max(1, math.ceil(exc.wait)) if exc.wait else None
    when = f"in {seconds} second{'s' if seconds != 1 else ''}" if seconds else "later"
    message = f"Too many requests: try again {when}."
    return api.create_response(request, ErrorOut(code="rate_limited", message=message), status=429)


@api.get("/auth/me", response=MeOut, auth=django_auth, tags=["auth"])
def me(request: HttpRequest) -> MeOut:
    return MeOut(username=request.user.get_username())


api.add_router("/", rooms_router)
api.add_router("/ledger", ledger_router)
api.add_router("/", rooms_ledger_router)
api.add_router("/", slips_router)
api.add_router("/", room_slips_router)
api.add_router("/", gatekeeper_router)

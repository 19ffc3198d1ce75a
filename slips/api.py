"""REST API for an owner's device keys and vault (session auth, CSRF).

Thin: every endpoint calls one service or selector. ``SlipError``s become
``{"code": ..., "message": ...}`` with the error's HTTP status, and change nothing.
Room-scoped slip endpoints live in ``rooms/slip_api.py``: only ``rooms`` may check a seat.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from ninja import File, Router, Schema, Status
from ninja.files import UploadedFile
from ninja.security import django_auth

from gatekeeper.add_keys import add_key_header, add_once, add_request
from slips import selectors, services, vault
from slips.errors import Malformed, NotFound, SlipError
from slips.models import DeviceKey
from slips.signatures import b64url_encode
from synapsia.owners import request_owner

router = Router(auth=django_auth, tags=["keys and vault"])


def slip_errors(view: Callable[..., Any]) -> Callable[..., Any]:
    """Turn a ``SlipError`` into its JSON error response (services have rolled back)."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        try:
            return view(request, *args, **kwargs)
        except SlipError as exc:
            return JsonResponse({"code": exc.code, "message": exc.message}, status=exc.status)

    # Resolved annotations, so django-ninja reads the view's own types from any module.
    wrapper.__signature__ = inspect.signature(view, eval_str=True)  # type: ignore[attr-defined]
    return wrapper


# --- schemas ---------------------------------------------------------------------------------


class ChallengeIn(Schema):
    purpose: Literal["enroll", "rotate"]


class ChallengeOut(Schema):
    challenge: str
    purpose: str
    owner_id: str  # signed inside the proof
    expires_at: datetime


class KeyIn(Schema):
    challenge: str
    public_key: str  # unpadded base64url of the 32-byte Ed25519 public key
    label: str
    proof: str  # base64url signature of KEY_PROOF_TAG + canonical proof payload


class KeyOut(Schema):
    id: UUID
    label: str
    public_key: str
    created_at: datetime
    last_used_at: datetime | None
    retired_at: datetime | None
    revoked_at: datetime | None
    after_key_loss: bool
    custody: str  # "device", or "demo_seeding" for the practice room's server-held demo keys


class VaultItemIn(Schema):
    content: dict[str, Any]


class VaultItemOut(Schema):
    id: UUID
    kind: str
    content: dict[str, Any]


def _key_out(key: DeviceKey) -> KeyOut:
    return KeyOut(
        id=key.id,
        label=key.label,
        public_key=b64url_encode(bytes(key.public_key)),
        created_at=key.created_at,
        last_used_at=key.last_used_at,
        retired_at=key.retired_at,
        revoked_at=key.revoked_at,
        after_key_loss=key.after_key_loss,
        custody=key.custody,
    )


def _item_out(owner: User, item_id: UUID) -> VaultItemOut:
    for item in selectors.vault_of_owner(owner=owner):
        if item.id == item_id:
            return VaultItemOut(id=item.id, kind=item.kind, content=item.content)
    raise NotFound("not_found", "No such vault item.")


# --- keys ------------------------------------------------------------------------------------


@router.post("/keys/challenge", response={201: ChallengeOut})
@slip_errors
def keys_challenge(request: HttpRequest, payload: ChallengeIn) -> Status[ChallengeOut]:
    owner = request_owner(request)
    challenge = services.key_challenge_issue(owner=owner, purpose=payload.purpose)
    return Status(
        201,
        ChallengeOut(
            challenge=challenge.value,
            purpose=challenge.purpose,
            owner_id=str(owner.pk),
            expires_at=challenge.expires_at,
        ),
    )


@router.post("/keys", response={201: KeyOut})
@slip_errors
def keys_enroll(request: HttpRequest, payload: KeyIn) -> Status[KeyOut]:
    key = services.key_enroll(owner=request_owner(request), **payload.dict())
    return Status(201, _key_out(key))


@router.get("/keys", response=list[KeyOut])
def keys_list(request: HttpRequest) -> list[KeyOut]:
    return [_key_out(k) for k in selectors.keys_of_owner(owner=request_owner(request))]


@router.post("/keys/{key_id}/rotate", response={201: KeyOut})
@slip_errors
def keys_rotate(request: HttpRequest, key_id: UUID, payload: KeyIn) -> Status[KeyOut]:
    key = services.key_rotate(owner=request_owner(request), old_key_id=key_id, **payload.dict())
    return Status(201, _key_out(key))


@router.post("/keys/{key_id}/revoke", response=KeyOut)
@slip_errors
def keys_revoke(request: HttpRequest, key_id: UUID) -> KeyOut:
    return _key_out(services.key_revoke(owner=request_owner(request), key_id=key_id))


# --- vault -----------------------------------------------------------------------------------


@router.get("/vault", response=list[VaultItemOut])
@slip_errors
def vault_list(request: HttpRequest) -> list[VaultItemOut]:
    return [
        VaultItemOut(id=i.id, kind=i.kind, content=i.content)
        for i in selectors.vault_of_owner(owner=request_owner(request))
    ]


@router.post("/vault", response={201: VaultItemOut})
@slip_errors
def vault_create(
    request: HttpRequest, payload: VaultItemIn, idempotency_key: str = add_key_header("vault_item")
) -> Status[VaultItemOut]:
    owner = request_owner(request)
    item = add_once(
        owner=owner,
        what="vault_item",
        key=idempotency_key,
        request=add_request(request.path, payload.content),
        make=lambda: vault.vault_item_create(owner=owner, content=payload.content),
        made_id=lambda item: item.id,
    )
    return Status(201, _item_out(owner, item.id))


@router.post("/vault/ics", response={201: VaultItemOut})
@slip_errors
def vault_ics(request: HttpRequest, file: UploadedFile = File(...)) -> Status[VaultItemOut]:  # noqa: B008
    # No Idempotency-Key: an import replaces the owner's availability, so a retry is harmless.
    owner = request_owner(request)
    if file.size is None or file.size > vault.MAX_ICS_BYTES:
        raise Malformed(
            "ics_oversized", f"Calendar files are limited to {vault.MAX_ICS_BYTES} bytes."
        )
    item = vault.vault_import_ics(owner=owner, ics=file.read(), now=timezone.now())
    return Status(201, _item_out(owner, item.id))


@router.put("/vault/{item_id}", response=VaultItemOut)
@slip_errors
def vault_update(request: HttpRequest, item_id: UUID, payload: VaultItemIn) -> VaultItemOut:
    owner = request_owner(request)
    vault.vault_item_update(owner=owner, item_id=item_id, content=payload.content)
    return _item_out(owner, item_id)


@router.delete("/vault/{item_id}", response={204: None})
@slip_errors
def vault_delete(request: HttpRequest, item_id: UUID) -> HttpResponse:
    vault.vault_item_delete(owner=request_owner(request), item_id=item_id)
    return HttpResponse(status=204)

"""Public ledger endpoints (no auth): the server's head-signing public key."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Router, Schema, Status

from ledger.chain import HEAD_SIGNATURE_PREFIX
from ledger.signing import LedgerSigningUnavailable, ledger_key_id, ledger_public_key

router = Router(tags=["ledger"])


class PublicKeyOut(Schema):
    algorithm: str
    public_key: str  # base64 of the raw 32-byte Ed25519 key
    key_id: str
    signed_message_prefix: str


class UnavailableOut(Schema):
    code: str
    message: str


@router.get("/public-key", response={200: PublicKeyOut, 503: UnavailableOut}, auth=None)
def public_key(request: HttpRequest) -> PublicKeyOut | Status[UnavailableOut]:
    """The key that signs room heads; verify signed heads and exports against it."""
    try:
        key = ledger_public_key()
    except LedgerSigningUnavailable:
        return Status(
            503, UnavailableOut(code="ledger_key_unavailable", message="No ledger signing key.")
        )
    return PublicKeyOut(
        algorithm="Ed25519",
        public_key=key,
        key_id=ledger_key_id(key),
        signed_message_prefix=HEAD_SIGNATURE_PREFIX.decode(),
    )

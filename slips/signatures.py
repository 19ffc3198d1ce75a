"""Ed25519 verification (PyNaCl: the fastest verifier measured here) and strict base64url."""

from __future__ import annotations

import base64
import binascii
import re

from nacl.exceptions import BadSignatureError, CryptoError
from nacl.signing import VerifyKey

from slips.errors import Malformed

_B64URL = re.compile(r"[A-Za-z0-9_-]*")


def b64url_encode(data: bytes) -> str:
    """Unpadded base64url, the form the browser sends and receives."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(value: str, *, field: str, length: int | None = None) -> bytes:
    """Decode unpadded base64url strictly: one spelling per byte string, exact length."""
    if not isinstance(value, str) or len(value) > 4096 or not _B64URL.fullmatch(value):
        raise Malformed("malformed_base64", f"{field} is not unpadded base64url.")
    try:
        data = binascii.a2b_base64(
            value.replace("-", "+").replace("_", "/") + "=" * (-len(value) % 4), strict_mode=True
        )
    except binascii.Error:
        raise Malformed("malformed_base64", f"{field} is not unpadded base64url.") from None
    # Non-zero trailing bits would give a second spelling of the same bytes.
    if b64url_encode(data) != value:
        raise Malformed("malformed_base64", f"{field} is not in canonical base64url.")
    if length is not None and len(data) != length:
        raise Malformed("malformed_base64", f"{field} must be {length} bytes.")
    return data


def signature_valid(*, public_key: bytes, message: bytes, signature: bytes) -> bool:
    """Whether ``signature`` is ``public_key``'s Ed25519 signature of ``message``. Never raises:
    any error (wrong length, a point not on the curve…) is a "no"."""
    try:
        VerifyKey(bytes(public_key)).verify(bytes(message), bytes(signature))
    except (BadSignatureError, CryptoError, ValueError, TypeError):
        return False
    return True

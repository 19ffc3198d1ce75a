"""The exact bytes an owner's device key signs, and the strict parser for what comes back.

Signed bytes are ``DOMAIN_TAG + RFC 8785 canonical JSON``. The tag names the purpose, so a
signature made for one purpose (a key proof, a slip, a grant) never verifies for another.

Signed JSON is restricted to values every language canonicalises the same way: objects,
arrays, strings, booleans, null and integers within ±(2^53 - 1). Floats, NaN and Infinity are
refused (RFC 8785 number formatting differs across languages above 2^53 and for floats).

Unicode rule: every string (keys included) must already be in Normalization Form C. The
parser rejects non-NFC text instead of normalising it, because normalising would change the
bytes the owner signed; the browser normalises to NFC *before* it canonicalises and signs.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

import rfc8785

from slips.errors import Malformed

SLIP_TAG = b"synapsia-slip-v1\n"
KEY_PROOF_TAG = b"synapsia-key-proof-v1\n"
GRANT_TAG = b"synapsia-grant-v1\n"  # one-action grants (a later issue); reserved now
DOMAIN_TAGS = frozenset({SLIP_TAG, KEY_PROOF_TAG, GRANT_TAG})

MAX_SAFE_INTEGER = 2**53 - 1
MAX_PAYLOAD_BYTES = 16 * 1024
MAX_DEPTH = 8

JsonValue = Any  # dict[str, JsonValue] | list[JsonValue] | str | int | bool | None


def _reject_constant(name: str) -> None:
    raise Malformed("non_finite_number", f"{name} is not allowed in a signed payload.")


def _reject_float(text: str) -> None:
    raise Malformed("float_number", f"Numbers must be integers (got {text[:20]}).")


def _parse_int(text: str) -> int:
    value = int(text)
    if abs(value) > MAX_SAFE_INTEGER:
        raise Malformed("integer_out_of_range", "Integers must lie within ±(2^53 - 1).")
    return value


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise Malformed("duplicate_key", f"The key {key[:40]!r} appears twice.")
        result[key] = value
    return result


def _check_text(value: str) -> None:
    try:
        value.encode("utf-8")  # a lone surrogate (from a \\ud800 escape) cannot be encoded
    except UnicodeEncodeError:
        raise Malformed("lone_surrogate", "Text contains a lone surrogate.") from None
    if not unicodedata.is_normalized("NFC", value):
        raise Malformed("not_nfc", "Text must be in Unicode Normalization Form C.")


def _check_tree(value: JsonValue, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise Malformed("too_deep", f"Payload nests deeper than {MAX_DEPTH} levels.")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_text(key)
            _check_tree(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_tree(item, depth + 1)
    elif isinstance(value, str):
        _check_text(value)
    elif isinstance(value, bool) or value is None:
        pass
    elif isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise Malformed("integer_out_of_range", "Integers must lie within ±(2^53 - 1).")
    else:
        raise Malformed("unsupported_value", f"{type(value).__name__} cannot be signed.")


def payload_parse(raw: bytes) -> dict[str, JsonValue]:
    """Parse signed-payload JSON strictly; raise ``Malformed`` (with a rule id) on anything odd.

    Refuses: more than ``MAX_PAYLOAD_BYTES``, invalid UTF-8, duplicate keys, lone surrogates,
    NaN/Infinity, floats (including ``1.0`` and ``1e3``), integers beyond ±(2^53 - 1), non-NFC
    text, nesting deeper than ``MAX_DEPTH``, and a top level that is not an object.
    """
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise Malformed("oversized", f"Payload is larger than {MAX_PAYLOAD_BYTES} bytes.")
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        raise Malformed("invalid_utf8", "Payload is not valid UTF-8.") from None
    try:
        value = json.loads(
            text,
            object_pairs_hook=_unique_object,
            parse_constant=_reject_constant,
            parse_float=_reject_float,
            parse_int=_parse_int,
        )
    except RecursionError:
        raise Malformed("too_deep", "Payload nests too deeply.") from None
    except ValueError as exc:
        if isinstance(exc, Malformed):
            raise
        raise Malformed("invalid_json", "Payload is not valid JSON.") from None
    if not isinstance(value, dict):
        raise Malformed("not_an_object", "Payload must be a JSON object.")
    _check_tree(value)
    return value


def canonical_json(value: JsonValue) -> bytes:
    """RFC 8785 canonical JSON of ``value`` after the same checks the parser applies."""
    _check_tree(value)
    return rfc8785.dumps(value)


def signed_bytes(*, tag: bytes, payload: JsonValue) -> bytes:
    """The exact bytes to sign or verify: the purpose's domain tag, then canonical JSON."""
    if tag not in DOMAIN_TAGS:
        raise ValueError("unknown domain tag")
    return tag + canonical_json(payload)


def payload_parse_canonical(raw: bytes) -> dict[str, JsonValue]:
    """Parse strictly and require ``raw`` to be the canonical form already.

    The server verifies the signature over the bytes it was sent and stores those very bytes,
    so there is never a second serialisation that could disagree with what the owner signed.
    """
    value = payload_parse(raw)
    # payload_parse has applied canonical_json's checks to this very tree: serialise only.
    if rfc8785.dumps(value) != raw:
        raise Malformed("not_canonical", "Payload is not RFC 8785 canonical JSON.")
    return value

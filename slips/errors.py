"""Errors with stable rule ids. The API turns them into ``{"code", "message"}`` responses.

The ``code`` is the rule that refused the request (``bad_signature``, ``nonce_reused``, …): the
browser shows the message, the ledger records the code (never any content).
"""

from __future__ import annotations


class SlipError(Exception):
    status = 400

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class Malformed(SlipError):
    """The input is not a well-formed payload, key, signature or vault item."""

    status = 422


class Rejected(SlipError):
    """Well-formed, but a rule refuses it (bad signature, wrong binding, expired, replayed…)."""

    status = 422


class NotFound(SlipError):
    """Also used where "exists but not yours" must not be told apart from "does not exist"."""

    status = 404


class Misconfigured(SlipError):
    """The service cannot operate safely as configured (e.g. no vault key in production)."""

    status = 503

"""Bearer secrets (agent tokens, invite tokens): issued once, stored only as a hash.

The secrets carry 256 bits of randomness, so a plain SHA-256 is enough to store them
(no salt or slow hash needed: there is nothing to brute-force) and lets a lookup use an index.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

AGENT_TOKEN_PREFIX = "syn_agent_"  # noqa: S105 (a public prefix, not a secret)
INVITE_TOKEN_PREFIX = "syn_invite_"  # noqa: S105 (a public prefix, not a secret)


@dataclass(frozen=True)
class IssuedSecret:
    value: str  # shown to the owner once, never stored
    digest: str  # what the database keeps
    display_prefix: str  # enough to tell two secrets apart in a list


def secret_digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def secret_issue(prefix: str) -> IssuedSecret:
    value = prefix + secrets.token_urlsafe(32)
    return IssuedSecret(
        value=value, digest=secret_digest(value), display_prefix=value[: len(prefix) + 4]
    )

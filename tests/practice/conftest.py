"""Practice-room fixtures: a per-test ledger signing key and (services pass) a vault key."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from typing import Any

import pytest

from ledger import signing
from tests.slips.conftest import vault_key  # noqa: F401 (autouse: the vault needs a key)


@pytest.fixture(autouse=True)
def ledger_signing_key(
    settings: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Closing and pausing rooms signs ledger heads: give each test its own server key, and
    the same key to any Daphne the test starts, so heads signed by either verify here."""
    key = base64.b64encode(os.urandom(32)).decode()
    monkeypatch.setenv("SYNAPSIA_LEDGER_SIGNING_KEY", key)
    settings.SYNAPSIA = {
        **settings.SYNAPSIA,
        "LEDGER_SIGNING_KEY": key,
        "LEDGER_SIGNING_KEY_PATH": str(tmp_path / "ledger-signing.key"),
    }
    signing._signing_key.cache_clear()
    yield
    signing._signing_key.cache_clear()


@pytest.fixture(params=["allow_all", "deny_all"])
def tool_policy_default(request: pytest.FixtureRequest, settings: Any) -> str:
    """Run under both profiles' tool policy defaults: the seeded rows must decide alone."""
    settings.SYNAPSIA = {**settings.SYNAPSIA, "TOOL_POLICY_DEFAULT": request.param}
    return str(request.param)

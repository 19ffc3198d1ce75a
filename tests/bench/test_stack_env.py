"""The bench's servers take their database settings from the bench, not from the shell that
started it (a shell set up for ``make test`` closes a connection after every hop)."""

from __future__ import annotations

import pytest

from bench.stack import base_env


def test_the_callers_database_settings_stay_out_of_the_servers_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/14")
    monkeypatch.setenv("SYNAPSIA_CONN_MAX_AGE", "0")
    monkeypatch.setenv("SYNAPSIA_SOCKET_RATE_SAY", "10/m")  # a what-if the caller chose: kept
    env = base_env(debug=False, settings="synapsia.settings")
    assert not {"DATABASE_URL", "REDIS_URL", "SYNAPSIA_CONN_MAX_AGE"} & set(env)
    assert env["SYNAPSIA_SOCKET_RATE_SAY"] == "10/m"
    assert env["DJANGO_SETTINGS_MODULE"] == "synapsia.settings"

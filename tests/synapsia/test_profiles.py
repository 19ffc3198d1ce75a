"""Settings profiles: the embedded default, and a production profile that refuses unsafe starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from synapsia import celery_app

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = {
    "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/test",
    "REDIS_URL": "redis://127.0.0.1:6379/15",
    "SYNAPSIA_SECRET_KEY": "kV9q2-Lm8zT4wR1xB7nC3yH6pF0sD5gJ-aE2uK8oI4tW9vQ1rM7bN3cX6zL0hY5j",
    "SYNAPSIA_LEDGER_SIGNING_KEY": "c3luYXBzaWEtdGVzdC1vbmx5LWxlZGdlci1zZWVkISE=",
    "SYNAPSIA_VAULT_KEY": (
        "dGVzdC1vbmx5IHZhdWx0IGtleSwgMzIrIGJ5dGVzLi50ZXN0LW9ubHkgdmF1bHQga2V5LCAzMisgYnl0ZXMuLg"
    ),
}


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("SYNAPSIA_")
        and k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_ALLOW_ASYNC_UNSAFE")
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=clean | env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_this_run_uses_the_profile_its_environment_names() -> None:
    services = os.environ.get("SYNAPSIA_TEST_SERVICES") == "1"
    assert ("production" if services else "embedded") == settings.PROFILE
    engine = settings.DATABASES["default"]["ENGINE"]
    layer = settings.CHANNEL_LAYERS["default"]["BACKEND"]
    if services:
        assert engine == "django.db.backends.postgresql"
        assert layer == "channels_redis.pubsub.RedisPubSubChannelLayer"
        assert celery_app.conf.broker_url.startswith("redis://")
        assert celery_app.conf.task_always_eager is False
    else:
        assert engine == "synapsia.db.sqlite3"
        assert layer == "rooms.realtime.SweptInMemoryChannelLayer"
        assert celery_app.conf.task_always_eager is True


def test_production_check_deploy_is_clean() -> None:
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


@pytest.mark.parametrize(
    ("override", "complaint"),
    [
        ({"SYNAPSIA_SECRET_KEY": ""}, "SYNAPSIA_SECRET_KEY"),
        ({"SYNAPSIA_SECRET_KEY": "short"}, "SYNAPSIA_SECRET_KEY"),
        ({"SYNAPSIA_SECRET_KEY": "ab" * 40}, "SYNAPSIA_SECRET_KEY"),
        ({"SYNAPSIA_DEBUG": "true"}, "SYNAPSIA_DEBUG must be off"),
        ({"REDIS_URL": ""}, "needs both DATABASE_URL and REDIS_URL"),
        ({"SYNAPSIA_LEDGER_SIGNING_KEY": ""}, "set SYNAPSIA_LEDGER_SIGNING_KEY"),
        ({"SYNAPSIA_VAULT_KEY": ""}, "set SYNAPSIA_MASTER_KEY (or SYNAPSIA_VAULT_KEY)"),
        ({"SYNAPSIA_DB_PREPARE_THRESHOLD": "five"}, "SYNAPSIA_DB_PREPARE_THRESHOLD must be"),
        ({"SYNAPSIA_DB_PREPARE_THRESHOLD": "-1"}, "SYNAPSIA_DB_PREPARE_THRESHOLD must be"),
    ],
)
def test_production_refuses_to_start_unsafely(override: dict[str, str], complaint: str) -> None:
    env = {k: v for k, v in (PRODUCTION | override).items() if v}
    result = manage("check", env=env)
    assert result.returncode != 0
    assert complaint in result.stderr


def test_embedded_default_needs_no_environment() -> None:
    result = manage(
        "check", env={"SYNAPSIA_SQLITE_PATH": str(ROOT / "var" / "profile-check.sqlite3")}
    )
    assert result.returncode == 0, result.stderr

"""Test profiles and shared fixtures.

``make test`` runs this suite twice: on the embedded default, then with
``SYNAPSIA_TEST_SERVICES=1`` on the production profile (PostgreSQL + Redis). Where those
services are absent the second pass skips with the reason; ``.ci/run`` sets
``SYNAPSIA_REQUIRE_SERVICES=1``, which turns every such skip into a failure.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.conf import settings

from rooms import services
from rooms.models import Agent, Room, RoomState
from tests import flush
from tests.e2e.daphne import running_daphne

SERVICES_PASS = os.environ.get("SYNAPSIA_TEST_SERVICES") == "1"
SERVICES_REQUIRED = os.environ.get("SYNAPSIA_REQUIRE_SERVICES") == "1"

# The Gatekeeper denies a check slower than 1 s (production's default): right for a server,
# a source of false denials on a test machine running both passes on 2 cores, where a cold
# first check can take longer. Tests of the timeout set their own (tests/gatekeeper,
# tests/rooms/test_context.py); servers the tests start inherit this through the environment.
TEST_GATEKEEPER_TIMEOUT = "10"
if "SYNAPSIA_GATEKEEPER_TIMEOUT_SECONDS" not in os.environ:
    os.environ["SYNAPSIA_GATEKEEPER_TIMEOUT_SECONDS"] = TEST_GATEKEEPER_TIMEOUT
    settings.SYNAPSIA["GATEKEEPER_TIMEOUT_SECONDS"] = float(TEST_GATEKEEPER_TIMEOUT)

# Connections end with each request or hop, as the services pass already runs (SERVICES_ENV):
# a test that restores the database file from a backup (tests/rooms/test_deletion_restore.py)
# stands for a restore with the server stopped, and a connection another thread kept open
# across it would read the rewritten file through a stale index ("disk I/O error").
if "SYNAPSIA_CONN_MAX_AGE" not in os.environ:
    os.environ["SYNAPSIA_CONN_MAX_AGE"] = "0"
    settings.DATABASES["default"]["CONN_MAX_AGE"] = 0

# What lives outside the database (the data-key store, the deletion journal) is per test run:
# make test's two passes run side by side and must not share these files (nor leave rows in
# var/). Servers the tests start inherit the paths through the environment.
_RUN_FILES = Path(tempfile.mkdtemp(prefix="synapsia-test-run-"))
for _variable, _group, _key, _name in (
    ("SYNAPSIA_KEY_STORE_PATH", "SLIPS", "KEY_STORE_PATH", "keys.sqlite3"),
    ("SYNAPSIA_DELETION_JOURNAL_PATH", "SYNAPSIA", "DELETION_JOURNAL_PATH", "deletions.jsonl"),
):
    if _variable not in os.environ:
        os.environ[_variable] = str(_RUN_FILES / _name)
        getattr(settings, _group)[_key] = os.environ[_variable]
# The embedded test database too: two runs in one checkout (a developer's and an editor's, or
# helpers side by side) otherwise shared var/db-test.sqlite3, and one run's teardown deleted
# the file under the other ("disk I/O error"). Servers the tests start are given the test
# database's actual name (synapsia.serving.server_env).
_database = settings.DATABASES["default"]
if _database["ENGINE"].endswith("sqlite3") and "SYNAPSIA_SQLITE_PATH" not in os.environ:
    _database.setdefault("TEST", {})["NAME"] = str(_RUN_FILES / "db-test.sqlite3")
# A transactional test's clean-up: quicker, the same empty tables (tests/flush.py).
flush.install()


def _reachable(url: str, default_port: int) -> str | None:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or default_port
    try:
        with socket.create_connection((host, port), timeout=2):
            return None
    except OSError as exc:
        return f"{parts.scheme} at {host}:{port} is not reachable ({exc})"


def service_unavailable(reason: str) -> None:
    """Skip a test for a missing service, or fail it when services are required (CI)."""
    if SERVICES_REQUIRED:
        pytest.fail(f"required service unavailable: {reason}", pytrace=False)
    pytest.skip(reason)


def pytest_report_header(config: pytest.Config) -> str:
    return f"synapsia profile: {settings.PROFILE} (services required: {SERVICES_REQUIRED})"


# Tests of pure code (the fence, the protocol's words, the catalogue, tool schemas, rule tables,
# deploy files, bench checks): no database, cache, channel layer or task queue, so the profile
# cannot change what they see. They run once, in the embedded pass; the services pass
# deselects them. A listed test that asks for the database is a collection error, not dropped.
PROFILE_FREE = (
    "tests/agents/test_llm.py",
    "tests/agents/test_negotiator_plan.py",
    "tests/agents/test_sdk_decoding.py",
    "tests/bench/test_eval_checks.py",
    "tests/bench/test_fence_bench*.py",
    "tests/bench/test_injection_corpora*.py",
    "tests/bench/test_instructions.py",  # its own throwaway SQLite, whatever the profile
    "tests/deploy/test_compose.py",
    "tests/deploy/test_hadolint.py",
    "tests/deploy/test_image.py",
    "tests/deploy/test_k8s.py",
    "tests/dining/test_catalogue_files.py",
    "tests/dining/test_rules.py",
    "tests/gatekeeper/test_ledger_access.py",
    "tests/gatekeeper/test_reasons.py",
    "tests/gatekeeper/test_standing_rule.py",
    "tests/gatekeeper/tools/test_arguments.py",
    "tests/gatekeeper/tools/test_descriptor_memo.py",
    "tests/gatekeeper/tools/test_registry.py",
    "tests/rooms/test_fence_cleaning_equivalence.py",
    "tests/rooms/test_fence_equivalence.py",
    "tests/rooms/test_fence_hardening.py",
    "tests/rooms/test_fence_pass_equivalence.py",
    "tests/rooms/test_fence_dispatch_gates.py",
    "tests/rooms/test_fence_line_scans.py",
    "tests/rooms/test_fence_third_party_sample.py",
    "tests/rooms/test_protocol_ask.py",
    "tests/rooms/test_protocol_docs.py",
    "tests/rooms/test_protocol_package.py",
    "tests/rooms/test_untrusted*.py",
)
_DATABASE_FIXTURES = frozenset({"db", "transactional_db", "live_daphne", "settings", "client"})


def _profile_free(item: pytest.Item) -> bool:
    path = item.nodeid.split("::", 1)[0]
    if not any(fnmatch.fnmatch(path, pattern) for pattern in PROFILE_FREE):
        return False
    uses = _DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
    if uses or item.get_closest_marker("django_db"):
        raise pytest.UsageError(
            f"{item.nodeid} is listed in PROFILE_FREE (tests/conftest.py) but uses "
            f"{', '.join(sorted(uses)) or 'the database'}: take its file off the list"
        )
    return True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if SERVICES_PASS:
        once = [item for item in items if _profile_free(item)]
        if once:
            config.hook.pytest_deselected(items=once)
            ran_before = set(once)
            items[:] = [item for item in items if item not in ran_before]
    if not SERVICES_PASS:
        skip = pytest.mark.skip(reason="production profile only: runs in pass 2 of make test")
        for item in items:
            if "services" in item.keywords:
                item.add_marker(skip)
        return
    problems = [
        p
        for p in (
            _reachable(os.environ.get("DATABASE_URL", ""), 5432),
            _reachable(os.environ.get("REDIS_URL", ""), 6379),
        )
        if p
    ]
    if not problems:
        return
    if SERVICES_REQUIRED:
        raise pytest.UsageError("services required but unavailable: " + "; ".join(problems))
    skip = pytest.mark.skip(reason="services pass skipped: " + "; ".join(problems))
    for item in items:
        item.add_marker(skip)


@pytest.fixture(autouse=True)
def _no_requests_counted_yet() -> None:
    """Each test starts with nothing counted against a rate limit (API throttles, password
    reset and signup windows live in the cache; failed logins in the database are already
    per test). In Redis only this project's keys go: Celery's and Channels' stay."""
    from django.core.cache import cache

    client_of = getattr(getattr(cache, "_cache", None), "get_client", None)
    if client_of is None:
        cache.clear()
        return
    client = client_of(write=True)
    keys = list(client.scan_iter(match=cache.make_key("*")))
    if keys:
        client.delete(*keys)


# --- factories ----------------------------------------------------------------------------


@dataclass
class Seat:
    owner: object
    agent: Agent
    token: str


@dataclass
class OpenRoom:
    room: Room
    a: Seat
    b: Seat


@pytest.fixture
def make_owner(django_user_model: type) -> Callable[[str], object]:
    def make(username: str) -> object:
        return django_user_model.objects.create_user(username=username, password="correct horse 42")

    return make


@pytest.fixture
def owner_limit(settings: Any) -> Callable[[str, int], None]:
    """Set how many of one kind an owner may hold (``SYNAPSIA["OWNER_LIMITS"][held]``) for
    the test."""

    def set_limit(held: str, limit: int) -> None:
        limits = {**settings.SYNAPSIA["OWNER_LIMITS"], held: limit}
        settings.SYNAPSIA = {**settings.SYNAPSIA, "OWNER_LIMITS": limits}

    return set_limit


@pytest.fixture
def make_open_room(make_owner: Callable[[str], object]) -> Callable[..., OpenRoom]:
    """Two owners, each with an agent bound, in an open room (through the real services)."""

    def make(purpose: str = "Dinner for two", prefix: str = "") -> OpenRoom:
        alice, bob = make_owner(f"{prefix}alice"), make_owner(f"{prefix}bob")
        agent_a = services.agent_register(owner=alice, name="Alice's agent")
        agent_b = services.agent_register(owner=bob, name="Bob's agent")
        room = services.room_create(owner=alice, purpose=purpose, charter="Find a dinner slot.")
        invite = services.invite_create(owner=alice, room_id=room.id)
        services.invite_accept(owner=bob, token=invite.token)
        services.room_bind_agent(owner=alice, room_id=room.id, agent_id=agent_a.agent.id)
        services.room_bind_agent(owner=bob, room_id=room.id, agent_id=agent_b.agent.id)
        room = services.room_transition(owner=alice, room_id=room.id, to=RoomState.OPEN)
        return OpenRoom(
            room,
            Seat(alice, agent_a.agent, agent_a.token),
            Seat(bob, agent_b.agent, agent_b.token),
        )

    return make


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: object) -> object:
    """After the run, end connections that ASGI worker threads still hold to the test database
    (PostgreSQL refuses to drop a database in use)."""
    yield
    from django.db import connection

    with django_db_blocker.unblock():  # type: ignore[attr-defined]
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )


# --- real servers and a real browser -------------------------------------------------------

CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def live_daphne(tmp_path: Path, transactional_db: None) -> Iterator[str]:
    """A real Daphne on a free loopback port, sharing this test's database: its base URL."""
    with running_daphne(tmp_path / "daphne.log") as host:
        yield f"http://{host}"


@pytest.fixture
def browser_page(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A fresh page in headless Debian Chromium driven by Playwright (never a downloaded one)."""
    executable = shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(executable):
        service_unavailable("Chromium is not installed (apt-get install chromium chromium-driver)")
    # Playwright's sync API runs an event loop; the test's own ORM calls are still sequential.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        context = browser.new_context()
        try:
            yield context.new_page()
        finally:
            context.close()
            browser.close()

"""Logs: JSON lines with correlation ids in production, and never room content.

The canary test runs the whole practice negotiation (``manage.py demo --headless``: seeding,
a real Daphne, both agents, the stand-in owners' approvals, the receipt) with JSON logs
appended to one file by every process, then takes what was actually said and sealed in that
room from its database (messages, whispers, the charter, the vault's plain items) and asserts
none of it appears in any log line.
"""

from __future__ import annotations

import io
import json
import logging
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from synapsia.logs import CorrelationFilter, JsonFormatter, correlation_bound

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def json_lines() -> Any:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(CorrelationFilter())
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    finally:
        root.removeHandler(handler)


def test_a_line_names_its_request_and_room(json_lines: Any, make_owner: Any) -> None:
    room = "6f1c2b9e-3d4a-4b5c-9d8e-7f6a5b4c3d2e"  # no such room: the page answers 404
    client = Client()
    client.force_login(make_owner("logs-owner"))
    response = client.get(f"/rooms/{room}/", HTTP_X_REQUEST_ID="proxy-req-0001")
    assert response.status_code == 404
    assert response["X-Request-ID"] == "proxy-req-0001"
    not_found = [line for line in json_lines() if line["logger"] == "django.request"]
    assert not_found[-1]["request_id"] == "proxy-req-0001"
    assert not_found[-1]["room_id"] == room
    with correlation_bound(room=room, agent="agent-7"):
        logging.getLogger("synapsia.test").info("socket side")
    line = json_lines()[-1]
    assert (line["room_id"], line["agent_id"], line["level"]) == (room, "agent-7", "INFO")
    assert set(line) >= {"time", "level", "logger", "message", "request_id"}


def test_a_request_id_that_is_not_a_plain_token_is_replaced(db: None) -> None:
    response = Client().get("/healthz", HTTP_X_REQUEST_ID='bad"\n{"forged": 1}')
    assert response["X-Request-ID"] != 'bad"\n{"forged": 1}'
    assert len(response["X-Request-ID"]) == 32


def test_a_request_log_line_carries_the_request_id(json_lines: Any, db: None) -> None:
    response = Client().get("/no-such-page/", HTTP_X_REQUEST_ID="proxy-req-0002")
    assert response.status_code == 404
    lines = [line for line in json_lines() if line["logger"] == "django.request"]
    assert lines and lines[-1]["request_id"] == "proxy-req-0002"


# Run in the demo's database after the negotiation: what the room said and holds, in the clear
# (every string of the vault's items, which the agents read scoped).
_READ_BACK = """
import json
from rooms.models import Message, Room, Whisper
from slips.models import VaultItem
from rooms.ledger_api import _strings as strings
from slips.vault import vault_open

print(json.dumps({
    "said": [m.text for m in Message.objects.all()],
    "whispered": [w.text for w in Whisper.objects.all()],
    "charters": [r.charter for r in Room.objects.all()],
    "vault": [
        text
        for item in VaultItem.objects.all()
        for text in strings(vault_open(item).model_dump(mode="json"))
    ],
}))
"""


@pytest.mark.e2e
@pytest.mark.skipif(
    bool(os.environ.get("SYNAPSIA_TEST_SERVICES")), reason="runs its own embedded processes once"
)
def test_a_whole_negotiation_logs_no_content(tmp_path: Path) -> None:
    log_file = tmp_path / "log.jsonl"
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL") and not key.startswith("SYNAPSIA_")
    }
    env.update(
        SYNAPSIA_SQLITE_PATH=str(tmp_path / "db.sqlite3"),
        SYNAPSIA_LOG_FORMAT="json",
        SYNAPSIA_LOG_FILE=str(log_file),
        SYNAPSIA_LEDGER_SIGNING_KEY_PATH=str(tmp_path / "ledger.key"),
        SYNAPSIA_DELETION_JOURNAL_PATH=str(tmp_path / "deletions.jsonl"),
        SYNAPSIA_LOG_LEVEL="DEBUG",
    )

    def manage(*argv: str) -> subprocess.CompletedProcess[str]:
        run = subprocess.run(
            [sys.executable, "manage.py", *argv],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        return run

    manage("migrate", "--no-input", "-v0")
    run = manage("demo", "--headless")
    assert "practice negotiation completed" in run.stdout
    lines = log_file.read_text().splitlines()
    assert lines, "the negotiation logged nothing at all"
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    logged = log_file.read_text() + run.stderr

    # Messages, whispers and charters are sealed at rest: the raw columns hold ciphertext, which
    # no log could quote. What was said is read back through the app, as the room shows it.
    dump = manage("shell", "-c", _READ_BACK)
    content = json.loads(dump.stdout.strip().splitlines()[-1])
    with sqlite3.connect(tmp_path / "db.sqlite3") as database:
        stored = {row[0] for row in database.execute("SELECT text FROM rooms_message")}
    assert content["said"], "the negotiation said nothing: the canaries would prove nothing"
    assert not stored & set(content["said"]), "messages are stored in the clear"
    assert content["vault"], "no vault item to take canaries from"
    canaries = [
        text.strip()
        for kind in ("said", "whispered", "charters", "vault")
        for text in content[kind]
        if len(text.strip()) >= 12
    ]
    for canary in canaries:
        # The whole text, and its longest line, in case a log line quotes part of it.
        longest = max(canary.splitlines(), key=len)
        assert canary not in logged, canary
        assert len(longest) < 12 or longest not in logged, longest

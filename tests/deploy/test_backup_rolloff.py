"""The documented nightly backup keeps nothing 30 days (boundary spec, "Data": "backups roll
off within 30 days"): docs/operations.md's commands, run as written on a scratch directory
(the database dump aside), write each store's dated copy where the roll-off line prunes, and
that line deletes every copy 29 whole days old or older and no newer one."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

from tests.conftest import service_unavailable
from tests.deploy.dockerfile import ROOT

DAY = 24 * 60 * 60


def _nightly_commands() -> list[str]:
    """The shell block of "Backups roll off within 30 days", one command a line."""
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text[text.index("**Backups roll off within 30 days**") :]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None
    return [
        line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")
    ]


def test_every_dated_copy_lands_where_the_roll_off_prunes() -> None:
    commands = _nightly_commands()
    (prune,) = [c for c in commands if c.startswith("find ")]
    pruned = set(re.findall(r"(/backups/\w+)", prune))
    written = {m.group(1) for c in commands if (m := re.search(r"(/backups/\w+)/[\w.-]*\$day", c))}
    assert written == {"/backups/db", "/backups/keys", "/backups/journal"}
    assert written <= pruned
    assert "-delete" in prune


def test_the_commands_keep_no_copy_30_days(tmp_path: Path) -> None:
    if shutil.which("sqlite3") is None:  # the documented key-store copy uses its shell
        service_unavailable("the sqlite3 shell is not installed (apt-get install sqlite3)")
    live = tmp_path / "live"
    live.mkdir()
    with sqlite3.connect(live / "keys.sqlite3") as keys:
        keys.execute("CREATE TABLE k (id INTEGER)")
    (live / "deletions.jsonl").write_text('{"kind": "room"}\n')
    backups = tmp_path / "backups"
    for store in ("db", "keys", "journal"):
        (backups / store).mkdir(parents=True)
    # Copies of earlier nights (store, file, age in days).
    earlier = (
        ("keys", "keys-old-27.sqlite3", 27),
        ("keys", "keys-old-28.sqlite3", 28.9),
        ("keys", "keys-old-29.sqlite3", 29.01),
        ("db", "synapsia-old-40.pgdump", 40),
        ("journal", "deletions-old-31.jsonl", 31),
    )
    now = time.time()
    for store, name, age in earlier:
        path = backups / store / name
        path.write_text("x")
        os.utime(path, (now - age * DAY, now - age * DAY))

    script = "\n".join(
        c.replace("/backups", str(backups)).replace("/var/lib/synapsia", str(live))
        for c in _nightly_commands()
        if not c.startswith("pg_dump")  # no PostgreSQL here: the dump is its own tool's
    )
    subprocess.run(["sh", "-euc", script], check=True, cwd=tmp_path)

    left = {p.name for p in backups.rglob("*") if p.is_file()}
    day = time.strftime("%Y-%m-%d")
    assert left == {
        "keys-old-27.sqlite3",
        "keys-old-28.sqlite3",
        f"keys-{day}.sqlite3",
        f"deletions-{day}.jsonl",
    }
    with sqlite3.connect(backups / "keys" / f"keys-{day}.sqlite3") as copy:
        assert copy.execute("SELECT name FROM sqlite_master").fetchall() == [("k",)]

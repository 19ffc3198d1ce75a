"""``python -m bench.instructions``: the count it reads from callgrind, and each work run for
real on a seeded throwaway database (without valgrind, which would take minutes)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench import instructions


def test_the_count_is_callgrinds_last_collected_line() -> None:
    stderr = (
        "==12== Callgrind\n==12== Collected : 15467726473\n==12==\n==12== I refs: 15,467,726,473"
    )
    assert instructions.collected(stderr) == 15_467_726_473
    with pytest.raises(RuntimeError, match="no count"):
        instructions.collected("==12== Callgrind, a call-graph generating cache profiler\n")


def test_bad_ranges_and_trees_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        instructions.main(["--low", "40", "--high", "40"])
    with pytest.raises(SystemExit):
        instructions.main(["--tree", str(tmp_path)])  # not a checkout


@pytest.mark.parametrize(("work", "rooms"), [("desk", 3), ("context", 1), ("leave", 3)])
def test_each_work_runs_on_its_seeded_database(tmp_path: Path, work: str, rooms: int) -> None:
    database, keys, seed_file = instructions._seed(work, tmp_path, rooms=rooms)
    done = subprocess.run(
        [
            sys.executable,
            str(Path(instructions.__file__)),
            "--run",
            work,
            "--count",
            "2",
            "--seed-file",
            str(seed_file),
        ],
        cwd=instructions.ROOT,
        env=instructions._embedded_env(database, keys),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]

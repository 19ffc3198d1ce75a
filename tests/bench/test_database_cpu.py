"""The load generator's database CPU figure (services profile: the PostgreSQL backends of
the bench database) and where the report prints it."""

from __future__ import annotations

import os
from typing import Any

import pytest

from bench import loadgen, report


def test_without_a_database_there_is_no_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    cpu = loadgen.DatabaseCpu()
    cpu.start()
    assert cpu.seconds() is None
    assert loadgen._per(None, 10) is None
    assert loadgen._per(0.5, 0) is None
    assert loadgen._per(0.5, 250) == pytest.approx(2.0)


def _say_run(**extra: Any) -> dict[str, Any]:
    return {
        "mode": "synapsia",
        "msg_per_s": 300.0,
        "delivered": 10,
        "sent": 10,
        "elapsed_s": 1.0,
        "latency_ms": {"p50": 1.0, "p95": 2.0, "p99": 3.0},
        "lost": 0,
        "duplicates": 0,
        "server_cpu_ms_per_msg": 1.5,
        "errors": [],
        **extra,
    }


def test_the_run_line_prints_the_database_cpu_when_measured() -> None:
    assert "database CPU" not in report.run_line(_say_run(database_cpu_ms_per_msg=None))
    assert "database CPU 0.75 ms/msg" in report.run_line(_say_run(database_cpu_ms_per_msg=0.75))


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_the_backends_of_the_database_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """On PostgreSQL the figure is the CPU the database's other backends spent between the
    two readings: this test's own connection works in between and is counted."""
    from django.db import connection

    settings_dict = connection.settings_dict
    url = (
        f"postgresql://{settings_dict['USER']}@{settings_dict['HOST']}:{settings_dict['PORT']}"
        f"/{settings_dict['NAME']}"
    )
    monkeypatch.setitem(os.environ, "DATABASE_URL", url)
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    cpu = loadgen.DatabaseCpu()
    cpu.start()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM generate_series(1, 3000000)")
    spent = cpu.seconds()
    assert spent is not None and spent > 0.0

"""The models and their migrations agree: a change to a model (an index dropped by hand, as
rooms 0021 does, included) must come with its migration, or `migrate` on a deploy would
leave the database other than the code expects."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def test_no_model_change_is_without_its_migration() -> None:
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as missing:  # --check exits 1 when a migration is missing
        pytest.fail(f"a model change has no migration (exit {missing.code}):\n{out.getvalue()}")
    assert "No changes detected" in out.getvalue()

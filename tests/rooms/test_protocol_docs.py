"""The published protocol documents match the code."""

from __future__ import annotations

from pathlib import Path

from rooms.management.commands.protocol_schemas import SCHEMA_DIR, rendered_schemas
from rooms.protocol import CloseCode, ErrorCode

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def test_schemas_are_current() -> None:
    for name, text in rendered_schemas().items():
        path = SCHEMA_DIR / name
        assert path.exists(), f"docs/schemas/{name} is missing: run `make schemas`"
        assert path.read_text() == text, f"docs/schemas/{name} is stale: run `make schemas`"


def test_every_error_and_close_code_is_documented() -> None:
    doc = DOC.read_text()
    for code in ErrorCode:
        assert f"`{code.value}`" in doc, f"error code {code.value} is not in docs/protocol.md"
    for close in CloseCode:
        assert f"`{close.value}`" in doc, f"close code {close.value} is not in docs/protocol.md"

"""Write docs/schemas/*.json from the protocol's pydantic models and the dining file formats
(``make schemas``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from dining.formats import format_schemas
from rooms.protocol import frame_schemas

SCHEMA_DIR = Path(settings.BASE_DIR) / "docs" / "schemas"


def rendered_schemas() -> dict[str, str]:
    """File name → exact file text, so the staleness test compares bytes, not parsed JSON."""
    schemas: dict[str, Any] = {f"{name}.json": schema for name, schema in frame_schemas().items()}
    schemas.update(format_schemas())
    return {
        name: json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        for name, schema in schemas.items()
    }


class Command(BaseCommand):
    help = "Regenerate docs/schemas/*.json from rooms.protocol and dining.formats."

    def handle(self, *args: Any, **options: Any) -> None:
        SCHEMA_DIR.mkdir(parents=True, exist_ok=True)
        for name, text in rendered_schemas().items():
            (SCHEMA_DIR / name).write_text(text)
            self.stdout.write(f"wrote docs/schemas/{name}")

"""Write docs/schemas/*.json and docs/asyncapi.yaml from the protocol package and the dining
file formats (``make schemas``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from django.core.management.base import BaseCommand

from dining.formats import format_schemas
from synapsia_protocol.schemas import asyncapi_document, frame_schemas

DOCS_DIR = Path(settings.BASE_DIR) / "docs"
SCHEMA_DIR = DOCS_DIR / "schemas"
ASYNCAPI_PATH = DOCS_DIR / "asyncapi.yaml"
ASYNCAPI_HEADER = (
    "# Generated from the synapsia_protocol package by `make schemas`; do not edit.\n"
    "# A test fails when it is stale (tests/rooms/test_protocol_docs.py).\n"
)


def rendered_schemas() -> dict[str, str]:
    """File name → exact file text, so the staleness test compares bytes, not parsed JSON."""
    schemas: dict[str, Any] = {f"{name}.json": schema for name, schema in frame_schemas().items()}
    schemas.update(format_schemas())
    return {
        name: json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        for name, schema in schemas.items()
    }


def rendered_asyncapi() -> str:
    """docs/asyncapi.yaml's exact text (block YAML, keys in the document's own order)."""
    body = yaml.safe_dump(
        asyncapi_document(), sort_keys=False, allow_unicode=True, width=100, indent=2
    )
    return ASYNCAPI_HEADER + body


class Command(BaseCommand):
    help = "Regenerate docs/schemas/*.json and docs/asyncapi.yaml from synapsia_protocol."

    def handle(self, *args: Any, **options: Any) -> None:
        SCHEMA_DIR.mkdir(parents=True, exist_ok=True)
        for name, text in rendered_schemas().items():
            (SCHEMA_DIR / name).write_text(text)
            self.stdout.write(f"wrote docs/schemas/{name}")
        ASYNCAPI_PATH.write_text(rendered_asyncapi())
        self.stdout.write("wrote docs/asyncapi.yaml")

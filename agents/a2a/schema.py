"""A small JSON Schema check for a room tool's ``inputSchema`` (the subset our tools use).

The adapter checks an A2A agent's ``act`` before sending it so that a malformed request gets a
clear error and nothing reaches the room. The server checks again with its own models; a
keyword this module does not know is left to the server rather than guessed at.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def _is(value: Any, kind: str) -> bool:
    if kind in ("integer", "number") and isinstance(value, bool):
        return False  # JSON's true is not the number 1
    return isinstance(value, _TYPES.get(kind, (object,)))


def _date_time(text: str) -> bool:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return False
    return moment.tzinfo is not None


def schema_problems(schema: Mapping[str, Any], value: Any, where: str = "arguments") -> list[str]:
    """Each way ``value`` breaks ``schema``, in words naming the field (empty: it fits)."""
    if "anyOf" in schema:
        options = [schema_problems(option, value, where) for option in schema["anyOf"]]
        return [] if any(not found for found in options) else options[0]
    kind = schema.get("type")
    if isinstance(kind, str) and not _is(value, kind):
        return [f"{where} must be {'an' if kind[0] in 'aeiou' else 'a'} {kind}"]
    problems: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where} must be one of {', '.join(map(str, schema['enum']))}")
    if isinstance(value, str):
        if "pattern" in schema and re.search(schema["pattern"], value) is None:
            problems.append(f"{where} does not have the expected form")
        if len(value) < schema.get("minLength", 0):
            problems.append(f"{where} is too short")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            problems.append(f"{where} is too long")
        if schema.get("format") == "date-time" and not _date_time(value):
            problems.append(f"{where} must be an ISO 8601 time with a UTC offset")
    if _is(value, "number"):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{where} must be at least {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{where} must be at most {schema['maximum']}")
    if isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            problems.append(f"{where} has more than {schema['maxItems']} items")
        items = schema.get("items")
        if isinstance(items, Mapping):
            for index, item in enumerate(value):
                problems += schema_problems(items, item, f"{where}[{index}]")
    if isinstance(value, dict):
        properties: Mapping[str, Any] = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                problems.append(f"{where}.{name} is missing")
        for name, item in value.items():
            if name in properties:
                problems += schema_problems(properties[name], item, f"{where}.{name}")
            elif schema.get("additionalProperties") is False:
                problems.append(f"{where}.{name} is not an argument of this tool")
    return problems

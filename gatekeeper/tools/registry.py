"""The tool registry: built once at import, immutable afterwards.

There is no ``register`` at run time: the set of tools is code, reviewed like code, and an
agent can never add or reshape one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ValidationError

from gatekeeper.errors import ArgumentProblem, ToolArgumentsInvalid, ToolUnknown
from gatekeeper.tools.catalogue import STARTER_TOOLS
from gatekeeper.tools.spec import ToolSpec

# Arguments larger than this (as JSON) are refused before parsing; the biggest legitimate
# call (an artifact body of 20k characters, up to 4 bytes each) fits well inside.
MAX_ARGUMENTS_BYTES = 128 * 1024
MAX_PROBLEMS = 20


def registry_build(specs: Iterable[ToolSpec]) -> Mapping[str, ToolSpec]:
    """A read-only name -> spec mapping; duplicate names are a programming error."""
    table: dict[str, ToolSpec] = {}
    for spec in specs:
        if spec.name in table:
            raise ValueError(f"tool {spec.name!r} is registered twice")
        table[spec.name] = spec
    return MappingProxyType(table)


_REGISTRY: Mapping[str, ToolSpec] = registry_build(STARTER_TOOLS)


def tool_get(name: str) -> ToolSpec | None:
    """The registered tool called ``name``, or None."""
    return _REGISTRY.get(name)


def tools_all() -> tuple[ToolSpec, ...]:
    """Every registered tool, sorted by name."""
    return tuple(_REGISTRY[name] for name in sorted(_REGISTRY))


def tool_names() -> frozenset[str]:
    return frozenset(_REGISTRY)


def spec_arguments_validate(*, spec: ToolSpec, arguments: Any) -> BaseModel:
    """Validate JSON-shaped ``arguments`` (a dict decoded from an agent's typed message)
    against ``spec``'s input schema. Raises ``ToolArgumentsInvalid`` listing each problem.

    Validation goes through JSON in strict mode, so what is checked is exactly what an agent
    can send: no coercion, integers only, ISO datetimes with an offset, no extra fields.
    """
    if not isinstance(arguments, dict):
        raise ToolArgumentsInvalid(
            tool=spec.name,
            problems=(ArgumentProblem(path="", message="arguments must be a JSON object"),),
        )
    try:
        # allow_nan=False: NaN/Infinity are not JSON and never reach a schema.
        raw = json.dumps(arguments, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ToolArgumentsInvalid(
            tool=spec.name,
            problems=(ArgumentProblem(path="", message=f"arguments must be plain JSON ({exc})"),),
        ) from None
    try:
        raw.encode()
    except UnicodeEncodeError:
        # A lone surrogate (JSON allows its escape, UTF-8 cannot hold it): not text.
        raise ToolArgumentsInvalid(
            tool=spec.name,
            problems=(ArgumentProblem(path="", message="text must be valid Unicode"),),
        ) from None
    if "\\u0000" in raw:
        # PostgreSQL cannot store U+0000 in text; refuse it here so both profiles agree.
        raise ToolArgumentsInvalid(
            tool=spec.name,
            problems=(ArgumentProblem(path="", message="text must not contain U+0000"),),
        )
    if len(raw.encode()) > MAX_ARGUMENTS_BYTES:
        raise ToolArgumentsInvalid(
            tool=spec.name,
            problems=(
                ArgumentProblem(path="", message=f"arguments exceed {MAX_ARGUMENTS_BYTES} bytes"),
            ),
        )
    try:
        return spec.input_model.model_validate_json(raw, strict=True)
    except ValidationError as exc:
        problems = tuple(
            ArgumentProblem(path=".".join(str(p) for p in error["loc"]), message=error["msg"])
            for error in exc.errors(include_url=False, include_input=False)[:MAX_PROBLEMS]
        )
        raise ToolArgumentsInvalid(tool=spec.name, problems=problems) from None


def tool_arguments_validate(*, tool: str, arguments: Any) -> BaseModel:
    """Validate ``arguments`` for the registered tool ``tool``.

    Raises ``ToolUnknown`` for an unregistered name and ``ToolArgumentsInvalid`` (field paths
    and messages) when the schema refuses them. Never parses free text into arguments.
    """
    spec = tool_get(tool)
    if spec is None:
        raise ToolUnknown(f"No tool called {tool[:64]!r}.")
    return spec_arguments_validate(spec=spec, arguments=arguments)

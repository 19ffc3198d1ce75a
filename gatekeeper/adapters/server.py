"""The adapter for tools the server runs itself, in-process, from the room's own data.

``venues_search`` reads the room's venue catalogue; ``declare_no_plan`` records this side's
"no agreement" (the executed action is the record). Neither reaches an owner's webhook or
the world. Exactly-once comes from the action record (one per idempotency key, replays
return its stored outcome), so this adapter keeps no rows of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel

from dining import Catalogue, venues_search
from gatekeeper.adapters.calls import PreparedAdapter, PreparedCall
from gatekeeper.adapters.outcomes import (
    AdapterOutcome,
    ExecutionContext,
    Succeeded,
    outcome_refused,
)
from gatekeeper.decision import Decision, room_catalogue
from gatekeeper.tools import catalogue as c


def _venues_search(a: Any, catalogue: Catalogue | None) -> BaseModel:
    assert catalogue is not None
    page = venues_search(
        catalogue,
        cuisines=a.cuisines,
        neighbourhoods=a.neighbourhoods,
        max_price_per_person_minor=a.max_price_per_person_minor,
        safe_for=a.safe_for,
        limit=a.limit,
        offset=a.offset,
    )
    return c.VenuesSearchOut(
        catalogue=catalogue.id,
        city=catalogue.city,
        venues=list(page.venues),
        total=page.total,
        next_offset=page.next_offset,
    )


def _declare_no_plan(a: Any, catalogue: Catalogue | None) -> BaseModel:
    return c.DeclareNoPlanOut(reason=a.reason)


SERVER_EFFECTS: Mapping[str, Callable[[Any, Catalogue | None], BaseModel]] = MappingProxyType(
    {"venues_search": _venues_search, "declare_no_plan": _declare_no_plan}
)
NEEDS_CATALOGUE = frozenset({"venues_search"})


class ServerToolAdapter(PreparedAdapter):
    """Runs a server-executed tool against the room's terms (their JSON form)."""

    name = "server"

    def __init__(self, *, terms: Mapping[str, Any] | None) -> None:
        self.terms = terms

    def _run(self, prepared: PreparedCall, context: ExecutionContext) -> AdapterOutcome:
        spec = prepared.spec
        effect = SERVER_EFFECTS.get(spec.name)
        if effect is None:
            return outcome_refused("server_unsupported", f"The server does not run {spec.name}.")
        catalogue: Catalogue | None = None
        if spec.name in NEEDS_CATALOGUE:
            found = room_catalogue(self.terms)
            if isinstance(found, Decision):
                return outcome_refused("catalogue_unavailable", found.detail)
            catalogue = found[0]
        result = effect(prepared.model, catalogue)
        # Checked against the tool's own output schema: what we return is what we publish.
        output = spec.output_model.model_validate(result.model_dump(by_alias=True))
        return Succeeded(output=output.model_dump(mode="json", by_alias=True))

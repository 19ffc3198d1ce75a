"""The adapter for tools the server runs itself, in-process, from the room's own data.

``venues_search`` reads the room's venue catalogue; ``declare_no_plan`` records this side's
"no agreement" (the executed action is the record); ``publish_artifact`` stores a shared
artifact in the room, sealed under the room's data key (``artifacts.services``). None reaches
an owner's webhook or the world: whatever adapter an owner configured, a publish is stored
here. Exactly-once comes from the action record (one per idempotency key, replays return its
stored outcome) and, for an artifact, from its unique action key, so this adapter keeps no
rows of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from django.db import transaction
from pydantic import BaseModel

from dining import Catalogue, venues_search
from gatekeeper.adapters.calls import PreparedAdapter, PreparedCall
from gatekeeper.adapters.outcomes import (
    AdapterOutcome,
    ExecutionContext,
    Refused,
    Succeeded,
    outcome_refused,
)
from gatekeeper.decision import Decision, room_catalogue
from gatekeeper.tools import catalogue as c
from gatekeeper.tools.spec import ToolSpec


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


def _publish_artifact(a: Any, key: str, context: ExecutionContext) -> BaseModel | Refused:
    """Store the artifact (or find the one this call stored): its output, or a refusal."""
    # Imported here: artifacts sits above gatekeeper (it reads rooms and fences text).
    from artifacts.services import ArtifactRefused, artifact_publish

    try:
        published = artifact_publish(
            room_id=context.room_id,
            agent_id=context.agent_id,
            owner_id=context.owner_id,
            action_key=key,
            title=a.title,
            body=a.body,
            media_format=a.format,
        )
    except ArtifactRefused as refused:
        return outcome_refused(f"artifact_{refused.code}", refused.message)
    return c.PublishArtifactOut(
        artifact_id=f"art-{published.artifact_id.hex}", body_sha256=published.body_sha256
    )


SERVER_EFFECTS: Mapping[str, Callable[[Any, Catalogue | None], BaseModel]] = MappingProxyType(
    {"venues_search": _venues_search, "declare_no_plan": _declare_no_plan}
)
NEEDS_CATALOGUE = frozenset({"venues_search"})
# Effects that act in the room itself and need to know where (the room, the agent, its owner).
ROOM_EFFECTS: Mapping[str, Callable[[Any, str, ExecutionContext], BaseModel | Refused]] = (
    MappingProxyType({"publish_artifact": _publish_artifact})
)


class ServerToolAdapter(PreparedAdapter):
    """Runs a server-executed tool against the room's terms (their JSON form)."""

    name = "server"

    def __init__(self, *, terms: Mapping[str, Any] | None) -> None:
        self.terms = terms

    def _run(self, prepared: PreparedCall, context: ExecutionContext) -> AdapterOutcome:
        spec = prepared.spec
        room_effect = ROOM_EFFECTS.get(spec.name)
        if room_effect is not None:
            with transaction.atomic():
                # A savepoint: a refusal or a failed output check stores no artifact.
                made = room_effect(prepared.model, prepared.idempotency_key, context)
                if isinstance(made, Refused):
                    return made
                return Succeeded(output=self._checked(spec, made))
        effect = SERVER_EFFECTS.get(spec.name)
        if effect is None:
            return outcome_refused("server_unsupported", f"The server does not run {spec.name}.")
        catalogue: Catalogue | None = None
        if spec.name in NEEDS_CATALOGUE:
            found = room_catalogue(self.terms)
            if isinstance(found, Decision):
                return outcome_refused("catalogue_unavailable", found.detail)
            catalogue = found[0]
        return Succeeded(output=self._checked(spec, effect(prepared.model, catalogue)))

    @staticmethod
    def _checked(spec: ToolSpec, result: BaseModel) -> dict[str, Any]:
        # Checked against the tool's own output schema: what we return is what we publish.
        output = spec.output_model.model_validate(result.model_dump(by_alias=True))
        return output.model_dump(mode="json", by_alias=True)

"""What the turn-decision tests share: a slip's capability records as the owner signs them,
a turn decided from the record (``decide_turn_guarded``), its rules by item, and a slip's
stored column changed behind the application's back (as an attacker with the database would)."""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction

from gatekeeper.decision import RoomFacts, TurnDecisions, TurnDisclosures, decide_turn_guarded
from slips.models import Slip

SOON = 600  # seconds: the short-lived capability's lifetime


def capability_record(kind: str, operation: str, recipient: str, **extra: Any) -> dict[str, Any]:
    """One record of a slip's payload, 50 uses, no approval (``extra`` overrides)."""
    scope = {"neighbourhood": "name", "budget": "range"}.get(kind, "list")
    return {
        "resource": kind,
        "operation": operation,
        "recipient": recipient,
        "scope": scope,
        "approval": "none",
        "max_uses": 50,
        **extra,
    }


def turn_decided(setup: Any, tier: str = "collaborative") -> TurnDecisions:
    """The turn of B's agent (A's the other seat), decided in its own transaction (the
    turn's read locks the use counters)."""
    with transaction.atomic():
        return decide_turn_guarded(
            TurnDisclosures(
                room=RoomFacts(room_id=setup.room.id, state="open"),
                recipient_agent_id=setup.b.agent.id,
                recipient_owner_id=setup.b.owner.pk,
                recipient_revoked=False,
                recipient_active=True,
                peer=(setup.a.owner.pk, setup.a.agent.id),
                tier=tier,
            )
        )


def turn_rules(decided: TurnDecisions) -> dict[tuple[str, str], str]:
    """Each item's rule, by (recipient, kind)."""
    return {(d.request.recipient, d.request.resource): d.decision.rule for d in decided.items}


def slip_column(slip: Slip, column: str, value: Any) -> None:
    """Write one stored column of ``slip`` with plain SQL (no model, no signal)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Slip._meta.db_table} SET {column} = %s WHERE id = %s",  # noqa: S608
            [value, Slip._meta.pk.get_db_prep_value(slip.id, connection)],
        )

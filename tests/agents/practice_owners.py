"""What a practice room's owners keep from the other side, for the leak checks of the tests
that seat an outside agent (MCP, A2A) in a real practice room."""

from __future__ import annotations

from django.utils import timezone

from bench.eval.scenarios import Owner
from practice import scenario


def practice_withheld(role: scenario.Role) -> tuple[Owner, list[str]]:
    """What a practice room owner keeps from the other side: the budget (demo-alice's goes to
    her own agent only; demo-bob's too, with ``guest_shares_budget=False``), as the leak
    checks know it, and the private words of the vault (calendar titles, the budget's note),
    which never leave it."""
    vault = {item["kind"]: item for item in scenario.vault_items(role, timezone.now())}
    budget = vault["budget"]
    owner = Owner(
        busy=(),
        currency=budget["currency"],
        budget_min=budget["minimum"],
        budget_max=budget["maximum"],
        likes=(),
        dislikes=(),
        allergies=(),
        home="",
        sharing={"budget": "withheld"},
    )
    return owner, [w["title"] for w in vault["availability"]["busy"]] + [budget["notes"]]

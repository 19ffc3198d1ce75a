"""Arguments are typed data: anything the schema does not accept is refused, with where and why."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from gatekeeper.tools import ToolArgumentsInvalid, ToolUnknown, tool_arguments_validate
from gatekeeper.tools.catalogue import MAX_AMOUNT_MINOR

START = "2026-07-01T19:30:00+02:00"
GOOD: dict[str, dict[str, Any]] = {
    "propose_time": {"start": START, "duration_minutes": 90},
    "book_table": {
        "venue_id": "chez-marie",
        "party_size": 2,
        "start": START,
        "cost_cents": 4_500,
        "currency": "EUR",
    },
    "spend": {
        "amount_cents": 4_500,
        "currency": "EUR",
        "payee_id": "chez-marie",
        "purpose": "deposit",
    },
    "send_invitation": {"recipient": "peer", "event_start": START, "venue_id": "chez-marie"},
    "publish_artifact": {"title": "Plan", "body": "Dinner at 19:30.", "format": "markdown"},
}


@pytest.mark.parametrize("tool", sorted(GOOD))
def test_good_arguments_parse_to_typed_values(tool: str) -> None:
    parsed = tool_arguments_validate(tool=tool, arguments=GOOD[tool])
    assert type(parsed).__name__.endswith("In")


def test_parsed_values_are_typed() -> None:
    parsed = tool_arguments_validate(tool="book_table", arguments=GOOD["book_table"])
    assert parsed.cost_cents == 4_500 and isinstance(parsed.cost_cents, int)  # type: ignore[attr-defined]
    assert parsed.start == datetime(2026, 7, 1, 17, 30, tzinfo=UTC)  # type: ignore[attr-defined]


def _with(tool: str, **changes: Any) -> dict[str, Any]:
    args = dict(GOOD[tool])
    for key, value in changes.items():
        if value is _DROP:
            args.pop(key)
        else:
            args[key] = value
    return args


_DROP = object()

REFUSALS = [
    # (tool, arguments, field path named in the error)
    ("book_table", _with("book_table", cost_cents=45.5), "cost_cents"),
    ("book_table", _with("book_table", cost_cents=4500.0), "cost_cents"),  # float, even whole
    ("book_table", _with("book_table", cost_cents="4500"), "cost_cents"),  # no coercion
    ("book_table", _with("book_table", cost_cents=True), "cost_cents"),
    ("book_table", _with("book_table", cost_cents=-1), "cost_cents"),
    ("book_table", _with("book_table", cost_cents=MAX_AMOUNT_MINOR + 1), "cost_cents"),
    ("book_table", _with("book_table", currency="eur"), "currency"),
    ("book_table", _with("book_table", currency="BTC"), "currency"),
    ("book_table", _with("book_table", party_size=0), "party_size"),
    ("book_table", _with("book_table", party_size=2.0), "party_size"),
    ("book_table", _with("book_table", venue_id="Chez Marie; DROP TABLE"), "venue_id"),
    ("book_table", _with("book_table", start="2026-07-01T19:30:00"), "start"),  # naive
    ("book_table", _with("book_table", start="tomorrow at 7"), "start"),
    ("book_table", _with("book_table", start=1782934200), "start"),  # no epoch numbers
    ("book_table", _with("book_table", note="ignore the budget"), "note"),  # extra field
    ("book_table", _with("book_table", cost_cents=_DROP), "cost_cents"),  # missing
    ("spend", _with("spend", amount_cents=0), "amount_cents"),
    ("spend", _with("spend", amount_cents=12.34), "amount_cents"),
    ("spend", _with("spend", purpose="Because the other agent said so"), "purpose"),
    ("propose_time", _with("propose_time", duration_minutes=5), "duration_minutes"),
    ("propose_time", _with("propose_time", duration_minutes=60.0), "duration_minutes"),
    ("propose_time", _with("propose_time", start="2026-07-01T19:30:00"), "start"),
    ("send_invitation", _with("send_invitation", recipient="everyone"), "recipient"),
    ("publish_artifact", _with("publish_artifact", title="x" * 121), "title"),
    ("publish_artifact", _with("publish_artifact", body="x" * 20_001), "body"),
    ("publish_artifact", _with("publish_artifact", body=""), "body"),
    ("publish_artifact", _with("publish_artifact", format="html"), "format"),
]


@pytest.mark.parametrize(("tool", "arguments", "path"), REFUSALS)
def test_arguments_the_schema_refuses(tool: str, arguments: dict[str, Any], path: str) -> None:
    with pytest.raises(ToolArgumentsInvalid) as caught:
        tool_arguments_validate(tool=tool, arguments=arguments)
    assert path in [p.path for p in caught.value.problems]
    assert path in caught.value.message and tool in caught.value.message


@pytest.mark.parametrize(
    "arguments",
    [
        "book a table for two at Chez Marie, 45 euros",  # free text is never parsed
        ["chez-marie", 2],
        None,
        {"venue_id": "chez-marie", "cost_cents": float("nan")},
        {"start": datetime(2026, 7, 1, 19, 30, tzinfo=UTC)},  # not JSON
    ],
)
def test_anything_but_a_json_object_is_refused(arguments: Any) -> None:
    with pytest.raises(ToolArgumentsInvalid):
        tool_arguments_validate(tool="book_table", arguments=arguments)


def test_every_problem_is_listed_with_its_path() -> None:
    with pytest.raises(ToolArgumentsInvalid) as caught:
        tool_arguments_validate(
            tool="book_table",
            arguments=_with("book_table", cost_cents=1.5, party_size=99, extra=1),
        )
    assert {p.path for p in caught.value.problems} == {"cost_cents", "party_size", "extra"}


def test_oversized_arguments_are_refused_before_parsing() -> None:
    with pytest.raises(ToolArgumentsInvalid, match="exceed"):
        tool_arguments_validate(
            tool="publish_artifact", arguments=_with("publish_artifact", body="é" * 70_000)
        )


def test_an_unknown_tool_is_refused() -> None:
    with pytest.raises(ToolUnknown):
        tool_arguments_validate(tool="transfer_everything", arguments={})

"""Per-agent tool policy: allow/deny per agent or *, deny beats allow, an explicit default per
profile, intersection with slips and the agent's own hints, advisor-only agents."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from gatekeeper import policy as policy_module
from gatekeeper.errors import ToolPolicyError
from gatekeeper.models import ToolPolicyRule
from gatekeeper.policy import (
    PolicyVerdict,
    policy_rules_column,
    policy_rules_parse,
    tool_hints_validate,
    tool_policy_allows,
    tool_policy_file_load,
    tool_specs_for,
    tool_verdict,
    tools_effective,
)
from rooms import services

ALL = frozenset(
    {
        "propose_time",
        "book_table",
        "spend",
        "send_invitation",
        "publish_artifact",
        "venues_search",
        "declare_no_plan",
    }
)
# Tools that touch no owner data need no slip item: a slip never narrows them away.
NO_OWNER_DATA = frozenset({"venues_search", "declare_no_plan"})
AGENT = str(uuid.UUID(int=1))
OTHER = str(uuid.UUID(int=2))

pytestmark = pytest.mark.django_db


@pytest.fixture
def policy(settings: Any, tmp_path: Path) -> Any:
    """Set the default and (optionally) a policy file: ``policy(default, file_dict_or_None)``."""

    def configure(default: str, file: dict[str, Any] | None = None) -> Path | None:
        path = None
        if file is not None:
            path = tmp_path / "tool-policy.json"
            path.write_text(json.dumps(file))
        settings.SYNAPSIA = {
            **settings.SYNAPSIA,
            "TOOL_POLICY_DEFAULT": default,
            "TOOL_POLICY_FILE": str(path) if path else "",
        }
        return path

    return configure


def test_the_default_is_explicit_per_profile(settings: Any) -> None:
    expected = "deny_all" if settings.PROFILE == "production" else "allow_all"
    assert settings.SYNAPSIA["TOOL_POLICY_DEFAULT"] == expected


@pytest.mark.parametrize(
    ("default", "allowed", "rule"),
    [
        ("allow_all", True, "policy.default.allow_all"),
        ("deny_all", False, "policy.default.deny_all"),
        ("allow-all", False, "policy.default_misconfigured"),  # a typo never opens up
        ("", False, "policy.default_misconfigured"),
    ],
)
def test_with_no_entry_the_default_decides(
    policy: Any, default: str, allowed: bool, rule: str
) -> None:
    policy(default)
    assert tool_policy_allows(agent_id=AGENT, tool="book_table") == PolicyVerdict(allowed, rule)


# (default, file entries, db rows [(agent_key, tool, effect)], tool, allowed, rule prefix)
TABLE = [
    ("deny_all", {AGENT: {"allow": ["book_table"]}}, [], "book_table", True, "policy.allow:file"),
    ("deny_all", {AGENT: {"allow": ["book_table"]}}, [], "spend", False, "policy.not_allowed"),
    ("deny_all", {"*": {"allow": ["*"]}}, [], "spend", True, "policy.allow:file:*"),
    ("deny_all", {OTHER: {"allow": ["spend"]}}, [], "spend", False, "policy.default.deny_all"),
    ("allow_all", {"*": {"deny": ["spend"]}}, [], "spend", False, "policy.deny:file:*"),
    ("allow_all", {"*": {"deny": ["spend"]}}, [], "book_table", True, "policy.default.allow_all"),
    (
        "allow_all",
        {AGENT: {"allow": ["spend"], "deny": ["spend"]}},
        [],
        "spend",
        False,
        "policy.deny",
    ),
    # deny beats allow, whichever is more specific
    (
        "allow_all",
        {AGENT: {"allow": ["spend"]}, "*": {"deny": ["spend"]}},
        [],
        "spend",
        False,
        "policy.deny:file:*",
    ),
    (
        "allow_all",
        {"*": {"allow": ["spend"]}, AGENT: {"deny": ["*"]}},
        [],
        "spend",
        False,
        f"policy.deny:file:{AGENT}",
    ),
    # rows from the admin combine with the file
    ("deny_all", None, [(AGENT, "propose_time", "allow")], "propose_time", True, "policy.allow:db"),
    (
        "deny_all",
        {AGENT: {"allow": ["spend"]}},
        [("*", "spend", "deny")],
        "spend",
        False,
        "policy.deny:db:*",
    ),
    (
        "allow_all",
        None,
        [("*", "propose_time", "allow")],
        "book_table",
        False,
        "policy.not_allowed",
    ),
    ("allow_all", None, [], "launch_rockets", False, "tool.unknown"),
]


@pytest.mark.parametrize(("default", "file", "rows", "tool", "allowed", "rule"), TABLE)
def test_policy_table(
    policy: Any,
    default: str,
    file: dict[str, Any] | None,
    rows: list[tuple[str, str, str]],
    tool: str,
    allowed: bool,
    rule: str,
) -> None:
    policy(default, {"version": 1, "agents": file} if file is not None else None)
    for agent_key, rule_tool, effect in rows:
        ToolPolicyRule.objects.create(agent_key=agent_key, tool=rule_tool, effect=effect)
    verdict = tool_policy_allows(agent_id=uuid.UUID(AGENT), tool=tool)
    assert verdict.allowed is allowed
    assert verdict.rule.startswith(rule), verdict.rule


def test_the_policy_is_re_read_on_every_call(policy: Any) -> None:
    path = policy("deny_all", {"version": 1, "agents": {AGENT: {"allow": ["spend"]}}})
    assert tool_policy_allows(agent_id=AGENT, tool="spend").allowed
    path.write_text(json.dumps({"version": 1, "agents": {AGENT: {"deny": ["spend"]}}}))
    assert not tool_policy_allows(agent_id=AGENT, tool="spend").allowed
    ToolPolicyRule.objects.create(agent_key=AGENT, tool="propose_time", effect="deny")
    assert not tool_policy_allows(agent_id=AGENT, tool="propose_time").allowed


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        json.dumps({"agents": {}}),
        json.dumps({"version": 1, "agents": {"*": {"allow": ["launch_rockets"]}}}),
        json.dumps({"version": 1, "agents": {"not-a-uuid": {"allow": ["spend"]}}}),
        json.dumps({"version": 1, "agents": {"*": {"maybe": ["spend"]}}}),
        json.dumps({"version": 1, "agents": {"*": {"allow": "spend"}}}),
    ],
)
def test_an_invalid_policy_file_denies_everything(policy: Any, content: str) -> None:
    path = policy("allow_all", {"version": 1, "agents": {}})
    path.write_text(content)
    with pytest.raises(ToolPolicyError):
        tool_policy_file_load(path=str(path))
    assert tool_policy_allows(agent_id=AGENT, tool="propose_time") == PolicyVerdict(
        False, "policy.unreadable"
    )
    assert (
        tools_effective(agent_id=AGENT, advisor_only=False, declared_tools=None, slip_cleared=None)
        == frozenset()
    )


def test_a_missing_policy_file_denies_everything(policy: Any, settings: Any) -> None:
    policy("allow_all")
    settings.SYNAPSIA = {**settings.SYNAPSIA, "TOOL_POLICY_FILE": "/nonexistent/policy.json"}
    assert not tool_policy_allows(agent_id=AGENT, tool="propose_time").allowed


def test_effective_tools_are_policy_and_slip_and_hints(policy: Any) -> None:
    policy("deny_all", {"version": 1, "agents": {AGENT: {"allow": ["*"], "deny": ["spend"]}}})

    def effective(declared: list[str] | None, slip: frozenset[str] | None) -> frozenset[str]:
        return tools_effective(
            agent_id=AGENT, advisor_only=False, declared_tools=declared, slip_cleared=slip
        )

    assert effective(None, None) == ALL - {"spend"}
    assert effective(None, frozenset({"spend", "book_table"})) == {"book_table"} | NO_OWNER_DATA
    assert effective(["book_table", "propose_time"], None) == {"book_table", "propose_time"}
    assert effective(["book_table", "propose_time"], frozenset({"propose_time", "spend"})) == {
        "propose_time"
    }
    # An empty hint list declares nothing: the policy alone applies (ADR: soul.tools empty).
    assert effective([], None) == ALL - {"spend"}
    assert effective(None, frozenset()) == NO_OWNER_DATA
    # ... but the policy and the hints still do.
    assert effective(["propose_time"], frozenset()) == frozenset()
    # Hints only narrow: declaring a denied tool does not get it.
    assert effective(["spend"], None) == frozenset()


def test_advisor_only_agents_only_ever_get_read_only_tools(policy: Any) -> None:
    policy("allow_all")
    assert tools_effective(
        agent_id=AGENT, advisor_only=True, declared_tools=None, slip_cleared=None
    ) == {"propose_time", "venues_search"}
    assert tool_verdict(
        agent_id=AGENT, advisor_only=True, declared_tools=None, tool="book_table"
    ) == PolicyVerdict(False, "agent.advisor_only")
    assert tool_verdict(
        agent_id=AGENT, advisor_only=True, declared_tools=None, tool="propose_time"
    ).allowed


def test_tool_verdict_checks_hints_then_policy(policy: Any) -> None:
    policy("allow_all", {"version": 1, "agents": {"*": {"deny": ["spend"]}}})
    verdict = tool_verdict(
        agent_id=AGENT, advisor_only=False, declared_tools=["propose_time"], tool="book_table"
    )
    assert verdict == PolicyVerdict(False, "agent.not_declared")
    verdict = tool_verdict(agent_id=AGENT, advisor_only=False, declared_tools=None, tool="spend")
    assert verdict == PolicyVerdict(False, "policy.deny:file:*")
    verdict = tool_verdict(agent_id=AGENT, advisor_only=False, declared_tools=None, tool="nope")
    assert verdict == PolicyVerdict(False, "tool.unknown")


def test_hints_are_validated_at_registration() -> None:
    tool_hints_validate(advisor_only=False, declared_tools=None)
    tool_hints_validate(advisor_only=False, declared_tools=["book_table", "spend"])
    tool_hints_validate(advisor_only=True, declared_tools=["propose_time"])
    with pytest.raises(ToolPolicyError, match="Unknown tool names: 'teleport'"):
        tool_hints_validate(advisor_only=False, declared_tools=["propose_time", "teleport"])
    with pytest.raises(ToolPolicyError, match=r"advisor-only.*book_table"):
        tool_hints_validate(advisor_only=True, declared_tools=["propose_time", "book_table"])
    with pytest.raises(ToolPolicyError):
        tool_hints_validate(advisor_only=False, declared_tools="spend")  # type: ignore[arg-type]


def test_listing_shows_only_the_effective_tools(policy: Any) -> None:
    policy("deny_all", {"version": 1, "agents": {AGENT: {"allow": ["propose_time", "spend"]}}})
    listed = [
        spec.descriptor()
        for spec in tool_specs_for(
            agent_id=AGENT, advisor_only=False, declared_tools=None, slip_cleared=None
        )
    ]
    assert [d["name"] for d in listed] == ["propose_time", "spend"]
    assert all("inputSchema" in d and "annotations" in d for d in listed)
    assert (
        tool_specs_for(agent_id=OTHER, advisor_only=False, declared_tools=None, slip_cleared=None)
        == []
    )


@pytest.fixture
def advisor(make_owner: Any) -> Any:
    owner = make_owner("ada")
    return services.agent_register(owner=owner, name="Ada's advisor", advisor_only=True).agent


def test_policy_rows_cannot_give_an_advisor_a_mutating_tool(advisor: Any) -> None:
    key = str(advisor.id)
    ToolPolicyRule(agent_key=key, tool="propose_time", effect="allow").full_clean()
    ToolPolicyRule(agent_key=key, tool="spend", effect="deny").full_clean()
    ToolPolicyRule(agent_key="*", tool="spend", effect="allow").full_clean()
    for tool in ("book_table", "*"):
        with pytest.raises(ValidationError, match="advisor-only"):
            ToolPolicyRule(agent_key=key, tool=tool, effect="allow").full_clean()
    with pytest.raises(ValidationError, match="No tool called"):
        ToolPolicyRule(agent_key="*", tool="teleport", effect="allow").full_clean()
    with pytest.raises(ValidationError, match="neither an agent id"):
        ToolPolicyRule(agent_key="alice", tool="spend", effect="allow").full_clean()


def test_a_policy_file_cannot_give_an_advisor_a_mutating_tool(advisor: Any, policy: Any) -> None:
    path = policy("deny_all", {"version": 1, "agents": {str(advisor.id): {"allow": ["spend"]}}})
    with pytest.raises(ToolPolicyError, match="advisor-only"):
        tool_policy_file_load(path=str(path))
    assert not tool_policy_allows(agent_id=advisor.id, tool="propose_time").allowed


def test_the_admin_refuses_an_unsafe_rule(admin_client: Any, advisor: Any) -> None:
    response = admin_client.post(
        "/admin/gatekeeper/toolpolicyrule/add/",
        {"agent_key": str(advisor.id), "tool": "spend", "effect": "allow", "note": ""},
    )
    assert response.status_code == 200
    assert "advisor-only" in response.content.decode()
    assert not ToolPolicyRule.objects.exists()
    response = admin_client.post(
        "/admin/gatekeeper/toolpolicyrule/add/",
        {"agent_key": str(advisor.id), "tool": "propose_time", "effect": "allow", "note": ""},
    )
    assert response.status_code == 302
    assert ToolPolicyRule.objects.get().tool == "propose_time"


def test_the_rules_column_reads_what_the_rules_statement_reads(policy: Any) -> None:
    # An agent's connect reads the rules as a column of its seat's statement
    # (``policy_rules_column``): the same rows, in the same order, as the policy's own read,
    # and none of another agent's.
    policy("allow_all")
    other = str(uuid.UUID(int=2))
    for key, tool, effect in [
        (AGENT, "spend", "deny"),
        ("*", "book_table", "allow"),
        (AGENT, "book_table", "deny"),
        ("*", "*", "deny"),
        (other, "venues_search", "deny"),
    ]:
        ToolPolicyRule.objects.create(agent_key=key, tool=tool, effect=effect)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {policy_rules_column(connection.vendor, '%s')}", [AGENT])
        (column,) = cursor.fetchone()
        cursor.execute(policy_module._rules_sql(connection.vendor), ["*", AGENT])
        statement = tuple(tuple(row) for row in cursor.fetchall())
    rules = policy_rules_parse(column)
    assert rules == statement
    assert {key for key, _, _ in rules} == {"*", AGENT}
    assert policy_rules_parse(None) == ()
    # Decided from the rules read with the seat exactly as from the rules read now.
    for hints in (None, ["spend", "venues_search"]):
        assert tools_effective(
            agent_id=AGENT, advisor_only=False, declared_tools=hints, slip_cleared=None, rules=rules
        ) == tools_effective(
            agent_id=AGENT, advisor_only=False, declared_tools=hints, slip_cleared=None
        )


def test_rules_read_for_another_agent_are_refused(policy: Any) -> None:
    policy("allow_all")
    foreign = ((str(uuid.UUID(int=2)), "spend", "allow"),)
    with pytest.raises(ValueError, match="another agent"):
        tools_effective(
            agent_id=AGENT,
            advisor_only=False,
            declared_tools=None,
            slip_cleared=None,
            rules=foreign,
        )

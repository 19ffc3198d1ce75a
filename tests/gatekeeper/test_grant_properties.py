"""Properties of one-action grants, through the real signing path (``rooms.forks.grant_decide``
over ``gatekeeper.grants``):

* a grant signed for action A with arguments X never verifies for another action, other
  arguments, or any other field of the signed payload, and a genuine signature for one grant
  never clears another;
* once a grant is consumed, denied or expired, nothing it names runs again, whatever is tried;
* two workers racing to approve the same grant execute its action exactly once.
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
import rfc8785
from django.db import connection, connections
from django.utils import timezone
from hypothesis import HealthCheck, assume, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from gatekeeper.actions import action_request, arguments_hash
from gatekeeper.adapters.sandbox import SandboxEffect
from gatekeeper.decision import AgentFacts, RoomFacts
from gatekeeper.grants import grant_payload, grants_expire
from gatekeeper.records import ActionRecord, ActionStatus, Grant, GrantStatus
from ledger.models import LedgerEvent
from rooms import forks
from rooms.errors import InvalidState
from slips.canonical import GRANT_TAG
from slips.signatures import b64url_encode
from tests.bookings import OVER, booking
from tests.gatekeeper.conftest import Negotiation
from tests.slips.conftest import Device

pytestmark = pytest.mark.django_db

PROPERTY_SETTINGS = hsettings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(autouse=True)
def _allow_tools_by_default(settings: Any) -> None:
    # The production default is deny-all; these tests are about grants, not policy.
    settings.SYNAPSIA = {**settings.SYNAPSIA, "TOOL_POLICY_DEFAULT": "allow_all"}


# --- strategies: well-formed calls of every starter tool ---------------------------------------

slugs = st.from_regex(r"[a-z0-9][a-z0-9-]{0,12}", fullmatch=True)
starts = st.sampled_from(
    ["2026-12-04T19:00:00+00:00", "2026-12-04T19:30:00+00:00", "2027-01-09T12:00:00+01:00"]
)
currencies = st.sampled_from(["EUR", "USD", "GBP", "CHF"])


def free_text(max_size: int) -> st.SearchStrategy[str]:
    # Without U+0000: the schema accepts it, but PostgreSQL cannot store it in a JSON column
    # (the insert fails before anything is decided for the owner): reported, not tested here.
    # Without lone surrogates: no frame can carry one (synapsia_protocol.wire refuses them)
    # and RFC 8785 cannot hash one, so the property's own arguments_hash raised on them.
    return st.text(
        st.characters(exclude_characters="\x00", exclude_categories=("Cs",)),
        min_size=1,
        max_size=max_size,
    )


tool_calls: st.SearchStrategy[tuple[str, dict[str, Any]]] = st.one_of(
    st.tuples(
        st.just("book_table"),
        st.fixed_dictionaries(
            {
                "venue_id": slugs,
                "party_size": st.integers(1, 20),
                "start": starts,
                "cost_cents": st.integers(0, 10_000_000),
                "currency": currencies,
            }
        ),
    ),
    st.tuples(
        st.just("spend"),
        st.fixed_dictionaries(
            {
                "amount_cents": st.integers(1, 10_000_000),
                "currency": currencies,
                "payee_id": slugs,
                "purpose": slugs,
            }
        ),
    ),
    st.tuples(
        st.just("propose_time"),
        st.fixed_dictionaries({"start": starts, "duration_minutes": st.integers(15, 480)}),
    ),
    st.tuples(
        st.just("send_invitation"),
        st.fixed_dictionaries(
            {
                "recipient": st.sampled_from(["self", "peer"]),
                "event_start": starts,
                "venue_id": slugs,
            }
        ),
    ),
    st.tuples(
        st.just("publish_artifact"),
        st.fixed_dictionaries(
            {
                "title": free_text(20),
                "body": free_text(40),
                "format": st.sampled_from(["markdown", "plain"]),
            }
        ),
    ),
)
# A change to any other signed field of the payload.
field_changes = st.one_of(
    st.tuples(st.sampled_from(["grant_id", "action_id", "room_id"]), st.uuids().map(str)),
    st.tuples(st.just("owner_id"), st.integers(1, 10**6).map(str)),
    st.tuples(st.just("expires_at"), st.integers(1, 2**40)),
    st.tuples(st.just("decision"), st.sampled_from(["deny", "approve_all", "Approve"])),
)


# --- helpers -----------------------------------------------------------------------------------


def sign_payload(device: Device, payload: dict[str, Any]) -> str:
    """What the owner's browser does: Ed25519 over GRANT_TAG + RFC 8785 of the payload."""
    return b64url_encode(device.signing_key.sign(GRANT_TAG + rfc8785.dumps(payload)).signature)


def over_budget_request(n: Negotiation, ref: str = "act-1") -> Grant:
    """Alice's agent books above her budget: the room pauses at a fork with one pending grant."""
    result = forks.action_for_agent(
        room_id=n.room.id,
        agent_id=n.setup.a.agent.id,
        client_id=ref,
        tool="book_table",
        arguments=booking(OVER),
    )
    assert (result.status, result.rule) == ("awaiting_grant", "over_budget")
    return Grant.objects.select_related("action").get(action_id=result.action_id)


def approve(n: Negotiation, grant: Grant, signature: str) -> Any:
    return forks.grant_decide(
        owner=n.setup.a.owner,
        room_id=n.room.id,
        grant_id=grant.id,
        approve=True,
        key_id=n.key.id,
        signature=signature,
    )


def agent_facts(n: Negotiation) -> AgentFacts:
    agent = n.setup.a.agent
    return AgentFacts(
        agent_id=agent.id,
        owner_id=n.setup.a.owner.pk,
        advisor_only=False,
        declared_tools=None,
        revoked=False,
    )


def executions() -> int:
    return SandboxEffect.objects.count()


# --- a grant is bound to one action with its exact arguments -------------------------------------


def test_a_grant_never_verifies_for_another_action_or_other_arguments(negotiation) -> None:
    grant = over_budget_request(negotiation)
    genuine = grant_payload(grant)

    @PROPERTY_SETTINGS
    @given(call=tool_calls)
    def signed_for_other_arguments(call: tuple[str, dict[str, Any]]) -> None:
        tool, arguments = call
        forged = {**genuine, "tool": tool, "arguments_sha256": arguments_hash(arguments)}
        assume(forged != genuine)
        result = approve(negotiation, grant, sign_payload(negotiation.device, forged))
        assert result.rule == "grant_bad_signature"
        assert Grant.objects.get(id=grant.id).status == GrantStatus.PENDING
        assert executions() == 0

    @PROPERTY_SETTINGS
    @given(change=field_changes)
    def signed_for_another_field(change: tuple[str, Any]) -> None:
        name, value = change
        forged = {**genuine, name: value}
        assume(forged != genuine)
        result = approve(negotiation, grant, sign_payload(negotiation.device, forged))
        assert result.rule == "grant_bad_signature"
        assert executions() == 0

    signature = negotiation.device.sign_grant(grant)
    action = grant.action

    @PROPERTY_SETTINGS
    @given(call=tool_calls)
    def genuine_signature_after_the_action_changed(call: tuple[str, dict[str, Any]]) -> None:
        # The owner signed for A/X; the pending action now says A'/X' (a tampered row, or a
        # bug that rewrote it). The signed bytes are rebuilt from the row, so the owner's
        # signature must no longer verify, and A'/X' must not run.
        tool, arguments = call
        digest = arguments_hash(arguments)
        assume((tool, digest) != (action.tool, action.arguments_hash))
        # Rewritten through the model: its arguments are sealed, and only a save seals them.
        rewrite(tool, arguments, digest)
        try:
            result = approve(negotiation, grant, signature)
            assert result.rule == "grant_bad_signature"
            assert executions() == 0
        finally:
            rewrite(action.tool, action.arguments, action.arguments_hash)

    def rewrite(tool: str, arguments: dict[str, Any], digest: str) -> None:
        row = ActionRecord.objects.get(id=action.id)
        row.tool, row.arguments, row.arguments_hash = tool, arguments, digest
        row.save(update_fields=["tool", "arguments", "arguments_hash"])

    signed_for_other_arguments()
    signed_for_another_field()
    genuine_signature_after_the_action_changed()
    # The same owner, key and grant with the genuine payload does verify: the refusals above
    # were about the payload, not the setup.
    done = approve(negotiation, grant, signature)
    assert (done.status, done.rule) == ("executed", "granted")
    assert executions() == 1


def test_a_genuine_signature_for_one_grant_never_clears_another(negotiation) -> None:
    first = over_budget_request(negotiation)
    signature = negotiation.device.sign_grant(first)
    refs = itertools.count()

    @PROPERTY_SETTINGS
    @given(call=tool_calls)
    def check(call: tuple[str, dict[str, Any]]) -> None:
        tool, arguments = call
        # Another pending grant, for another call (the gatekeeper records it whatever the
        # room's pause state; nothing else in her slip clears these).
        result = action_request(
            room=RoomFacts(room_id=negotiation.room.id, state="open"),
            agent=agent_facts(negotiation),
            tool=tool,
            arguments=arguments,
            idempotency_key=f"other-{next(refs)}",
        )
        if result.status != ActionStatus.AWAITING_GRANT:
            # Within her slip and budget: it ran with no grant at all, which is not what this
            # property is about. Count it out of the executions that follow.
            assume(False)
        other = Grant.objects.select_related("action").get(action_id=result.action_id)
        before = executions()
        refused = approve(negotiation, other, signature)
        assert refused.rule == "grant_bad_signature"
        assert Grant.objects.get(id=other.id).status == GrantStatus.PENDING
        assert ActionRecord.objects.get(id=other.action_id).status == ActionStatus.AWAITING_GRANT
        assert executions() == before

    check()
    assert Grant.objects.get(id=first.id).status == GrantStatus.PENDING


# --- a used, denied or expired grant never allows anything again ---------------------------------


def _end(n: Negotiation, grant: Grant, how: str) -> None:
    if how == "consumed":
        assert approve(n, grant, n.device.sign_grant(grant)).status == "executed"
    elif how == "denied":
        forks.grant_decide(
            owner=n.setup.a.owner, room_id=n.room.id, grant_id=grant.id, approve=False
        )
    else:  # the deadline passes unanswered
        ttl = timedelta(seconds=1) + (grant.expires_at - timezone.now())
        assert grants_expire(now=timezone.now() + ttl) == 1
    grant.refresh_from_db()
    assert grant.status == how


ATTEMPTS = st.sampled_from(
    [
        "approve_genuine",  # the signature the owner would have made for it
        "approve_extended",  # a payload with a later deadline
        "approve_other_key",  # a second live key of the same owner
        "deny",
        "replay_request",  # the agent sends the same request (same idempotency key) again
    ]
)


@pytest.mark.parametrize("how", ["consumed", "denied", "expired"])
def test_an_ended_grant_never_allows_anything_again(negotiation, how: str) -> None:
    from tests.slips.conftest import enroll

    grant = over_budget_request(negotiation)
    _end(negotiation, grant, how)
    record = ActionRecord.objects.get(id=grant.action_id)
    status_after, ran = record.status, executions()
    assert ran == (1 if how == "consumed" else 0)
    second_key, second_device = enroll(negotiation.setup.a.owner, label="phone")
    genuine = grant_payload(grant)

    @PROPERTY_SETTINGS
    @given(attempts=st.lists(ATTEMPTS, min_size=1, max_size=4))
    def check(attempts: list[str]) -> None:
        for attempt in attempts:
            if attempt == "replay_request":
                again = forks.action_for_agent(
                    room_id=negotiation.room.id,
                    agent_id=negotiation.setup.a.agent.id,
                    client_id="act-1",
                    tool="book_table",
                    arguments=booking(OVER),
                )
                assert again.replay and again.status == status_after
                continue
            with pytest.raises(InvalidState, match="already"):
                if attempt == "deny":
                    forks.grant_decide(
                        owner=negotiation.setup.a.owner,
                        room_id=negotiation.room.id,
                        grant_id=grant.id,
                        approve=False,
                    )
                elif attempt == "approve_other_key":
                    forks.grant_decide(
                        owner=negotiation.setup.a.owner,
                        room_id=negotiation.room.id,
                        grant_id=grant.id,
                        approve=True,
                        key_id=second_key.id,
                        signature=sign_payload(second_device, genuine),
                    )
                else:
                    payload = genuine
                    if attempt == "approve_extended":
                        payload = {**genuine, "expires_at": genuine["expires_at"] + 3600}
                    approve(negotiation, grant, sign_payload(negotiation.device, payload))
            assert Grant.objects.get(id=grant.id).status == how
            assert ActionRecord.objects.get(id=grant.action_id).status == status_after
            assert executions() == ran

    check()


# --- racing approvals ----------------------------------------------------------------------------

RACERS = 6


def _race_approvals(n: Negotiation, grant: Grant) -> list[str]:
    """``RACERS`` threads, each with its own database connection, approve the same grant with
    the same valid signature at the same moment."""
    signature = n.device.sign_grant(grant)
    barrier = threading.Barrier(RACERS)

    def racer(_: int) -> str:
        try:
            barrier.wait()
            return approve(n, grant, signature).status
        except InvalidState as exc:
            return f"refused: {exc.message}"
        finally:
            connections.close_all()

    with ThreadPoolExecutor(RACERS) as pool:
        return list(pool.map(racer, range(RACERS)))


@pytest.mark.django_db(transaction=True)
def test_racing_approvals_execute_the_action_exactly_once(negotiation) -> None:
    # Row locks (PostgreSQL) or IMMEDIATE write transactions (SQLite) serialise the racers.
    assert connection.vendor in ("postgresql", "sqlite")
    for ref in ("race-1", "race-2"):
        grant = over_budget_request(negotiation, ref)
        outcomes = _race_approvals(negotiation, grant)
        assert outcomes.count("executed") == 1, outcomes
        answered = "This request was already answered: approved and used. Nothing more to do."
        assert all(o == f"refused: {answered}" for o in outcomes if o != "executed"), outcomes
    assert executions() == 2
    executed = LedgerEvent.objects.filter(room_id=negotiation.room.id, kind="action_executed")
    assert executed.count() == 2
    assert set(Grant.objects.values_list("status", flat=True)) == {GrantStatus.CONSUMED}

"""An agent socket's connect in a few written statements (issue 17), every check still made
on each connect: the token, the seat and its standing, the room's state, the ``Join`` event
before the socket is admitted, and the slip behind the tools it is listed. These count
statements (``CaptureQueriesContext``), never time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext

from gatekeeper.models import ToolPolicyRule
from gatekeeper.policy import tool_policy_rule_put
from ledger import services as ledger_services
from ledger.models import LedgerEvent, LedgerHead
from rooms import consumers, services
from rooms.consumers import RoomConsumer
from rooms.models import Agent
from rooms.protocol import CloseCode
from slips import services as slip_services
from slips.models import Slip
from synapsia.asgi import application
from tests.slips.conftest import seat_slip_sign
from tests.statement_parses import uncached_parses

pytestmark = pytest.mark.django_db(transaction=True)

# The token's use, the seat with its room and the tool policy's rules, the Join (the head's
# compare-and-set and the insert) in one transaction: 6 with SQLite's BEGIN and COMMIT. On
# PostgreSQL the token's use and the seat are one statement and the Join's compare-and-set is
# its insert's: 4. It was 14 (the agent and the room read twice, the ledger through the ORM,
# the slips, the backlog and the sealed offers read when there are none), then 7 (the tool
# policy read after the transaction). One more where there is something to read: the agent's
# slip, or messages past its ack.
CONNECT_STATEMENTS = {"sqlite": 6, "postgresql": 4}
CONNECT_STATEMENTS_MAX = CONNECT_STATEMENTS[connection.vendor]


@pytest.fixture
def connect_hops(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The statements of each connect's database hop, and (by their number) the hops: the
    handshake and the opening must share one."""
    hops: list[list[str]] = []
    real = RoomConsumer._admit_and_open

    def counted(self: RoomConsumer, **kwargs: Any) -> Any:
        with CaptureQueriesContext(connection) as queries:
            result = real(self, **kwargs)
        hops.append([q["sql"] for q in queries.captured_queries])
        return result

    real_hop = consumers.in_db_thread

    def one_hop(func: Callable[..., Any]) -> Any:
        if getattr(func, "__func__", None) is counted:
            return real_hop(func)
        hops.append(["(another hop during connect)"])
        return real_hop(func)

    monkeypatch.setattr(RoomConsumer, "_admit_and_open", counted)
    monkeypatch.setattr(consumers, "in_db_thread", one_hop)
    return hops


async def _connect(room_id: Any, token: str) -> tuple[WebsocketCommunicator, dict[str, Any]]:
    socket = WebsocketCommunicator(
        application,
        f"/ws/rooms/{room_id}/",
        headers=[(b"authorization", f"Bearer {token}".encode())],
    )
    assert (await socket.connect())[0]
    welcome = await socket.receive_json_from(timeout=10)
    assert welcome["type"] == "welcome", welcome
    return socket, welcome


def _tool_names(welcome: dict[str, Any]) -> set[str]:
    return {tool["name"] for tool in welcome["body"]["tools"]}


@database_sync_to_async
def _joins_of(agent_id: Any) -> int:
    return sum(
        1
        for data in LedgerEvent.objects.filter(kind="join").values_list("data", flat=True)
        if data["participant_id"] == str(agent_id)
    )


async def test_an_agent_connect_costs_a_few_statements_in_one_hop(
    make_open_room: Any, connect_hops: list[list[str]]
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    socket, welcome = await _connect(setup.room.id, setup.a.token)
    assert len(connect_hops) == 1, connect_hops  # the handshake and the opening: one hop
    assert len(connect_hops[0]) <= CONNECT_STATEMENTS_MAX, "\n".join(connect_hops[0])
    # What those statements did: the join recorded, the token's use stamped, the room told.
    assert await _joins_of(setup.a.agent.id) == 1
    agent = await database_sync_to_async(Agent.objects.get)(id=setup.a.agent.id)
    assert agent.token_last_used_at is not None
    assert welcome["body"]["room"]["purpose"] == "Dinner for two"
    assert welcome["body"]["room"]["charter"] == "Find a dinner slot."
    assert welcome["body"]["agent_id"] == str(setup.a.agent.id)
    await socket.disconnect()


async def test_the_tool_policy_is_read_with_the_seat_on_every_connect(
    make_open_room: Any, connect_hops: list[list[str]], settings: Any
) -> None:
    # What the connect lists follows the policy's rules as they are at that connect: read by
    # the seat's statement, not by one of their own, and never kept from an earlier connect.
    settings.SYNAPSIA = {**settings.SYNAPSIA, "TOOL_POLICY_DEFAULT": "allow_all"}
    setup = await database_sync_to_async(make_open_room)()
    agent_id, other = setup.a.agent.id, setup.b.agent.id

    async def listed() -> set[str]:
        socket, welcome = await _connect(setup.room.id, setup.a.token)
        await socket.disconnect()
        return _tool_names(welcome)

    before = await listed()
    assert "venues_search" in before
    put = database_sync_to_async(tool_policy_rule_put)
    await put(agent_id=other, tool="venues_search", effect="deny")  # another agent's rule
    assert await listed() == before
    await put(agent_id=agent_id, tool="venues_search", effect="deny")
    assert await listed() == before - {"venues_search"}
    await database_sync_to_async(ToolPolicyRule.objects.filter(agent_key=str(agent_id)).delete)()
    assert await listed() == before
    await put(agent_id="*", tool="*", effect="deny")  # every agent's rule
    assert await listed() == set()
    # The connects' hops (a leave's hop is counted too, as "another hop").
    connects = [hop for hop in connect_hops if any("token_last_used_at" in sql for sql in hop)]
    assert len(connects) == 5, connect_hops
    rules_table = ToolPolicyRule._meta.db_table
    for hop in connects:  # the seat's statement reads the rules; none reads them alone
        assert len(hop) <= CONNECT_STATEMENTS_MAX, hop
        assert [sql for sql in hop if rules_table in sql and "m.owner_id" in sql], hop
        assert not [sql for sql in hop if sql.lstrip().startswith("SELECT agent_key, tool")]


async def test_an_agent_of_a_room_whose_ledger_has_no_head_yet_still_joins(
    make_open_room: Any,
) -> None:
    # PostgreSQL's token-and-seat statement locks the head, so it finds no seat where there is
    # no head; the seat is then read without the lock and the Join starts the ledger.
    setup = await database_sync_to_async(make_open_room)()

    def no_ledger() -> None:
        LedgerEvent.objects.filter(room_id=setup.room.id).delete()
        LedgerHead.objects.filter(room_id=setup.room.id).delete()

    await database_sync_to_async(no_ledger)()
    socket, welcome = await _connect(setup.room.id, setup.a.token)
    assert welcome["body"]["agent_id"] == str(setup.a.agent.id)
    joined = await database_sync_to_async(
        lambda: list(LedgerEvent.objects.filter(room_id=setup.room.id).values_list("seq", "kind"))
    )()
    assert joined == [(1, "join")]
    await socket.disconnect()


async def test_what_waits_for_an_agent_is_still_read_and_sent(
    make_open_room: Any, connect_hops: list[list[str]]
) -> None:
    # Skipping the backlog's read when the room has nothing past the agent's ack must not
    # skip it when there is: Bob's message reaches Alice's agent on connect.
    setup = await database_sync_to_async(make_open_room)()
    await database_sync_to_async(services.message_say)(
        room_id=setup.room.id, agent_id=setup.b.agent.id, client_id="b-1", text="Friday at 7?"
    )
    socket, _ = await _connect(setup.room.id, setup.a.token)
    message = await socket.receive_json_from(timeout=10)
    assert message["type"] == "message" and message["body"]["seq"] == 1
    assert "Friday at 7?" in message["body"]["text"]
    assert len(connect_hops) == 1
    assert len(connect_hops[0]) <= CONNECT_STATEMENTS_MAX + 1, "\n".join(connect_hops[0])
    await socket.disconnect()


@pytest.mark.parametrize("change", ["key_revoked", "signature_forged"])
async def test_the_slip_behind_the_listed_tools_is_checked_on_every_connect(
    make_open_room: Any, connect_hops: list[list[str]], change: str, settings: Any
) -> None:
    # The policy allows every tool (the production default allows none), so what is listed
    # is what the slip says.
    settings.SYNAPSIA = {**settings.SYNAPSIA, "TOOL_POLICY_DEFAULT": "allow_all"}
    setup = await database_sync_to_async(make_open_room)()
    key, _ = await database_sync_to_async(seat_slip_sign)(
        setup.a,
        setup.room.id,
        [{"resource": "tool:book_table", "operation": "act", "approval": "none", "max_uses": 5}],
    )
    socket, welcome = await _connect(setup.room.id, setup.a.token)
    assert "book_table" in _tool_names(welcome)  # the slip's tool
    assert "venues_search" in _tool_names(welcome)  # touches no owner data: needs no slip
    assert len(connect_hops[0]) <= CONNECT_STATEMENTS_MAX + 1, "\n".join(connect_hops[0])
    await socket.disconnect()

    def spoil() -> None:
        if change == "key_revoked":
            slip_services.key_revoke(owner=setup.a.owner, key_id=key.id)
        else:
            slip = Slip.objects.get(room_id=setup.room.id, owner=setup.a.owner)
            Slip.objects.filter(id=slip.id).update(signature=bytes(64))

    await database_sync_to_async(spoil)()
    # The same stored bytes, so what they say is remembered; whether they hold up is not.
    socket, welcome = await _connect(setup.room.id, setup.a.token)
    assert "book_table" not in _tool_names(welcome)
    assert "venues_search" in _tool_names(welcome)
    await socket.disconnect()


async def test_a_join_the_ledger_refuses_admits_no_one_and_keeps_nothing(
    make_open_room: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = await database_sync_to_async(make_open_room)()

    def refused(*_: object, **__: object) -> None:
        raise DatabaseError("the events table refused the insert")

    monkeypatch.setattr(ledger_services, "_events_insert", refused)
    socket = WebsocketCommunicator(
        application,
        f"/ws/rooms/{setup.room.id}/",
        headers=[(b"authorization", f"Bearer {setup.a.token}".encode())],
    )
    assert (await socket.connect())[0]
    closed = await socket.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": CloseCode.TRY_AGAIN}
    assert await _joins_of(setup.a.agent.id) == 0
    # The handshake's transaction rolled back whole: not even the token's use was kept.
    agent = await database_sync_to_async(Agent.objects.get)(id=setup.a.agent.id)
    assert agent.token_last_used_at is None


async def test_a_connects_statements_are_parsed_once(make_open_room: Any, settings: Any) -> None:
    """Each statement of a connect keeps psycopg's parse (PostgreSQL), with a slip behind
    its tools and a backlog waiting (``tests.statement_parses``)."""
    settings.SYNAPSIA = {**settings.SYNAPSIA, "TOOL_POLICY_DEFAULT": "allow_all"}
    setup = await database_sync_to_async(make_open_room)()
    await database_sync_to_async(seat_slip_sign)(
        setup.a,
        setup.room.id,
        [{"resource": "tool:book_table", "operation": "act", "approval": "none", "max_uses": 5}],
    )
    await database_sync_to_async(services.message_say)(
        room_id=setup.room.id, agent_id=setup.b.agent.id, client_id="b-1", text="Friday at 7?"
    )
    socket, _ = await _connect(setup.room.id, setup.a.token)  # each text's first parse
    await socket.disconnect()
    with uncached_parses() as parsed:
        socket, welcome = await _connect(setup.room.id, setup.a.token)
        assert "book_table" in _tool_names(welcome)
        assert (await socket.receive_json_from(timeout=10))["type"] == "message"
        await socket.disconnect()
    assert parsed == [], [q[:120] for q in parsed]

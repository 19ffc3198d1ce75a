"""An agent's socket lives on the token it was admitted with, and no longer.

Rotating an agent's token (``services.agent_rotate_token``) announces ``agent.revoked`` so
the sockets opened with the old token close at once. An announcement can be lost (a Redis
hiccup, a full channel, the rotation made by another process), so every hop compares the
digest the socket was admitted with (``Participant.token_digest``) with the agent's current
one, in the statement it already runs: the delivery's standing check and the record sweep
(the seats' statement reads ``Agent.token_hash``), the `say` statements (``may_speak_sql``),
the context request's facts (a rotated token reads as revoked), the `ack` statements, the
seat and agent row an `act` and a `flare` read, and the statement that locks the room for a
`seal_offer`. Here the announcement is suppressed (``realtime.announce_agent_revoked`` does
nothing) and the old token's socket must still be given nothing, record nothing, run nothing,
be disclosed nothing and be closed with 4401; the new token's socket works as ever; and the
statements per say, context request, delivery, act, ack, seal and flare are as many as
without the check.

Real parts: the project's ASGI application through channels' ``WebsocketCommunicator``, the
in-memory channel layer, the test database (SQLite, or PostgreSQL in the services pass).
"""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import AnonymousUser
from django.db import connection
from django.test.utils import CaptureQueriesContext

from gatekeeper import actions
from gatekeeper.records import ActionRecord
from ledger.models import LedgerEvent
from rooms import consumers, context, flares, forks, handshake, realtime, sealed, services, standing
from rooms.bearer import secret_digest
from rooms.models import Flare, FlareReason, Message, RoomMember, RoomOutcome, RoomState
from rooms.protocol import CloseCode, OfferPlan
from tests.rooms.conftest import SWEEP_SECONDS
from tests.socket_frames import closed_with_nothing_before, frame, join, next_frame_of, say
from tests.socket_frames import heard as heard_message

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def slow_sweep(settings: Any) -> None:
    """No record sweep within a test's time: what closes a socket is the announcement or
    the hop's own check, never the sweep."""
    settings.SYNAPSIA = {**settings.SYNAPSIA, "CATCH_UP_SECONDS": 600.0}


@pytest.fixture
def tools_allowed(settings: Any) -> None:
    """The embedded profile's tool policy on either profile (production's denies a tool no
    policy names): an act is decided by the token, the slip and the room, not the policy."""
    settings.SYNAPSIA = {**settings.SYNAPSIA, "TOOL_POLICY_DEFAULT": "allow_all"}


@pytest.fixture
def lost_rotation(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The rotation's ``agent.revoked`` announcement never reaches any socket (as when Redis
    hiccups, or the rotation is made by another process): what was announced is listed."""
    announced: list[Any] = []

    def lost(agent_id: Any, *, room_ids: Any) -> None:
        announced.append((agent_id, list(room_ids)))

    monkeypatch.setattr(realtime, "announce_agent_revoked", lost)
    return announced


def _rotated(setup: Any) -> str:
    """Alice's agent's token rotated by her (the Agents page's service): the new token."""
    return services.agent_rotate_token(owner=setup.a.owner, agent_id=setup.a.agent.id).token


def _recorded(room_id: Any) -> list[str]:
    return list(
        Message.objects.filter(room_id=room_id).order_by("seq").values_list("client_id", flat=True)
    )


def _turns_and_events(setup: Any) -> tuple[int, int]:
    """Alice's agent's context turns taken, and the room's ledger events."""
    seat = RoomMember.objects.get(room_id=setup.room.id, agent_id=setup.a.agent.id)
    return seat.context_turn, LedgerEvent.objects.filter(room_id=setup.room.id).count()


# --- (1)-(6): the sockets ------------------------------------------------------------------


async def test_1_the_old_token_s_socket_hears_nothing_more_and_is_closed_at_the_next_delivery(
    make_open_room: Any, slow_sweep: None, lost_rotation: list[Any]
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    old, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    await b.send_json_to(say("before the rotation", "b-1"))
    assert (await b.receive_json_from(timeout=5))["type"] == "sent"
    await heard_message(old, "before the rotation")

    await database_sync_to_async(_rotated)(setup)
    assert lost_rotation == [(setup.a.agent.id, [setup.room.id])]  # announced, and lost
    assert await old.receive_nothing(timeout=0.2)  # the doorbell never rang
    await b.send_json_to(say("my owner's budget is 80", "b-2"))
    assert (await b.receive_json_from(timeout=5))["type"] == "sent"  # the peer is unaffected
    # The delivery's standing check read the agent's token: closed instead of given it.
    assert await closed_with_nothing_before(old) == CloseCode.UNAUTHENTICATED
    await b.send_json_to(say("and again", "b-3"))
    assert (await b.receive_json_from(timeout=5))["type"] == "sent"
    assert await old.receive_nothing(timeout=0.2)
    for socket in (old, b):
        await socket.disconnect()


@pytest.mark.parametrize("frames", [1, 3], ids=["one say", "a run of says"])
async def test_2_the_old_token_s_say_is_refused_and_nothing_is_recorded(
    make_open_room: Any, slow_sweep: None, lost_rotation: list[Any], frames: int
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    old, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    await database_sync_to_async(_rotated)(setup)
    # Queued together, several frames are one run of the say desk (one statement checks it).
    for n in range(frames):
        await old.send_json_to(say(f"the old token speaks {n}", f"a-{n}"))
    # No `sent`: the say statement refused it (as a revoked agent's), and the socket closed.
    assert await closed_with_nothing_before(old) == CloseCode.UNAUTHENTICATED
    assert await database_sync_to_async(_recorded)(setup.room.id) == []
    assert await b.receive_nothing(timeout=0.2)  # the peer was told nothing
    for socket in (old, b):
        await socket.disconnect()


async def test_3_the_old_token_s_context_request_discloses_nothing(
    make_open_room: Any, slow_sweep: None, lost_rotation: list[Any]
) -> None:
    """As for a revoked agent whose close was lost: the request is answered by the close
    (4401), the turn it would have started is undone (no turn, no slip use, no ledger
    event), and the ack riding it is not recorded."""
    setup = await database_sync_to_async(make_open_room)()
    old, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    await b.send_json_to(say("peer text the old token must not read", "b-1"))
    assert (await b.receive_json_from(timeout=5))["type"] == "sent"
    await heard_message(old, "peer text the old token must not read")
    before = await database_sync_to_async(_turns_and_events)(setup)

    await database_sync_to_async(_rotated)(setup)
    await old.send_json_to(frame("context_request", {"ack": 1}, "c-1"))
    assert await closed_with_nothing_before(old) == CloseCode.UNAUTHENTICATED
    assert await database_sync_to_async(_turns_and_events)(setup) == before
    seat = await database_sync_to_async(RoomMember.objects.get)(
        room_id=setup.room.id, agent_id=setup.a.agent.id
    )
    assert seat.acked_seq == 0  # the riding ack went with the undone turn
    for socket in (old, b):
        await socket.disconnect()


async def test_4_an_idle_old_token_socket_is_closed_by_the_record_sweep(
    make_open_room: Any, fast_sweep: None, lost_rotation: list[Any]
) -> None:
    """Nothing is said, so nothing is delivered: the sweep's one statement reads the agents'
    tokens with the seats, and closes the socket whose token was rotated away."""
    setup = await database_sync_to_async(make_open_room)()
    old, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    assert await old.receive_nothing(timeout=3 * SWEEP_SECONDS)  # swept, and in standing
    await database_sync_to_async(_rotated)(setup)
    assert lost_rotation
    assert await closed_with_nothing_before(old) == CloseCode.UNAUTHENTICATED
    assert await b.receive_nothing(timeout=5 * SWEEP_SECONDS)  # b, its token current, stays
    await b.send_json_to(frame("ping", {}, "p-1"))
    assert (await b.receive_json_from(timeout=5))["type"] == "pong"
    for socket in (old, b):
        await socket.disconnect()


async def test_5_a_socket_opened_with_the_new_token_works_as_ever(
    make_open_room: Any, slow_sweep: None, lost_rotation: list[Any]
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    old, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    new_token = await database_sync_to_async(_rotated)(setup)
    new = await join(setup.room.id, new_token)
    # The old socket is out: replaced by the newer join (4001) or, if the delivery check
    # comes first, closed as a rotated token's (4401). Never given anything either way.
    assert await closed_with_nothing_before(old) in {CloseCode.REPLACED, CloseCode.UNAUTHENTICATED}

    await b.send_json_to(say("hello, new socket", "b-1"))
    assert (await b.receive_json_from(timeout=5))["type"] == "sent"
    await heard_message(new, "hello, new socket")
    await new.send_json_to({**say("heard you", "a-1"), "body": {"text": "heard you", "ack": 1}})
    sent = await new.receive_json_from(timeout=5)
    assert (sent["type"], sent["body"]["ref"]) == ("sent", "a-1")
    await heard_message(b, "heard you")
    await new.send_json_to(frame("context_request", {}, "c-1"))
    turn = await new.receive_json_from(timeout=5)
    assert turn["type"] == "context" and turn["body"]["turn"] == 1
    assert "hello, new socket" in turn["body"]["peer_messages"][-1]["fenced"]
    assert await database_sync_to_async(_recorded)(setup.room.id) == ["b-1", "a-1"]
    # The old token opens nothing any more (the handshake's own check, as before).
    socket = await consumers_refused(setup.room.id, setup.a.token)
    assert socket == CloseCode.UNAUTHENTICATED
    for each in (old, new, b):
        await each.disconnect()


async def consumers_refused(room_id: Any, token: str) -> int:
    """The close code a fresh socket with ``token`` is refused with."""
    from channels.testing import WebsocketCommunicator

    from synapsia.asgi import application

    socket = WebsocketCommunicator(
        application,
        f"/ws/rooms/{room_id}/",
        headers=[(b"authorization", f"Bearer {token}".encode())],
    )
    assert (await socket.connect())[0]
    code = await closed_with_nothing_before(socket)
    await socket.send_input({"type": "websocket.disconnect", "code": code})
    await socket.wait()
    return code


async def test_6_with_the_announcement_delivered_the_old_socket_closes_at_once(
    make_open_room: Any, slow_sweep: None
) -> None:
    """The usual case, unchanged: the rotation's ``agent.revoked`` closes the old token's
    idle socket at once, though nothing is said and no sweep runs."""
    setup = await database_sync_to_async(make_open_room)()
    old, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    await database_sync_to_async(_rotated)(setup)
    assert await closed_with_nothing_before(old, timeout=2) == CloseCode.UNAUTHENTICATED
    assert await b.receive_nothing(timeout=0.2)
    for socket in (old, b):
        await socket.disconnect()


# --- (7)-(10): the frames that act, seal, flare and acknowledge -----------------------------
#
# Each is decided from the record with the socket's token, in the statement or row its path
# already reads: the old token's frame is refused as a revoked agent's (and the socket closed
# with 4401); the same frame from a socket opened with the new token works as ever.

OLD_OR_NEW = pytest.mark.parametrize("which", ["old token", "new token"])
PROPOSE = {"start": "2026-12-04T19:00:00+00:00", "duration_minutes": 90}


async def _socket_after_rotation(
    setup: Any, which: str, heard: str | None = None, b: Any = None
) -> Any:
    """Alice's agent's socket once its token was rotated (the announcement lost): the one
    opened with the old token before, or one opened with the new token after. ``heard``: a
    message Bob's agent (its socket ``b``) says before the rotation, which the socket has
    been given."""
    old = await join(setup.room.id, setup.a.token)
    if heard is not None:
        await b.send_json_to(say(heard, "b-1"))
        assert (await b.receive_json_from(timeout=5))["type"] == "sent"
        await heard_message(old, heard)
    new_token = await database_sync_to_async(_rotated)(setup)
    if which == "old token":
        return old
    new = await join(setup.room.id, new_token)
    assert await closed_with_nothing_before(old) in {CloseCode.REPLACED, CloseCode.UNAUTHENTICATED}
    await old.disconnect()
    if heard is not None:
        await heard_message(new, heard)  # read back from the record
    return new


async def _until_closed(socket: Any, timeout: float = 5) -> tuple[list[dict[str, Any]], int]:
    """What the socket is sent before its close, and the close code."""
    import json

    sent: list[dict[str, Any]] = []
    while True:
        output = await socket.receive_output(timeout=timeout)
        if output["type"] == "websocket.close":
            return sent, int(output["code"])
        sent.append(json.loads(output["text"]))


def _room_facts(setup: Any) -> dict[str, Any]:
    """What an act, a seal, a flare or an ack leaves in the record of Alice's agent's seat."""
    from rooms.models import Room, SealedOffer

    room_id, agent_id = setup.room.id, setup.a.agent.id
    return {
        "state": Room.objects.values_list("state", flat=True).get(id=room_id),
        "actions": list(
            ActionRecord.objects.filter(room_id=room_id, agent_id=agent_id)
            .order_by("decided_at")
            .values_list("idempotency_key", "status", "rule")
        ),
        "outcomes": RoomOutcome.objects.filter(room_id=room_id).count(),
        "seals": SealedOffer.objects.filter(room_id=room_id, agent_id=agent_id).count(),
        "flares": Flare.objects.filter(room_id=room_id).count(),
        "acked": RoomMember.objects.values_list("acked_seq", flat=True).get(
            room_id=room_id, agent_id=agent_id
        ),
        "events": list(
            LedgerEvent.objects.filter(room_id=room_id)
            .order_by("seq")
            .values_list("kind", flat=True)
        ),
    }


def _last_denial_rule(setup: Any) -> str:
    denial = LedgerEvent.objects.filter(room_id=setup.room.id, kind="denial").latest("seq")
    return str(denial.data["rule"])


@OLD_OR_NEW
async def test_7_the_old_token_s_act_runs_nothing_and_is_decided_as_a_revoked_agent_s(
    make_open_room: Any, slow_sweep: None, lost_rotation: list[Any], tools_allowed: None, which: str
) -> None:
    """``declare_no_plan`` runs on the server and changes the room's outcome: the old token's
    act is denied with the revoked rule (recorded as a revoked agent's act is: the denial in
    the ledger, the room paused at the fork), nothing runs and nothing changes; the socket is
    closed with 4401 after its answer. The new token's act runs."""
    setup = await database_sync_to_async(make_open_room)()
    socket = await _socket_after_rotation(setup, which)
    before = await database_sync_to_async(_room_facts)(setup)
    act = frame("act", {"tool": "declare_no_plan", "arguments": {"reason": "time"}}, "act-1")
    await socket.send_json_to(act)
    if which == "new token":
        result = await next_frame_of(socket, "action_result")
        assert (result["body"]["ref"], result["body"]["status"]) == ("act-1", "executed")
        after = await database_sync_to_async(_room_facts)(setup)
        assert after["actions"] == [("act-1", "executed", "cleared")]
        assert after["outcomes"] == before["outcomes"] + 1
        await socket.disconnect()
        return
    sent, code = await _until_closed(socket)
    assert code == CloseCode.UNAUTHENTICATED
    results = [f["body"] for f in sent if f["type"] == "action_result"]
    assert [(r["ref"], r["status"], r["rule"]) for r in results] == [
        ("act-1", "denied", "agent_revoked")
    ]
    after = await database_sync_to_async(_room_facts)(setup)
    assert after["actions"] == []  # nothing executed, nothing kept but the denial
    assert after["outcomes"] == before["outcomes"]  # the tool had no effect
    # Recorded as a revoked agent's act is: its denial (the revoked rule), the room paused.
    assert after["events"][len(before["events"]) :] == ["denial", "room_paused"]
    assert await database_sync_to_async(_last_denial_rule)(setup) == "agent_revoked"
    await socket.disconnect()


@OLD_OR_NEW
async def test_8_the_old_token_s_seal_offer_is_refused(
    make_open_room: Any, slow_sweep: None, lost_rotation: list[Any], which: str
) -> None:
    offer = {
        "venue_id": "sora-sushi",
        "start": "2026-12-05T19:00:00+01:00",
        "party_size": 2,
        "price_per_person_minor": 4275,
        "currency": "EUR",
    }
    setup = await database_sync_to_async(make_open_room)()
    socket = await _socket_after_rotation(setup, which)
    before = await database_sync_to_async(_room_facts)(setup)
    await socket.send_json_to(frame("seal_offer", {"offer": offer}, "seal-1"))
    if which == "new token":
        assert await socket.receive_nothing(timeout=0.5)  # sealed: nothing is said of it
        after = await database_sync_to_async(_room_facts)(setup)
        assert after["seals"] == 1 and after["events"][-1] == "offer_sealed"
        await socket.disconnect()
        return
    assert await closed_with_nothing_before(socket) == CloseCode.UNAUTHENTICATED
    assert await database_sync_to_async(_room_facts)(setup) == before  # nothing sealed
    await socket.disconnect()


@OLD_OR_NEW
async def test_9_the_old_token_s_flare_does_not_pause_the_room(
    make_open_room: Any, slow_sweep: None, lost_rotation: list[Any], which: str
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    socket = await _socket_after_rotation(setup, which)
    before = await database_sync_to_async(_room_facts)(setup)
    await socket.send_json_to(frame("flare", {"reason": "loop"}, "f-1"))
    if which == "new token":
        state = await next_frame_of(socket, "room_state")
        assert state["body"]["state"] == "paused"
        after = await database_sync_to_async(_room_facts)(setup)
        assert (after["state"], after["flares"]) == ("paused", 1)
        await socket.disconnect()
        return
    assert await closed_with_nothing_before(socket) == CloseCode.UNAUTHENTICATED
    after = await database_sync_to_async(_room_facts)(setup)
    assert after == before and after["state"] == "open"  # no flare, no pause, no event
    await socket.disconnect()


@OLD_OR_NEW
@pytest.mark.parametrize("how", ["ack frame", "riding a say"])
async def test_10_the_old_token_s_ack_is_not_recorded(
    make_open_room: Any, slow_sweep: None, lost_rotation: list[Any], which: str, how: str
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    b = await join(setup.room.id, setup.b.token)
    socket = await _socket_after_rotation(setup, which, heard="one", b=b)
    if how == "ack frame":
        sent = frame("ack", {"seq": 1}, "ack-1")
    else:
        sent = frame("say", {"text": "heard you", "ack": 1}, "a-1")
    await socket.send_json_to(sent)
    if which == "new token":
        if how == "ack frame":
            assert await socket.receive_nothing(timeout=0.5)  # an ack taken is not answered
        else:
            assert (await next_frame_of(socket, "sent"))["body"]["ref"] == "a-1"
        facts = await database_sync_to_async(_room_facts)(setup)
        assert facts["acked"] == 1
        await socket.disconnect()
    else:
        assert await closed_with_nothing_before(socket) == CloseCode.UNAUTHENTICATED
        facts = await database_sync_to_async(_room_facts)(setup)
        assert facts["acked"] == 0  # the old token's ack is not recorded
        assert await database_sync_to_async(_recorded)(setup.room.id) == ["b-1"]
        await socket.disconnect()
    await b.disconnect()


# --- the checks themselves: in the statements already run, never one more ------------------


def test_the_socket_keeps_the_token_s_digest_never_the_token(make_open_room: Any) -> None:
    setup = make_open_room()
    admitted = handshake.admit(
        room_id=str(setup.room.id),
        headers=[(b"authorization", f"Bearer {setup.a.token}".encode())],
        user=AnonymousUser(),
    )
    assert isinstance(admitted, handshake.Admission)
    participant = admitted.participant
    assert participant.token_digest == secret_digest(setup.a.token) == setup.a.agent.token_hash
    assert setup.a.token not in repr(participant)
    assert participant.token_digest not in repr(participant)  # kept out of logs too


def _desk_hop(readers: list[standing.Reader]) -> tuple[int, Any]:
    with CaptureQueriesContext(connection) as queries:
        _, _, verdicts = consumers._desk_hop_parts(acks=[], runs=[], readers=readers)
    return len(queries), verdicts


def test_a_delivery_hop_judges_the_token_in_its_one_statement(make_open_room: Any) -> None:
    setup = make_open_room()
    agent_a = standing.Reader(
        setup.room.id, setup.a.owner.pk, setup.a.agent.id, token=secret_digest(setup.a.token)
    )
    agent_b = standing.Reader(
        setup.room.id, setup.b.owner.pk, setup.b.agent.id, token=secret_digest(setup.b.token)
    )
    assert _desk_hop([agent_a, agent_b]) == (1, {agent_a: None, agent_b: None})
    new_token = _rotated(setup)
    # The verdict is never kept: the next hop reads the rotation, in the same one statement.
    assert _desk_hop([agent_a, agent_b]) == (
        1,
        {agent_a: CloseCode.UNAUTHENTICATED, agent_b: None},
    )
    fresh = agent_a._replace(token=secret_digest(new_token))
    assert _desk_hop([fresh, agent_a]) == (1, {fresh: None, agent_a: CloseCode.UNAUTHENTICATED})
    # A socket's reader with an empty digest (none kept) is out: it fails closed.
    assert standing.reader_standing(agent_a._replace(token="")) == CloseCode.UNAUTHENTICATED


def test_the_record_sweep_reads_the_tokens_with_the_seats(make_open_room: Any) -> None:
    setup = make_open_room()
    reader = standing.Reader(
        setup.room.id, setup.a.owner.pk, setup.a.agent.id, token=secret_digest(setup.a.token)
    )
    with CaptureQueriesContext(connection) as queries:
        before = standing.rooms_swept([setup.room.id])
    assert len(queries) == 2  # the record's mark and the seats, as before
    assert standing.seat_verdict(reader, before.seats[setup.room.id]) is None
    _rotated(setup)
    with CaptureQueriesContext(connection) as queries:
        after = standing.rooms_swept([setup.room.id], before.agent_ids, before.mark)
    assert len(queries) == 2 and not after.unchanged  # the rotation moved the mark
    assert standing.seat_verdict(reader, after.seats[setup.room.id]) == CloseCode.UNAUTHENTICATED


def _statements(work: Any) -> tuple[int, Any]:
    with CaptureQueriesContext(connection) as queries:
        result = work()
    return len(queries), result


def test_a_say_with_a_rotated_token_is_refused_by_its_own_statement(
    make_open_room: Any,
) -> None:
    setup = make_open_room()
    room, a, b = setup.room.id, setup.a.agent.id, setup.b.agent.id
    old, b_digest = secret_digest(setup.a.token), secret_digest(setup.b.token)
    services.messages_say(room_id=room, agent_id=a, says=[("warm", "warm")])  # as a server is
    # The same statements with the token as without: one say, and a hop of two runs.
    alone = _statements(
        lambda: services.messages_say(room_id=room, agent_id=a, says=[("a-1", "x")])
    )
    checked = _statements(
        lambda: services.messages_say(room_id=room, agent_id=a, says=[("a-2", "y")], token=old)
    )
    assert alone[0] == checked[0] and len(alone[1]) == len(checked[1]) == 1
    runs = [(room, a, [("a-3", "p"), ("a-4", "q")]), (room, b, [("b-1", "r")])]
    hop = _statements(lambda: services.messages_say_runs(runs=runs))
    runs = [(room, a, [("a-5", "p"), ("a-6", "q")]), (room, b, [("b-2", "r")])]
    hop_checked = _statements(lambda: services.messages_say_runs(runs=runs, tokens=[old, b_digest]))
    assert hop[0] == hop_checked[0] and [len(r) for r in hop_checked[1]] == [2, 1]
    print(f"statements: one say {alone[0]} / {checked[0]}, a hop {hop[0]} / {hop_checked[0]}")

    new = secret_digest(_rotated(setup))
    recorded = _recorded(room)
    # Refused, as a revoked agent's, on every way a say is recorded; nothing is stored.
    assert services.messages_say(room_id=room, agent_id=a, says=[("r-1", "x")], token=old) == []
    runs = [(room, a, [("r-2", "p"), ("r-3", "q")]), (room, b, [("b-3", "r")])]
    refused = _statements(lambda: services.messages_say_runs(runs=runs, tokens=[old, b_digest]))
    assert refused[0] == hop[0]  # the refusal costs the check no statement more
    assert [len(said) for said in refused[1]] == [0, 1]  # b, its token current, still speaks
    with pytest.raises(services.SpeakRefused) as said:
        services.message_say(room_id=room, agent_id=a, client_id="r-4", text="x", token=old)
    assert said.value.reason == "revoked"  # the socket is closed with 4401
    # A forged digest, quotes and all, is a bound parameter: refused, never interpreted.
    forged = "' OR '1'='1"
    assert services.messages_say(room_id=room, agent_id=a, says=[("r-5", "x")], token=forged) == []
    assert _recorded(room) == [*recorded, "b-3"]
    # The new token's socket speaks.
    assert len(services.messages_say(room_id=room, agent_id=a, says=[("n-1", "x")], token=new)) == 1


def _turn(setup: Any, token: str | None) -> Any:
    return context.context_for_agent_acked(
        room_id=setup.room.id,
        agent_id=setup.a.agent.id,
        owner_id=setup.a.owner.pk,
        ack=None,
        token=token,
    )


def test_a_context_request_with_a_rotated_token_discloses_nothing(make_open_room: Any) -> None:
    setup = make_open_room()
    services.message_say(
        room_id=setup.room.id, agent_id=setup.b.agent.id, client_id="b-1", text="peer words"
    )
    old = secret_digest(setup.a.token)
    _turn(setup, None)  # warm, as a server is
    without, _ = _statements(lambda: _turn(setup, None))
    checked, turn = _statements(lambda: _turn(setup, old))
    assert checked == without  # the token rides the facts' own statement
    assert turn.peer_messages
    print(f"statements per context request: {without} / {checked}")

    new = secret_digest(_rotated(setup))
    before = _turns_and_events(setup)
    with pytest.raises(context.OutOfStanding) as out:
        _turn(setup, old)
    assert out.value.code == CloseCode.UNAUTHENTICATED
    assert _turns_and_events(setup) == before  # no turn, no use, nothing recorded
    assert _turn(setup, new).peer_messages  # the new token's socket is given its turn


def _act(setup: Any, client_id: str, reason: str, token: str | None) -> Any:
    return forks.action_for_agent(
        room_id=setup.room.id,
        agent_id=setup.a.agent.id,
        client_id=client_id,
        tool="declare_no_plan",
        arguments={"reason": reason},
        token=token,
    )


def test_an_act_with_a_rotated_token_is_a_revoked_agent_s_in_the_same_statements(
    make_open_room: Any, tools_allowed: None
) -> None:
    """The act's own read of the seat and its agent compares the token (no statement more):
    rotated away, the act is decided exactly as a revoked agent's, and nothing runs."""
    setup = make_open_room()
    old = secret_digest(setup.a.token)
    _act(setup, "w", "budget", None)  # warm, as a server is
    without, done = _statements(lambda: _act(setup, "a-1", "time", None))
    checked, done_checked = _statements(lambda: _act(setup, "a-2", "budget", old))
    assert checked == without and done.status == done_checked.status == "executed"
    print(f"statements per act (executed): {without} / {checked}")
    outcomes = RoomOutcome.objects.filter(room_id=setup.room.id).count()

    new = secret_digest(_rotated(setup))
    assert _act(setup, "n-1", "time", new).status == "executed"  # the new token's act runs
    outcomes += 1
    refused_count, refused = _statements(lambda: _act(setup, "r-1", "budget", old))
    assert (refused.status, refused.rule, refused.action_id) == ("denied", "agent_revoked", None)
    assert RoomOutcome.objects.filter(room_id=setup.room.id).count() == outcomes  # no effect
    assert not ActionRecord.objects.filter(idempotency_key="r-1").exists()
    # As a revoked agent's act, asked by the server itself, in another room.
    other = make_open_room(prefix="other-")
    services.agent_revoke(owner=other.a.owner, agent_id=other.a.agent.id)
    revoked_count, revoked = _statements(lambda: _act(other, "r-1", "budget", None))
    assert (revoked.status, revoked.rule, revoked.action_id) == (
        refused.status,
        refused.rule,
        refused.action_id,
    )
    assert refused_count == revoked_count
    kinds = [
        list(LedgerEvent.objects.filter(room_id=r).order_by("seq").values_list("kind", flat=True))
        for r in (setup.room.id, other.room.id)
    ]
    assert kinds[0][-2:] == kinds[1][-2:] == ["denial", "room_paused"]


def test_an_ack_with_a_rotated_token_is_not_recorded_by_its_one_statement(
    make_open_room: Any,
) -> None:
    setup = make_open_room()
    room, a, b = setup.room.id, setup.a.agent.id, setup.b.agent.id
    old = secret_digest(setup.a.token)
    for n in range(1, 5):
        services.message_say(room_id=room, agent_id=b, client_id=f"b-{n}", text=f"w {n}")

    def acked() -> int:
        return RoomMember.objects.values_list("acked_seq", flat=True).get(room_id=room, agent_id=a)

    services.messages_ack(room_id=room, agent_id=a, seq=0)  # warm
    assert _statements(lambda: services.messages_ack(room_id=room, agent_id=a, seq=1)) == (1, True)
    assert _statements(
        lambda: services.messages_ack(room_id=room, agent_id=a, seq=2, token=old)
    ) == (1, True)
    new = secret_digest(_rotated(setup))
    assert _statements(
        lambda: services.messages_ack(room_id=room, agent_id=a, seq=3, token=old)
    ) == (1, False)
    for forged in ("", "' OR '1'='1"):
        assert not services.messages_ack(room_id=room, agent_id=a, seq=3, token=forged)
    assert acked() == 2  # the old token's ack moved nothing
    assert services.messages_ack(room_id=room, agent_id=a, seq=3, token=new)
    assert acked() == 3


def _riding(runs: list[Any], acks: list[Any], tokens: list[Any] | None) -> list[Any]:
    """A hop's say runs with the acks riding them, as the say desk records them."""
    if connection.vendor == "postgresql":
        return services.messages_say_runs_acked(runs=runs, acks=acks, tokens=tokens)
    return consumers._say_runs_acked(runs, acks, tokens)


@pytest.mark.parametrize("messages", [1, 2], ids=["one say", "a run"])
def test_an_ack_riding_a_say_with_a_rotated_token_is_not_recorded(
    make_open_room: Any, messages: int
) -> None:
    setup = make_open_room()
    room, a, b = setup.room.id, setup.a.agent.id, setup.b.agent.id
    old, b_digest = secret_digest(setup.a.token), secret_digest(setup.b.token)
    for n in range(1, 4):
        services.message_say(room_id=room, agent_id=b, client_id=f"b-{n}", text=f"w {n}")

    def says(prefix: str) -> list[tuple[str, str]]:
        return [(f"{prefix}-{n}", f"{prefix} {n}") for n in range(messages)]

    _riding([(room, a, says("w"))], [1], None)  # warm, as a server is
    without = _statements(lambda: _riding([(room, a, says("x"))], [1], None))
    checked = _statements(lambda: _riding([(room, a, says("y"))], [2], [old]))
    assert without[0] == checked[0] and len(checked[1][0]) == messages
    print(f"statements per say with its ack ({messages}): {without[0]} / {checked[0]}")

    new = secret_digest(_rotated(setup))
    recorded = _recorded(room)
    refused = _statements(lambda: _riding([(room, a, says("r"))], [3], [old]))
    assert refused[1] == [None]  # the ack refused, and nothing of the run stored
    assert RoomMember.objects.get(room_id=room, agent_id=a).acked_seq == 2
    assert _recorded(room) == recorded
    # Beside a current token's run, in one hop: only the rotated one is refused.
    both = _riding([(room, a, says("s")), (room, b, says("t"))], [3, 1], [old, b_digest])
    assert both[0] is None and both[1] is not None and len(both[1]) == messages
    assert RoomMember.objects.get(room_id=room, agent_id=a).acked_seq == 2
    assert _riding([(room, a, says("n"))], [3], [new])[0] is not None
    assert RoomMember.objects.get(room_id=room, agent_id=a).acked_seq == 3


OFFER = OfferPlan(
    venue_id="sora-sushi",
    start="2026-12-05T19:00:00+01:00",
    party_size=2,
    price_per_person_minor=4275,
    currency="EUR",
)


def _seal(setup: Any, client_id: str, token: str | None) -> Any:
    return sealed.offer_seal(
        room_id=setup.room.id,
        agent_id=setup.a.agent.id,
        client_id=client_id,
        offer=OFFER,
        token=token,
    )


def test_a_seal_with_a_rotated_token_is_refused_by_the_room_s_lock(make_open_room: Any) -> None:
    """The statement that locks the room reads whether the agent is shut out (no statement
    more): rotated away, a seal, and a resend of one sealed before, are refused as a revoked
    agent's (a resend's answer may hold the other side's offer)."""
    first, second = make_open_room(prefix="one-"), make_open_room(prefix="two-")
    _seal(make_open_room(prefix="warm-"), "warm", None)  # warm, as a server is
    without = _statements(lambda: _seal(first, "s-1", None))[0]
    checked = _statements(lambda: _seal(second, "s-1", secret_digest(second.a.token)))[0]
    assert checked <= without  # the token rides the lock's statement
    print(f"statements per seal: {without} / {checked}")
    resend = _statements(lambda: _seal(second, "s-1", secret_digest(second.a.token)))
    assert resend[1].duplicate
    print(f"statements per resent seal: {resend[0]}")

    old = secret_digest(second.a.token)
    new = secret_digest(_rotated(second))
    for client_id in ("s-1", "s-2"):  # the resend, and a new seal
        with pytest.raises(sealed.SealRefused) as refused:
            _seal(second, client_id, old)
        assert refused.value.reason == "revoked"  # the socket is closed with 4401
    assert _seal(second, "s-1", new).duplicate  # the new token's socket learns where it stands


def _flare(setup: Any, token: str | None) -> Any:
    return flares.flare_raise(
        room_id=setup.room.id,
        agent_id=setup.a.agent.id,
        reason=FlareReason.LOOP,
        raised_by="agent",
        token=token,
    )


def test_a_flare_with_a_rotated_token_pauses_nothing(make_open_room: Any) -> None:
    first, second = make_open_room(prefix="one-"), make_open_room(prefix="two-")
    _flare(make_open_room(prefix="warm-"), None)  # warm, as a server is
    without = _statements(lambda: _flare(first, None))[0]
    checked = _statements(lambda: _flare(second, secret_digest(second.a.token)))[0]
    assert checked == without  # the token is compared on the seat's own row
    print(f"statements per flare: {without} / {checked}")

    third = make_open_room(prefix="three-")
    old = secret_digest(third.a.token)
    new = secret_digest(_rotated(third))
    with pytest.raises(flares.FlareRefused):
        _flare(third, old)
    third.room.refresh_from_db()
    assert third.room.state == "open" and not Flare.objects.filter(room_id=third.room.id).exists()
    # Nor on the agent's behalf: a loop the socket made, or a contradiction.
    with pytest.raises(flares.FlareRefused):
        flares.flare_raise(
            room_id=third.room.id,
            agent_id=third.a.agent.id,
            reason=FlareReason.LOOP,
            raised_by="server",
            token=old,
        )
    assert _flare(third, new).reason == "loop"  # the new token's flare pauses the room
    third.room.refresh_from_db()
    assert third.room.state == "paused"
    # A revoked agent raises none, whatever its token.
    fourth = make_open_room(prefix="four-")
    services.agent_revoke(owner=fourth.a.owner, agent_id=fourth.a.agent.id)
    with pytest.raises(flares.FlareRefused):
        _flare(fourth, None)


@pytest.mark.parametrize("earlier_status", ["executed", "pending"])
def test_a_rotated_token_resending_an_earlier_act_s_key_learns_nothing_and_runs_nothing(
    make_open_room: Any, tools_allowed: None, monkeypatch: pytest.MonkeyPatch, earlier_status: str
) -> None:
    """The same idempotency key as an act the agent made before the rotation: no replay of
    its result and, for a delivery still pending, no adapter asked again; decided and recorded
    as a revoked agent's act (the denial), as the new token's resend still gets its replay."""
    setup = make_open_room()
    old = secret_digest(setup.a.token)
    first = _act(setup, "a-1", "time", old)
    assert first.status == "executed"
    if earlier_status == "pending":
        ActionRecord.objects.filter(idempotency_key="a-1").update(status="pending")
    asked: list[Any] = []
    real_execute = actions._execute

    def execute(record: ActionRecord, **facts: Any) -> Any:
        asked.append(record.id)
        return real_execute(record, **facts)

    monkeypatch.setattr(actions, "_execute", execute)
    new = secret_digest(_rotated(setup))
    denials = LedgerEvent.objects.filter(room_id=setup.room.id, kind="denial").count()
    resent = _act(setup, "a-1", "time", old)
    assert (resent.status, resent.rule, resent.action_id, resent.replay) == (
        "denied",
        "agent_revoked",
        None,
        False,
    )
    assert asked == []  # nothing delivered or asked after on the old token's word
    assert LedgerEvent.objects.filter(room_id=setup.room.id, kind="denial").count() == denials + 1
    assert ActionRecord.objects.get(idempotency_key="a-1").status == earlier_status  # untouched
    replayed = _act(setup, "a-1", "time", new)  # the agent's own, on its current token
    assert replayed.replay and replayed.action_id == first.action_id


async def test_the_old_token_s_socket_is_not_told_the_room_pausing(
    make_open_room: Any, slow_sweep: None, lost_rotation: list[Any]
) -> None:
    """A room_state frame is the room's too: with the rotation's announcement lost, the old
    token's socket is closed when the room pauses instead of being told (the peer is told)."""
    setup = await database_sync_to_async(make_open_room)()
    old, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    await database_sync_to_async(_rotated)(setup)
    await database_sync_to_async(services.room_transition)(
        owner=setup.b.owner, room_id=setup.room.id, to=RoomState.PAUSED
    )
    told = await next_frame_of(b, "room_state")
    assert told["body"]["state"] == "paused"
    assert await closed_with_nothing_before(old) == CloseCode.UNAUTHENTICATED
    for socket in (old, b):
        await socket.disconnect()

"""An owner's browser socket lives on the session it was admitted with, and no longer.

A room tab outlives the page load that opened it. Signing out (in another tab), changing the
password (which signs out every other session: a stolen laptop's tab among them), being
deactivated, or the session's row ending (deleted by an operator, expired) must stop the tab
being given the room, and close it with 4401, which the room page explains in words.

Two ways, each enough alone: the check before every delivery reads the session from the
record with the seats (``rooms.standing``), so a lost event (or none: a row deleted by hand)
still delivers nothing; and the account change tells the owner's sockets at once
(``owner.session_check``), so an idle tab closes without waiting for anything to be said. With
that event lost too, the record sweep closes an idle tab within a few sweeps, expiry by time
alone included.

Real parts throughout: the project's ASGI application with its session and auth middleware,
Django's own sign-out and password-change views through the test client, the database's
session rows, and the in-memory channel layer.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from rooms import consumers, services, standing
from rooms.models import RoomState
from rooms.protocol import CloseCode
from synapsia.asgi import application
from tests.rooms.conftest import SWEEP_SECONDS
from tests.socket_frames import closed_with_nothing_before, heard, join, layer_dropping, say

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "correct horse 42"  # make_owner's
NEW_PASSWORD = "a new horse 4242"
SITE = [(b"host", b"127.0.0.1:8000"), (b"origin", b"http://127.0.0.1:8000")]


@pytest.fixture
def slow_sweep(settings: Any) -> None:
    """No record sweep within a test's time: what closes a socket is the event or the
    delivery check, never the sweep."""
    settings.SYNAPSIA = {**settings.SYNAPSIA, "CATCH_UP_SECONDS": 600.0}


@pytest.fixture
def lost_session_events(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    return layer_dropping(monkeypatch, {"owner.session_check"})


def _signed_in(owner: Any) -> Client:
    """A browser signed in with the password, as on the login page (its own session)."""
    client = Client()
    assert client.login(username=owner.username, password=PASSWORD)
    return client


def _key(client: Client) -> str:
    return str(client.cookies["sessionid"].value)


async def _tab(room_id: Any, client: Client) -> WebsocketCommunicator:
    """The room page's socket for ``client``'s session, past its welcome."""
    cookie = (b"cookie", f"sessionid={_key(client)}".encode())
    socket = WebsocketCommunicator(application, f"/ws/rooms/{room_id}/", headers=[*SITE, cookie])
    assert (await socket.connect())[0]
    welcome = await socket.receive_json_from(timeout=5)
    assert (welcome["type"], welcome["body"]["participant"]) == ("welcome", "owner")
    return socket


def _password_changed_from(client: Client) -> None:
    answer = client.post(
        "/settings/password/",
        {"old_password": PASSWORD, "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )
    assert answer.status_code == 302, answer


def _deactivated(owner: Any) -> None:
    """As the operator's admin page does: the user saved with ``is_active`` off."""
    user = get_user_model().objects.get(pk=owner.pk)
    user.is_active = False
    user.save()


# --- (1)-(3): the account change closes an idle tab at once (the event) ------------------


async def test_signing_out_in_another_tab_closes_the_open_room_tab(
    make_open_room: Any, slow_sweep: None
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    browser = await database_sync_to_async(_signed_in)(setup.a.owner)
    tab = await _tab(setup.room.id, browser)
    bob_tab = await _tab(setup.room.id, await database_sync_to_async(_signed_in)(setup.b.owner))
    answer = await database_sync_to_async(browser.post)("/logout/")
    assert answer.status_code == 302
    # Nothing is said in the room and the sweep is far off: the sign-out's event closes it.
    assert await closed_with_nothing_before(tab) == CloseCode.UNAUTHENTICATED
    # Bob, whose session is his own and valid, is untouched and still given the room.
    b = await join(setup.room.id, setup.b.token)
    await b.send_json_to(say("bob's tab still hears this", "b-1"))
    await heard(bob_tab, "bob's tab still hears this")
    for socket in (tab, bob_tab, b):
        await socket.disconnect()


async def test_a_password_change_closes_the_stolen_laptop_s_tab(
    make_open_room: Any, slow_sweep: None
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    stolen = await database_sync_to_async(_signed_in)(setup.a.owner)
    phone = await database_sync_to_async(_signed_in)(setup.a.owner)
    stolen_tab = await _tab(setup.room.id, stolen)
    phone_tab = await _tab(setup.room.id, phone)
    await database_sync_to_async(_password_changed_from)(phone)
    assert await closed_with_nothing_before(stolen_tab) == CloseCode.UNAUTHENTICATED
    # The session that changed it stays signed in, under a new key (Django cycles it): the
    # tab opened on the old key closes too, and the page's reload opens one that is given
    # the room again.
    assert await closed_with_nothing_before(phone_tab) == CloseCode.UNAUTHENTICATED
    again = await _tab(setup.room.id, phone)
    b = await join(setup.room.id, setup.b.token)
    await b.send_json_to(say("only the phone's new tab hears this", "b-1"))
    await heard(again, "only the phone's new tab hears this")
    for socket in (stolen_tab, phone_tab, again, b):
        await socket.disconnect()


async def test_deactivating_the_owner_closes_their_open_tab(
    make_open_room: Any, slow_sweep: None
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    tab = await _tab(setup.room.id, await database_sync_to_async(_signed_in)(setup.a.owner))
    await database_sync_to_async(_deactivated)(setup.a.owner)
    assert await closed_with_nothing_before(tab) == CloseCode.UNAUTHENTICATED
    await tab.disconnect()


async def test_an_owner_signing_out_elsewhere_keeps_this_tab_s_valid_session(
    make_open_room: Any, slow_sweep: None
) -> None:
    """The phone signs out; the laptop's session is its own, still valid: the event makes
    the laptop's tab re-read its session, and it keeps receiving."""
    setup = await database_sync_to_async(make_open_room)()
    laptop = await database_sync_to_async(_signed_in)(setup.a.owner)
    phone = await database_sync_to_async(_signed_in)(setup.a.owner)
    laptop_tab = await _tab(setup.room.id, laptop)
    phone_tab = await _tab(setup.room.id, phone)
    assert (await database_sync_to_async(phone.post)("/logout/")).status_code == 302
    assert await closed_with_nothing_before(phone_tab) == CloseCode.UNAUTHENTICATED
    assert await laptop_tab.receive_nothing(timeout=0.5)
    b = await join(setup.room.id, setup.b.token)
    for n in (1, 2):
        await b.send_json_to(say(f"still shown {n}", f"b-{n}"))
        await heard(laptop_tab, f"still shown {n}")
    for socket in (laptop_tab, phone_tab, b):
        await socket.disconnect()


# --- (4) and every other way a session ends without an event: the delivery check ----------


def _row_deleted(client: Client, owner: Any) -> None:
    Session.objects.filter(session_key=_key(client)).delete()  # an operator ending it


def _row_expired(client: Client, owner: Any) -> None:
    Session.objects.filter(session_key=_key(client)).update(
        expire_date=timezone.now() - dt.timedelta(seconds=1)
    )


def _deactivated_by_update(client: Client, owner: Any) -> None:
    get_user_model().objects.filter(pk=owner.pk).update(is_active=False)  # no signal


def _password_set_by_update(client: Client, owner: Any) -> None:
    user = get_user_model().objects.get(pk=owner.pk)
    user.set_password(NEW_PASSWORD)
    get_user_model().objects.filter(pk=owner.pk).update(password=user.password)  # no signal


def _signed_in_as_someone_else(client: Client, owner: Any) -> None:
    """The row's data replaced by another user's signed session data: the row verifies,
    but it signs in mallory, not the owner the socket was admitted for."""
    mallory = get_user_model().objects.create_user(username="mallory", password=PASSWORD)
    other = _signed_in(mallory)
    data = Session.objects.get(session_key=_key(other)).session_data
    Session.objects.filter(session_key=_key(client)).update(session_data=data)


@pytest.mark.parametrize(
    "ended",
    [
        _row_deleted,
        _row_expired,
        _deactivated_by_update,
        _password_set_by_update,
        _signed_in_as_someone_else,
    ],
    ids=lambda f: f.__name__.strip("_"),
)
async def test_a_session_ended_without_any_event_is_given_nothing_more(
    make_open_room: Any, slow_sweep: None, ended: Callable[[Client, Any], None]
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    browser = await database_sync_to_async(_signed_in)(setup.a.owner)
    tab = await _tab(setup.room.id, browser)
    bob_tab = await _tab(setup.room.id, await database_sync_to_async(_signed_in)(setup.b.owner))
    b = await join(setup.room.id, setup.b.token)
    await b.send_json_to(say("shown while signed in", "b-1"))
    await heard(tab, "shown while signed in")
    await heard(bob_tab, "shown while signed in")

    await database_sync_to_async(ended)(browser, setup.a.owner)
    await b.send_json_to(say("the budget is 80", "b-2"))
    # The delivery's check read the session: the tab is closed instead of given the message.
    assert await closed_with_nothing_before(tab) == CloseCode.UNAUTHENTICATED
    await heard(bob_tab, "the budget is 80")  # a valid session keeps receiving
    for socket in (tab, bob_tab, b):
        await socket.disconnect()


async def test_a_room_state_change_is_not_told_to_an_ended_session(
    make_open_room: Any, slow_sweep: None
) -> None:
    """The room's new state is room data too: an owner's tab is told it only while its
    session stands (a closed room still tells a signed-in owner that it closed)."""
    setup = await database_sync_to_async(make_open_room)()
    browser = await database_sync_to_async(_signed_in)(setup.a.owner)
    tab = await _tab(setup.room.id, browser)
    bob_tab = await _tab(setup.room.id, await database_sync_to_async(_signed_in)(setup.b.owner))
    await database_sync_to_async(_row_deleted)(browser, setup.a.owner)
    await database_sync_to_async(services.room_transition)(
        owner=setup.b.owner, room_id=setup.room.id, to=RoomState.CLOSED
    )
    assert await closed_with_nothing_before(tab) == CloseCode.UNAUTHENTICATED
    told = await bob_tab.receive_json_from(timeout=5)
    assert (told["type"], told["body"]["state"]) == ("room_state", "closed")
    assert await closed_with_nothing_before(bob_tab) == CloseCode.ROOM_NOT_JOINABLE
    for socket in (tab, bob_tab):
        await socket.disconnect()


async def test_a_forged_or_ended_session_cookie_opens_no_tab(make_open_room: Any) -> None:
    setup = await database_sync_to_async(make_open_room)()
    browser = await database_sync_to_async(_signed_in)(setup.a.owner)
    ended = _key(browser)
    await database_sync_to_async(_row_deleted)(browser, setup.a.owner)
    for key in ("forged0000000000000000000000000", ended):
        socket = WebsocketCommunicator(
            application,
            f"/ws/rooms/{setup.room.id}/",
            headers=[*SITE, (b"cookie", f"sessionid={key}".encode())],
        )
        assert (await socket.connect())[0]
        assert await closed_with_nothing_before(socket) == CloseCode.UNAUTHENTICATED
        await socket.send_input({"type": "websocket.disconnect", "code": 4401})
        await socket.wait()


# --- events lost as well: the record sweep closes an idle tab -------------------------------


async def test_with_the_event_lost_an_idle_tab_is_closed_by_the_sweep(
    make_open_room: Any, fast_sweep: None, lost_session_events: list[str]
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    browser = await database_sync_to_async(_signed_in)(setup.a.owner)
    tab = await _tab(setup.room.id, browser)
    laptop_tab = await _tab(setup.room.id, await database_sync_to_async(_signed_in)(setup.a.owner))
    assert (await database_sync_to_async(browser.post)("/logout/")).status_code == 302
    assert lost_session_events == ["owner.session_check"]
    assert await closed_with_nothing_before(tab) == CloseCode.UNAUTHENTICATED
    assert await laptop_tab.receive_nothing(timeout=5 * SWEEP_SECONDS)  # its session is valid
    await laptop_tab.disconnect()
    await tab.disconnect()


async def test_a_session_expiring_by_time_alone_closes_an_idle_tab(
    make_open_room: Any, fast_sweep: None
) -> None:
    """Expiry commits nothing, so the sweep's record mark does not move: the sweep reads in
    full once the earliest expiry it read is due."""
    setup = await database_sync_to_async(make_open_room)()
    browser = await database_sync_to_async(_signed_in)(setup.a.owner)
    expires = timezone.now() + dt.timedelta(seconds=1.5)
    await database_sync_to_async(Session.objects.filter(session_key=_key(browser)).update)(
        expire_date=expires
    )
    tab = await _tab(setup.room.id, browser)
    assert await tab.receive_nothing(timeout=0.5)  # not yet expired: nothing closes it
    assert await closed_with_nothing_before(tab, timeout=10) == CloseCode.UNAUTHENTICATED
    assert timezone.now() >= expires
    await tab.disconnect()


# --- the check's cost: one statement for an owner's hop, none for an agent's ----------------


def _readers(setup: Any, client: Client) -> tuple[standing.Reader, standing.Reader]:
    agent_b = standing.Reader(setup.room.id, setup.b.owner.pk, setup.b.agent.id)
    owner_a = standing.Reader(setup.room.id, setup.a.owner.pk, None, _key(client))
    return agent_b, owner_a


def _hop_statements(readers: list[standing.Reader]) -> tuple[int, Any]:
    with CaptureQueriesContext(connection) as queries:
        _, _, verdicts = consumers._desk_hop_parts(acks=[], runs=[], readers=readers)
    return len(queries), verdicts


def test_an_owner_delivery_hop_reads_one_statement_more_and_an_agent_hop_none(
    make_open_room: Any,
) -> None:
    setup = make_open_room()
    agent_b, owner_a = _readers(setup, _signed_in(setup.a.owner))
    bob = _signed_in(setup.b.owner)
    owner_b = standing.Reader(setup.room.id, setup.b.owner.pk, None, _key(bob))
    assert _hop_statements([agent_b]) == (1, {agent_b: None})
    assert _hop_statements([owner_a]) == (2, {owner_a: None})
    # Any number of owners and agents in one hop: still the one statement more.
    counted, verdicts = _hop_statements([agent_b, owner_a, owner_b])
    assert (counted, set(verdicts.values())) == (2, {None})
    print(f"statements per hop: agent {1}, owner {2}, mixed {counted}")


def test_the_verdict_is_never_kept_between_hops(make_open_room: Any) -> None:
    setup = make_open_room()
    browser = _signed_in(setup.a.owner)
    _, owner_a = _readers(setup, browser)
    assert standing.reader_standing(owner_a) is None
    _row_deleted(browser, setup.a.owner)
    assert standing.reader_standing(owner_a) == CloseCode.UNAUTHENTICATED


def test_an_owner_reader_with_another_s_session_or_none_is_out(
    make_open_room: Any, make_owner: Any
) -> None:
    setup = make_open_room()
    mallory_user = make_owner("mallory")
    mallory = _signed_in(mallory_user)
    borrowed = standing.Reader(setup.room.id, setup.a.owner.pk, None, _key(mallory))
    none = standing.Reader(setup.room.id, setup.a.owner.pk, None)
    assert standing.readers_standing([borrowed, none]) == {
        borrowed: CloseCode.UNAUTHENTICATED,
        none: CloseCode.UNAUTHENTICATED,
    }
    # A stranger with a valid session of her own is refused by the seats, as before.
    stranger = standing.Reader(setup.room.id, mallory_user.pk, None, _key(mallory))
    assert standing.reader_standing(stranger) == CloseCode.FORBIDDEN


def test_the_sweep_reads_the_watched_owners_sessions_in_its_hop(make_open_room: Any) -> None:
    setup = make_open_room()
    browser = _signed_in(setup.a.owner)
    pair = (setup.a.owner.pk, _key(browser))
    with CaptureQueriesContext(connection) as queries:
        agents_only = standing.rooms_swept([setup.room.id])
    assert len(queries) == 2 and not agents_only.sessions  # the mark and the seats
    with CaptureQueriesContext(connection) as queries:
        swept = standing.rooms_swept([setup.room.id], sessions=[pair])
    assert len(queries) == 3  # and the sessions
    facts = swept.sessions[pair]
    assert facts is not None and facts.expires_at is not None
    assert facts.expires_at > timezone.now()
    _row_deleted(browser, setup.a.owner)
    assert standing.rooms_swept([setup.room.id], sessions=[pair]).sessions[pair] is None


def test_another_session_engine_is_read_through_its_own_store(
    make_open_room: Any, settings: Any
) -> None:
    """An engine without a table (here the cache's) loads each session from its own store;
    the owners' user rows are still one statement."""
    from importlib import import_module

    settings.SESSION_ENGINE = "django.contrib.sessions.backends.cache"
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    setup = make_open_room()
    store = import_module(settings.SESSION_ENGINE).SessionStore()
    user = setup.a.owner
    store.update(
        {
            "_auth_user_id": str(user.pk),
            "_auth_user_backend": "django.contrib.auth.backends.ModelBackend",
            "_auth_user_hash": user.get_session_auth_hash(),
        }
    )
    store.create()
    store.save()
    reader = standing.Reader(setup.room.id, user.pk, None, store.session_key)
    assert standing.reader_standing(reader) is None
    store.delete()
    assert standing.reader_standing(reader) == CloseCode.UNAUTHENTICATED


async def test_checks_are_made_per_delivery_not_per_socket(
    make_open_room: Any, slow_sweep: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each live delivery to the tab reads the session again (through the say desk)."""
    setup = await database_sync_to_async(make_open_room)()
    tab = await _tab(setup.room.id, await database_sync_to_async(_signed_in)(setup.a.owner))
    read: list[int] = []
    real = standing.owner_sessions_read

    def counted(pairs: Any) -> Any:
        pairs = list(pairs)
        read.append(len(pairs))
        return real(pairs)

    monkeypatch.setattr(standing, "owner_sessions_read", counted)
    b = await join(setup.room.id, setup.b.token)
    for n in (1, 2, 3):
        await b.send_json_to(say(f"m{n}", f"b-{n}"))
        assert (await b.receive_json_from(timeout=5))["type"] == "sent"
        await heard(tab, f"m{n}")
    assert read == [1, 1, 1]  # one session read per delivery, none kept
    await tab.disconnect()
    await b.disconnect()

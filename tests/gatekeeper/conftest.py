"""Gatekeeper fixtures: a real HTTP receiver on a free loopback port, and (when tasks are not
eager, i.e. the services pass) a real Celery worker consuming from Redis in a thread."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from gatekeeper.adapters import ExecutionContext, Unavailable
from gatekeeper.adapters.webhook import PENDING_REASON
from gatekeeper.models import WebhookDelivery, WebhookEndpoint
from gatekeeper.webhooks import webhook_delivery_create
from rooms.models import Room
from slips import vault
from tests.bookings import BUDGET, WITHIN, booking
from tests.loopback_http import QuietHandler, loopback_server
from tests.slips.conftest import Device, seat_slip_sign


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """What the local webhook receiver saw, and how each path answers.

    ``script[path]`` is a list of actions used in order (the last one repeats): an int status,
    or ``("sleep", seconds)`` to answer 200 only after ``seconds``.
    """

    base_url: str
    script: dict[str, list[Any]] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str) -> str:
        return self.base_url + path

    def seen(self, path: str) -> list[Received]:
        with self.lock:
            return [r for r in self.received if r.path == path]


def _handler_for(receiver: Receiver) -> type[QuietHandler]:
    class Handler(QuietHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            with receiver.lock:
                receiver.received.append(Received(self.path, dict(self.headers.items()), body))
                n = sum(1 for r in receiver.received if r.path == self.path)
                actions = receiver.script.get(self.path, [200])
                action = actions[min(n, len(actions)) - 1]
            if isinstance(action, tuple):
                time.sleep(action[1])
                action = 200
            redirect = {"Location": receiver.base_url + "/ok"} if 300 <= action < 400 else None
            self.answer(action, b"{}", redirect)

    return Handler


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A real HTTP server on 127.0.0.1 (free port), in a thread."""
    rec = Receiver(base_url="")
    with loopback_server(_handler_for(rec)) as base_url:
        rec.base_url = base_url
        yield rec


@pytest.fixture
def webhook_settings(settings: Any) -> Any:
    """Loopback is a listed insecure host (production lists none), short timeouts."""
    settings.SYNAPSIA = {
        **settings.SYNAPSIA,
        "WEBHOOK_INSECURE_HOSTS": ["127.0.0.1"],
        "WEBHOOK_TIMEOUT_SECONDS": 0.4,
    }
    return settings


@pytest.fixture(scope="module")
def celery_worker() -> Iterator[bool]:
    """A real worker (solo pool, in a thread) when tasks are not eager; yields whether one runs.

    The services pass has a Redis broker and no worker process, so the webhook's retries run
    in this worker exactly as in production, backoff countdowns included.
    """
    from synapsia.celery import app

    if app.conf.task_always_eager:
        yield False
        return
    from celery.contrib.testing.worker import start_worker

    app.control.purge()  # tasks left queued by an earlier, interrupted run
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
        yield True


def settle(call: Callable[[], Any], *, timeout: float = 60.0) -> Any:
    """Call ``call`` (an ``execute`` with a fixed idempotency key) until it is no longer
    pending: with a worker, the first answer is ``delivery_pending`` and replays of the same
    key report the final outcome."""
    deadline = time.monotonic() + timeout
    outcome = call()
    while isinstance(outcome, Unavailable) and outcome.reason_code == PENDING_REASON:
        if time.monotonic() > deadline:
            raise AssertionError("webhook delivery did not settle")
        time.sleep(0.1)
        outcome = call()
    return outcome


def idempotency_key() -> str:
    return f"act-{uuid.uuid4().hex}"


def pending_delivery(endpoint: WebhookEndpoint) -> WebhookDelivery:
    """A new delivery to ``endpoint``, not yet attempted (its body names a room, as every
    delivery's does: the room's key seals it)."""
    delivery, _ = webhook_delivery_create(
        delivery_id=uuid.uuid4(),
        endpoint=endpoint,
        idempotency_key=uuid.uuid4().hex,
        tool="send_invitation",
        arguments_sha256="0" * 64,
        body=b'{"room_id": "' + str(uuid.uuid4()).encode() + b'"}',
    )
    return delivery


@pytest.fixture
def context_for() -> Callable[[Any], ExecutionContext]:
    def make(owner: Any) -> ExecutionContext:
        return ExecutionContext(room_id=uuid.uuid4(), agent_id=uuid.uuid4(), owner_id=owner.pk)

    return make


@pytest.fixture
def make_user(django_user_model: Any) -> Callable[[str], Any]:
    """An owner without a password (hashing one costs most of a second per test)."""

    def make(username: str) -> Any:
        return django_user_model.objects.create(username=username)

    return make


# --- an open room where Alice's slip clears booking a table ------------------------------

# A booking the room's catalogue accepts (tests.bookings): Sora Sushi for two.
BOOK = booking(WITHIN)


@dataclass
class Negotiation:
    room: Room
    setup: Any
    device: Device
    key: Any

    def act(
        self, venue_id: str = WITHIN, ref: str = "act-1", tool: str = "book_table", **extra: Any
    ) -> Any:
        """Alice's agent asks to book ``venue_id`` (a catalogue booking, tests.bookings)
        through the room: ``WITHIN`` her budget, or ``OVER`` it."""
        from rooms import forks

        return forks.action_for_agent(
            room_id=self.room.id,
            agent_id=self.setup.a.agent.id,
            client_id=ref,
            tool=tool,
            arguments={**booking(venue_id), **extra},
        )

    def approve(self, grant: Any) -> Any:
        """Alice approves ``grant`` with her device key (``rooms.forks.grant_decide``)."""
        from rooms import forks

        return forks.grant_decide(
            owner=self.setup.a.owner,
            room_id=self.room.id,
            grant_id=grant.id,
            approve=True,
            key_id=self.key.id,
            signature=self.device.sign_grant(grant),
        )


@pytest.fixture
def negotiation(make_open_room) -> Negotiation:
    """Alice's slip clears booking a table (no approval), and her budget is 20-60 EUR per
    person (``tests.bookings.BUDGET``)."""
    setup = make_open_room()
    key, device = seat_slip_sign(
        setup.a,
        setup.room.id,
        [{"resource": "tool:book_table", "operation": "act", "approval": "none", "max_uses": 5}],
    )
    vault.vault_item_create(
        owner=setup.a.owner,
        content=BUDGET,
    )
    return Negotiation(setup.room, setup, device, key)

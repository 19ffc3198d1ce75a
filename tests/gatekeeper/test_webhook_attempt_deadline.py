"""A webhook attempt ends within its deadline however slowly the receiver answers: a
receiver that sends its answer (or its TLS handshake) a byte at a time, each byte within the
per-operation timeout, held the worker for as long as it kept dripping (here 30 s; in the wild,
64 KiB at one byte every few seconds is days). Against real sockets on loopback."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gatekeeper.models import DeliveryStatus
from gatekeeper.webhooks import (
    ATTEMPT_TIMEOUTS,
    WebhookTransient,
    webhook_delivery_attempt,
    webhook_endpoint_create,
)
from tests.gatekeeper.conftest import pending_delivery

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("webhook_settings")]

DRIP_SECONDS = 30.0  # how long each receiver below keeps dripping at most
TIMEOUT = 0.4  # WEBHOOK_TIMEOUT_SECONDS in these tests (the webhook_settings fixture)


@contextlib.contextmanager
def dripping_receiver(opening: bytes, *, read_request: bool) -> Iterator[int]:
    """A TCP server on 127.0.0.1 that (after reading the request, if asked) sends ``opening``
    at once, then one byte every 0.1 s until the client goes or DRIP_SECONDS pass; yields
    its port."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            if read_request:
                conn.settimeout(5)
                received = b""
                while b"\r\n\r\n" not in received:
                    received += conn.recv(4096)
            conn.sendall(opening)
            ends = time.monotonic() + DRIP_SECONDS
            while not stop.is_set() and time.monotonic() < ends:
                conn.sendall(b"x")
                time.sleep(0.1)

    def accept() -> None:
        with contextlib.suppress(OSError):
            while not stop.is_set():
                conn, _ = listener.accept()
                threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()


def _timed_attempt(owner: Any, url: str, *, last_attempt: bool) -> tuple[Any, float, Any]:
    """One attempt at a new delivery to ``url``: (status or the raised error, seconds, row)."""
    delivery = pending_delivery(webhook_endpoint_create(owner=owner, url=url).endpoint)
    began = time.monotonic()
    try:
        outcome: Any = webhook_delivery_attempt(delivery_id=delivery.id, last_attempt=last_attempt)
    except WebhookTransient as exc:
        outcome = exc
    elapsed = time.monotonic() - began
    delivery.refresh_from_db()
    return outcome, elapsed, delivery


def test_an_answer_dripped_a_byte_at_a_time_ends_at_the_deadline(make_user: Any) -> None:
    """A status line that never ends: cut at the deadline, to be tried again."""
    with dripping_receiver(b"HTTP/1.1 2", read_request=True) as port:
        outcome, elapsed, delivery = _timed_attempt(
            make_user("hookie"), f"http://127.0.0.1:{port}/hook", last_attempt=False
        )
    assert isinstance(outcome, WebhookTransient) and outcome.reason_code == "webhook_timeout"
    assert f"within {ATTEMPT_TIMEOUTS * TIMEOUT:g}s" in outcome.message
    assert elapsed < ATTEMPT_TIMEOUTS * TIMEOUT + 3  # not the receiver's 30 s
    assert (delivery.status, delivery.attempt_until) == (DeliveryStatus.PENDING, None)


def test_the_last_attempt_cut_at_the_deadline_ends_unavailable(make_user: Any) -> None:
    with dripping_receiver(b"HTTP/1.1 2", read_request=True) as port:
        outcome, elapsed, delivery = _timed_attempt(
            make_user("hookie"), f"http://127.0.0.1:{port}/hook", last_attempt=True
        )
    assert outcome == DeliveryStatus.UNAVAILABLE
    assert elapsed < ATTEMPT_TIMEOUTS * TIMEOUT + 3
    assert delivery.reason_code == "webhook_timeout"


@pytest.mark.parametrize(
    "opening",
    [
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n", id="body"),
        pytest.param(b"HTTP/1.1 200 OK\r\nX-Slow: ", id="headers"),
    ],
)
def test_a_whole_status_stands_though_the_rest_is_dripped(make_user: Any, opening: bytes) -> None:
    """The receiver's status line came whole (it accepted the delivery); only its headers
    or its (unused) body drip: cut at the deadline, the status stands (posting again would
    only make the receiver deduplicate)."""
    with dripping_receiver(opening, read_request=True) as port:
        outcome, elapsed, delivery = _timed_attempt(
            make_user("hookie"), f"http://127.0.0.1:{port}/hook", last_attempt=False
        )
    assert outcome == DeliveryStatus.SUCCEEDED
    assert elapsed < ATTEMPT_TIMEOUTS * TIMEOUT + 3
    assert (delivery.last_status_code, delivery.attempts) == (200, 1)


def test_a_tls_handshake_dripped_a_byte_at_a_time_ends_at_the_deadline(make_user: Any) -> None:
    """A TLS record header announcing 16 KiB, then its bytes one at a time: the handshake
    waits for the whole record, each byte within the per-operation timeout."""
    with dripping_receiver(b"\x16\x03\x03\x40\x00", read_request=False) as port:
        outcome, elapsed, _ = _timed_attempt(
            make_user(f"hookie-{uuid.uuid4().hex[:6]}"),
            f"https://127.0.0.1:{port}/hook",
            last_attempt=False,
        )
    assert isinstance(outcome, WebhookTransient) and outcome.reason_code == "webhook_timeout"
    assert elapsed < ATTEMPT_TIMEOUTS * TIMEOUT + 3


@pytest.fixture
def tls_receiver(tmp_path: Any) -> Iterator[tuple[str, str, list[bytes]]]:
    """An HTTPS receiver on 127.0.0.1 with a certificate of its own for that address (not
    one any system trusts): yields its address, the certificate's file and the bodies it
    got."""
    import importlib.util
    import ssl

    from tests.loopback_http import QuietHandler, loopback_server

    # The certificate the compose deployment makes for itself (deploy/tls), for 127.0.0.1.
    spec = importlib.util.spec_from_file_location(
        "selfsigned", Path(__file__).parents[2] / "deploy" / "tls" / "selfsigned.py"
    )
    assert spec is not None and spec.loader is not None
    selfsigned = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(selfsigned)
    selfsigned.write_certificate(tmp_path, ["127.0.0.1"])
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    bodies: list[bytes] = []

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            bodies.append(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            self.answer(200, b"{}")

    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert_file, key_file)
    with loopback_server(Handler, tls=tls) as base_url:
        yield base_url, str(cert_file), bodies


def test_tls_delivers_to_a_trusted_receiver_and_refuses_an_untrusted_one(
    make_user: Any, monkeypatch: pytest.MonkeyPatch, tls_receiver: tuple[str, str, list[bytes]]
) -> None:
    """The handshake made within the deadline is still verified: a certificate no trusted
    authority signed is refused (nothing posted); trusted, the delivery is posted once."""
    import ssl

    base_url, cert_file, bodies = tls_receiver
    url = base_url + "/hook"
    outcome, _, delivery = _timed_attempt(make_user("untrusting"), url, last_attempt=False)
    assert outcome == DeliveryStatus.REFUSED and delivery.reason_code == "webhook_tls_invalid"
    assert bodies == []

    system_trust = ssl.create_default_context

    def trusting() -> ssl.SSLContext:
        context = system_trust()
        context.load_verify_locations(cafile=cert_file)
        return context

    monkeypatch.setattr(ssl, "create_default_context", trusting)
    outcome, _, delivery = _timed_attempt(make_user("trusting"), url, last_attempt=False)
    assert (outcome, delivery.last_status_code) == (DeliveryStatus.SUCCEEDED, 200)
    assert len(bodies) == 1 and bodies[0] == delivery.body.encode()

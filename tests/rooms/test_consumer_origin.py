"""A browser (owner) socket's Origin must be exactly this site's: scheme, host and port.

Before, only the host was compared, so a page served from another port of the same host
(``http://127.0.0.1:9999``, ``http://localhost:31337``) could open an owner's socket with her
cookie. The site's origin is the upgrade request's ``Host`` with the scheme Django would
see (the proxy's header where ``SECURE_PROXY_SSL_HEADER`` trusts one).
"""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from rooms.handshake import origin_allowed
from rooms.protocol import CloseCode
from synapsia.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)

SITE = [(b"host", b"127.0.0.1:8000")]


@pytest.mark.parametrize(
    ("origin", "host", "allowed"),
    [
        ("http://127.0.0.1:8000", b"127.0.0.1:8000", True),
        ("http://127.0.0.1:9999", b"127.0.0.1:8000", False),  # another port, same host
        ("http://localhost:31337", b"127.0.0.1:8000", False),
        ("http://localhost:31337", b"localhost:8000", False),
        ("http://localhost:8000", b"127.0.0.1:8000", False),  # another host, same port
        ("https://127.0.0.1:8000", b"127.0.0.1:8000", False),  # another scheme
        ("http://127.0.0.1", b"127.0.0.1:8000", False),
        ("http://LOCALHOST:8000", b"localhost:8000", True),  # host names are case-blind
        ("http://localhost:80", b"localhost", True),  # the default port is the same origin
        ("http://localhost", b"localhost:80", True),
        ("http://127.0.0.1:8000/room", b"127.0.0.1:8000", False),  # an origin has no path
        ("http://user@127.0.0.1:8000", b"127.0.0.1:8000", False),
        ("null", b"127.0.0.1:8000", False),
        ("ws://127.0.0.1:8000", b"127.0.0.1:8000", False),
        ("http://127.0.0.1:notaport", b"127.0.0.1:8000", False),
        ("http://evil.example:8000", b"evil.example:8000", False),  # not an allowed host
    ],
)
def test_only_the_exact_origin_of_the_site(origin: str, host: bytes, allowed: bool) -> None:
    assert origin_allowed(origin, headers=[(b"host", host)]) is allowed


def test_the_scheme_is_the_one_the_proxy_reports_when_trusted(settings: Any) -> None:
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    behind_tls = [(b"host", b"localhost"), (b"x-forwarded-proto", b"https")]
    assert origin_allowed("https://localhost", headers=behind_tls)
    assert not origin_allowed("http://localhost", headers=behind_tls)
    assert origin_allowed("http://localhost", headers=[(b"host", b"localhost")])
    settings.SECURE_PROXY_SSL_HEADER = None
    # Untrusted, the header counts for nothing: the socket's own scheme decides.
    assert not origin_allowed("https://localhost", headers=behind_tls)
    assert origin_allowed(
        "https://localhost", headers=[(b"host", b"localhost")], scope_scheme="wss"
    )


def test_a_csrf_trusted_origin_is_allowed_exactly(settings: Any) -> None:
    settings.CSRF_TRUSTED_ORIGINS = ["https://app.example"]
    assert origin_allowed("https://app.example", headers=SITE)
    assert not origin_allowed("https://app.example:8443", headers=SITE)
    assert not origin_allowed("http://app.example", headers=SITE)


def _session_cookie(owner: object) -> bytes:
    client = Client()
    client.force_login(owner)  # type: ignore[arg-type]
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def _close_code_or_welcome(path: str, headers: list[tuple[bytes, bytes]]) -> Any:
    socket = WebsocketCommunicator(application, path, headers=headers)
    assert (await socket.connect())[0]
    output = await socket.receive_output(timeout=5)
    await socket.disconnect()
    if output["type"] == "websocket.close":
        return output["code"]
    return "welcome" if '"welcome"' in output["text"] else output


@pytest.mark.parametrize(
    ("origin", "expected"),
    [
        (b"http://127.0.0.1:8000", "welcome"),
        (b"http://127.0.0.1:9999", CloseCode.ORIGIN_NOT_ALLOWED),
        (b"http://localhost:31337", CloseCode.ORIGIN_NOT_ALLOWED),
    ],
)
async def test_an_owner_socket_from_another_port_is_refused(
    make_open_room: Any, origin: bytes, expected: Any
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    cookie = await database_sync_to_async(_session_cookie)(setup.a.owner)
    headers = [*SITE, (b"cookie", cookie), (b"origin", origin)]
    assert await _close_code_or_welcome(f"/ws/rooms/{setup.room.id}/", headers) == expected

"""ASGI entry point: HTTP goes to Django, WebSockets to the room consumers.

Agents authenticate with a bearer token and browsers with their session cookie; both are
resolved (and the Origin checked) by ``rooms.handshake`` so every refusal carries a
documented close code instead of a bare HTTP 403.
"""

from __future__ import annotations

import os
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "synapsia.settings")
# Django must be set up before anything imports models.
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from rooms.routing import websocket_urlpatterns  # noqa: E402
from synapsia.cpu import server_cpu_pin  # noqa: E402
from synapsia.heap import start_up_heap_freeze  # noqa: E402

server_cpu_pin()  # SYNAPSIA_SERVER_CPU: this server process on one CPU, if asked

_rooms = URLRouter(websocket_urlpatterns)
_browser_rooms = AuthMiddlewareStack(_rooms)


async def websocket(scope: dict[str, Any], receive: Any, send: Any) -> Any:
    """Agents (a bearer token) go straight to the room router; browsers through the session
    and auth middleware. The handshake decides a bearer socket by its token alone, so the
    session lookup (a database hop per connect) would only be discarded."""
    for key, _ in scope.get("headers", ()):
        if key.lower() == b"authorization":
            return await _rooms(scope, receive, send)
    return await _browser_rooms(scope, receive, send)


application = ProtocolTypeRouter({"http": django_asgi_app, "websocket": websocket})

start_up_heap_freeze()  # what start-up built, out of the cycle collector's walks

"""ASGI entry point: HTTP goes to Django, WebSockets to the room consumers.

Agents authenticate with a bearer token and browsers with their session cookie; both are
resolved (and the Origin checked) by ``rooms.handshake`` so every refusal carries a
documented close code instead of a bare HTTP 403.
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "synapsia.settings")
# Django must be set up before anything imports models.
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from rooms.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AuthMiddlewareStack(URLRouter(websocket_urlpatterns)),
    }
)

"""The command an owner runs to connect the reference negotiator to a room seat.

Shown on the agents page (with the one-time token, the room left as a placeholder) and on the
room page (with the room's own address, the token left as a placeholder: it is never shown twice).
"""

from __future__ import annotations

import shlex

from django.http import HttpRequest

CONNECT_MODULE = "agents.negotiator"
TOKEN_PLACEHOLDER = "YOUR-AGENT-TOKEN"  # noqa: S105 (a placeholder the owner replaces)


def agent_socket_url(request: HttpRequest, room_id: str) -> str:
    """The room socket's address as seen from the owner's browser (ws, or wss behind TLS)."""
    scheme = "wss" if request.is_secure() else "ws"
    return f"{scheme}://{request.get_host()}/ws/rooms/{room_id}/"


def agent_connect_argv(*, socket_url: str, token: str) -> list[str]:
    """The command that connects the reference negotiator with this token (``agents.cli``'s
    ``--url`` and ``--token``)."""
    return [".venv/bin/python", "-m", CONNECT_MODULE, "--url", socket_url, "--token", token]


def agent_connect_command(request: HttpRequest, *, room_id: str, token: str) -> str:
    """``agent_connect_argv`` as one shell line."""
    return shlex.join(
        agent_connect_argv(socket_url=agent_socket_url(request, room_id), token=token)
    )

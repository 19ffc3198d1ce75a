"""Liveness and readiness probes for the proxy and the orchestrator."""

from __future__ import annotations

import asyncio

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.db import connection
from django.http import HttpRequest, JsonResponse

READY_TIMEOUT_SECONDS = 2.0


async def healthz(request: HttpRequest) -> JsonResponse:
    """The process is alive and serving."""
    return JsonResponse({"status": "ok"})


def _database_answers() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


async def _channel_layer_answers() -> None:
    layer = get_channel_layer()
    if layer is None:
        raise RuntimeError("no channel layer configured")
    channel = await layer.new_channel()
    await layer.send(channel, {"type": "readyz.probe"})
    message = await layer.receive(channel)
    if message.get("type") != "readyz.probe":
        raise RuntimeError("channel layer returned the wrong message")


async def readyz(request: HttpRequest) -> JsonResponse:
    """The database and the channel layer both answer; 503 naming the failing part if not."""
    checks = {
        "database": database_sync_to_async(_database_answers)(),
        "channel_layer": _channel_layer_answers(),
    }
    failing: dict[str, str] = {}
    for name, check in checks.items():
        try:
            await asyncio.wait_for(check, READY_TIMEOUT_SECONDS)
        except Exception as exc:  # any failure means not ready; name it, don't crash the probe
            failing[name] = f"{type(exc).__name__}: {exc}"
    if failing:
        return JsonResponse({"status": "unavailable", "failing": failing}, status=503)
    return JsonResponse({"status": "ready"})

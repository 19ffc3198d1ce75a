"""Prometheus metrics at ``/metrics``, for the operator's scraper only.

Protected by a bearer token (``SYNAPSIA_METRICS_TOKEN``, compared in constant time); with no
token configured the endpoint does not exist (404). Two kinds of series:

* **gathered at scrape time from the database** (the same numbers from every process, so
  aggregate them with ``max``, not ``sum``): rooms by state, seats of open rooms by standing,
  messages not yet acknowledged, context turns, grants pending, unanswered
  flares by reason, messages and ledger events by kind in the last window, decisions (denials
  by rule; grants by outcome), and what retention purges removed in the window;
* **in-process** (per Daphne process; ``sum`` them): HTTP requests by route name and status
  class, their latency, unhandled exceptions, ledger event insert latency, and room socket
  frames taken by type and refused by limit (counted by ``rooms.limits``).

No label or value carries room content or an identifier of a person, room or agent
(tests/synapsia/test_metrics.py): labels are states, kinds, reasons, route names and rule
ids; a rule id that names an entry (``policy.deny.db.<agent id>``) has the id replaced by
``id``. Time windows are ``SYNAPSIA_METRICS_WINDOW_SECONDS`` (default 3600).
"""

from __future__ import annotations

import hmac
import re
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.core.signals import got_request_exception
from django.db.models import BigIntegerField, Count, F, Q, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from synapsia_protocol import CLIENT_FRAME_TYPES

# No *_created series: they double the series count and tell an operator nothing here.
disable_created_metrics()
REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)

HTTP_REQUESTS = Counter(
    "synapsia_http_requests",
    "HTTP requests answered, by route name and status class.",
    ["route", "status"],
    registry=REGISTRY,
)
HTTP_SECONDS = Histogram(
    "synapsia_http_request_seconds",
    "Time to answer an HTTP request, by route name.",
    ["route"],
    registry=REGISTRY,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
UNHANDLED_EXCEPTIONS = Counter(
    "synapsia_unhandled_exceptions",
    "Requests that ended in an unhandled exception (a 500).",
    registry=REGISTRY,
)

# Room socket frames, by fixed label sets only (never a room, an agent or a person): the type
# of each frame a socket took up for handling (``unreadable``: one the protocol could not
# parse), and the limit (docs/protocol.md, "Limits") each refused frame ran into.
SOCKET_FRAME_TYPES: tuple[str, ...] = (*sorted(CLIENT_FRAME_TYPES), "unreadable")
SOCKET_LIMITS: tuple[str, ...] = (
    "say_rate",
    "context_rate",
    "context_turn",
    "act_rate",
    "grant_rate",
    "inbox",
    "send_buffer",
)
SOCKET_FRAMES_RECEIVED = Counter(
    "synapsia_socket_frames_received",
    "Room socket frames taken up for handling, by frame type (unreadable: not the protocol).",
    ["frame"],
    registry=REGISTRY,
)
SOCKET_FRAMES_REFUSED = Counter(
    "synapsia_socket_frames_refused",
    "Room socket frames refused by a limit, by the limit's name (send_buffer: a socket closed "
    "because its client did not read).",
    ["limit"],
    registry=REGISTRY,
)
# Every series from the start, at 0: a rate() over a series that appears late misses its start.
for _frame in SOCKET_FRAME_TYPES:
    SOCKET_FRAMES_RECEIVED.labels(frame=_frame)
for _limit in SOCKET_LIMITS:
    SOCKET_FRAMES_REFUSED.labels(limit=_limit)

# Ids inside rule ids: a UUID, or the start of one (rule ids are cut to 48 characters, which
# can cut a UUID short), long hex runs and long numbers.
_ID_IN_RULE = re.compile(r"[0-9a-fA-F]{8}(?:[-.][0-9a-fA-F]{1,12})*|[0-9a-fA-F]{16,}|\d{6,}")
_SAFE_LABEL = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,47}$")


def rule_label(rule: object) -> str:
    """A rule id as a label: ids inside it become ``id``; anything unexpected, ``other``."""
    text = _ID_IN_RULE.sub("id", str(rule))
    return text if _SAFE_LABEL.match(text) else "other"


def _window_seconds() -> int:
    return int(getattr(settings, "SYNAPSIA_METRICS_WINDOW_SECONDS", 3600))


class DatabaseCollector(Collector):
    """Reads the current numbers at scrape time: a handful of grouped COUNT queries."""

    def describe(self) -> Iterator[Metric]:
        # Registering must not query (it happens at import, before any database exists).
        return iter(())

    def collect(self) -> Iterator[Metric]:
        # Imported here: the registry is built before the app registry is ready.
        from gatekeeper.records import Grant, GrantStatus
        from ledger.models import LedgerEvent
        from rooms.models import Flare, Message, Room, RoomMember, RoomState, SeatStanding

        window = _window_seconds()
        since = timezone.now() - timedelta(seconds=window)

        rooms = GaugeMetricFamily("synapsia_rooms", "Rooms by state.", labels=["state"])
        counted = dict(Room.objects.values_list("state").annotate(n=Count("id")).order_by())
        for state in RoomState.values:
            rooms.add_metric([state], counted.get(state, 0))
        yield rooms

        open_seats = RoomMember.objects.filter(room__state=RoomState.OPEN, agent__isnull=False)
        seats = GaugeMetricFamily(
            "synapsia_seats_open_rooms",
            "Agent seats in open rooms, by standing.",
            labels=["standing"],
        )
        by_standing = dict(open_seats.values_list("standing").annotate(n=Count("id")).order_by())
        for standing in SeatStanding.values:
            seats.add_metric([standing], by_standing.get(standing, 0))
        yield seats
        seat_totals = open_seats.aggregate(
            backlog=Sum(F("room__last_seq") - F("acked_seq")), turns=Sum("context_turn")
        )
        backlog = GaugeMetricFamily(
            "synapsia_messages_unacknowledged",
            "Over agent seats of open rooms: the room's last message number minus the last one the "
            "seat's agent acknowledged (a delivery backlog).",
        )
        backlog.add_metric([], max(int(seat_totals["backlog"] or 0), 0))
        yield backlog
        turns = GaugeMetricFamily(
            "synapsia_context_turns_open_rooms",
            "Context turns assembled so far for the agents of open rooms.",
        )
        turns.add_metric([], int(seat_totals["turns"] or 0))
        yield turns

        grants = GaugeMetricFamily(
            "synapsia_grants_pending", "Grants waiting for their owner's answer."
        )
        grants.add_metric([], Grant.objects.filter(status=GrantStatus.PENDING).count())
        yield grants

        flares = GaugeMetricFamily(
            "synapsia_flares_unanswered",
            "Signal Flares no owner has answered yet, by reason.",
            labels=["reason"],
        )
        for reason, n in (
            Flare.objects.filter(resolved_at__isnull=True)
            .values_list("reason")
            .annotate(n=Count("id"))
            .order_by()
        ):
            flares.add_metric([rule_label(reason)], n)
        yield flares

        messages = GaugeMetricFamily(
            "synapsia_messages_recent",
            f"Messages said in rooms in the last {window} s.",
        )
        messages.add_metric([], Message.objects.filter(created_at__gte=since).count())
        yield messages

        recent = LedgerEvent.objects.filter(occurred_at__gte=since)
        kinds = GaugeMetricFamily(
            "synapsia_ledger_events_recent",
            f"Ledger events in the last {window} s, by kind.",
            labels=["kind"],
        )
        for kind, n in recent.values_list("kind").annotate(n=Count("id")).order_by():
            kinds.add_metric([rule_label(kind)], n)
        yield kinds

        decisions = GaugeMetricFamily(
            "synapsia_decisions_recent",
            f"Decisions recorded in the last {window} s: denials by rule, grants by outcome.",
            labels=["outcome", "rule"],
        )
        # Grouped in the database (rule ids from the events' JSON), then relabelled: two rules
        # that differ only by the id they name count under one label.
        denied: dict[str, int] = {}
        for rule, n in (
            recent.filter(kind="denial")
            .annotate(rule=KT("data__rule"))
            .values_list("rule")
            .annotate(n=Count("id"))
            .order_by()
        ):
            label = rule_label(rule or "other")
            denied[label] = denied.get(label, 0) + n
        for label, n in sorted(denied.items()):
            decisions.add_metric(["denied", label], n)
        grant_outcomes = recent.aggregate(
            approved=Count("id", filter=Q(kind="grant_approved")),
            refused=Count("id", filter=Q(kind="grant_denied")),
            expired=Count("id", filter=Q(kind="grant_expired")),
        )
        for outcome, n in grant_outcomes.items():
            decisions.add_metric([f"grant_{outcome}", "grant"], n)
        yield decisions

        purged = GaugeMetricFamily(
            "synapsia_purged_ledger_events_recent",
            f"Ledger events removed by retention purges in the last {window} s.",
        )
        total = recent.filter(kind="retention_purge").aggregate(
            n=Sum(Cast(KT("data__events_purged"), BigIntegerField()))
        )["n"]
        purged.add_metric([], int(total or 0))
        yield purged


REGISTRY.register(DatabaseCollector())


# --- the endpoint ----------------------------------------------------------------------------


def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text format for a scraper presenting the configured bearer token."""
    token = getattr(settings, "SYNAPSIA_METRICS_TOKEN", "")
    if not token:
        raise Http404("metrics are off")
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        presented.strip().encode(), token.encode()
    ):
        response = HttpResponse(
            "a bearer token is required\n", status=401, content_type="text/plain"
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)


# --- in-process series -----------------------------------------------------------------------


class RequestMetricsMiddleware:
    """Counts requests by route name (never the path: paths carry room and grant ids)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if iscoroutinefunction(self):
            return self._acall(request)
        started = time.perf_counter()
        response = self.get_response(request)
        self._observe(request, response.status_code, started)
        return response

    async def _acall(self, request: HttpRequest) -> Any:
        started = time.perf_counter()
        response = await self.get_response(request)
        self._observe(request, response.status_code, started)
        return response

    @staticmethod
    def _observe(request: HttpRequest, status: int, started: float) -> None:
        match = getattr(request, "resolver_match", None)
        if match is None:
            route = "unrouted"
        elif match.url_name:
            route = match.view_name
        else:  # an unnamed pattern's view_name is the view's dotted Python path: not a route
            route = ":".join(filter(None, [match.namespace, "unnamed"]))
        route = rule_label(route.replace(":", "."))
        HTTP_REQUESTS.labels(route=route, status=f"{status // 100}xx").inc()
        HTTP_SECONDS.labels(route=route).observe(time.perf_counter() - started)


def _count_exception(**_: object) -> None:
    UNHANDLED_EXCEPTIONS.inc()


got_request_exception.connect(_count_exception, dispatch_uid="synapsia.metrics.exceptions")

"""/metrics: bearer-protected, off without a token, and free of content and identifiers.

The scrape runs after a negotiation whose every content field is a canary (room purpose and
charter, messages, whispers, owner names, an agent's name) and whose ledger records a denial
under a rule that names an agent; neither a canary nor any owner, room or agent id may appear
anywhere in the scrape.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from ledger.events import Denial, GrantRequested, RetentionPurge, rule_id_from
from ledger.services import ledger_append
from rooms import limits
from rooms.models import Flare, FlareReason, Message, Whisper
from synapsia import metrics  # noqa: F401 (connects its signals, as Daphne's start-up does)
from synapsia.metrics import SOCKET_FRAME_TYPES, SOCKET_LIMITS
from synapsia_protocol import FrameError, parse_client_frame

pytestmark = pytest.mark.django_db

TOKEN = "metrics-test-token-" + "x" * 40
CANARY = "CANARY7Q"


@pytest.fixture
def scrape(settings: Any) -> Any:
    settings.SYNAPSIA_METRICS_TOKEN = TOKEN

    def get(**headers: str) -> Any:
        return Client().get("/metrics", **headers)

    return get


def test_without_a_token_configured_metrics_do_not_exist(settings: Any) -> None:
    settings.SYNAPSIA_METRICS_TOKEN = ""
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer anything").status_code == 404


@pytest.mark.parametrize("header", [None, "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x"])
def test_a_wrong_or_missing_token_is_refused(scrape: Any, header: str | None) -> None:
    response = scrape(**({"HTTP_AUTHORIZATION": header} if header else {}))
    assert response.status_code == 401
    assert b"synapsia_" not in response.content


def _negotiate_with_canaries(make_open_room: Any) -> tuple[Any, list[str]]:
    opened = make_open_room(purpose=f"{CANARY}-purpose dinner", prefix=f"{CANARY.lower()}-owner-")
    room = opened.room
    room.charter = f"{CANARY}-charter: never above 80 EUR"
    room.save(update_fields=["charter"])
    opened.a.agent.name = f"{CANARY}-agent-name"
    opened.a.agent.save(update_fields=["name"])
    for seq, (agent, text) in enumerate(
        [(opened.a.agent, f"{CANARY}-message-one"), (opened.b.agent, f"{CANARY}-message-two")],
        start=1,
    ):
        Message.objects.create(room=room, seq=seq, sender=agent, client_id=f"c{seq}", text=text)
    Whisper.objects.create(
        room=room, owner=opened.a.owner, agent=opened.a.agent, text=f"{CANARY}-whisper"
    )
    seat = room.members.filter(agent=opened.a.agent).first() or room.members.first()
    Flare.objects.create(room=room, seat=seat, reason=FlareReason.LOOP, raised_by="agent")
    agent_id = str(opened.b.agent.id)
    ledger_append(
        room_id=room.id,
        event=Denial(
            rule=rule_id_from(f"policy.deny:db:{agent_id}"),
            subject_id=agent_id,
            resource_id=str(room.id),
        ),
    )
    ledger_append(room_id=room.id, event=Denial(rule="slip.expired", subject_id=agent_id))
    ledger_append(
        room_id=room.id,
        event=GrantRequested(grant_id=str(room.id), owner_id=str(opened.a.owner.pk)),
    )
    ledger_append(
        room_id=room.id,
        event=RetentionPurge(through_seq=1, through_hash="0" * 64, events_purged=7, window_days=90),
    )
    identifiers = [
        str(room.id),
        agent_id,
        str(opened.a.agent.id),
        opened.a.owner.username,
        opened.b.owner.username,
        opened.a.token,
        opened.b.token,
    ]
    return opened, identifiers


def test_the_scrape_counts_the_negotiation_without_content_or_identifiers(
    scrape: Any, make_open_room: Any
) -> None:
    _opened, identifiers = _negotiate_with_canaries(make_open_room)
    Client().get("/healthz")  # an in-process series to see
    response = scrape(HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    body = response.content.decode()
    series = {
        line.split(" ")[0]: float(line.rsplit(" ", 1)[1])
        for line in body.splitlines()
        if line and not line.startswith("#")
    }
    assert series['synapsia_rooms{state="open"}'] == 1
    assert series['synapsia_flares_unanswered{reason="loop"}'] == 1
    assert series["synapsia_messages_recent"] == 2
    assert series['synapsia_seats_open_rooms{standing="active"}'] == 2
    # The room's last_seq was not bumped by the direct inserts: nothing counts as unacknowledged.
    assert series["synapsia_messages_unacknowledged"] == 0
    assert series["synapsia_context_turns_open_rooms"] == 0
    assert series['synapsia_decisions_recent{outcome="denied",rule="slip.expired"}'] == 1
    # The policy rule named the agent: the label keeps the rule, not the id.
    assert series['synapsia_decisions_recent{outcome="denied",rule="policy.deny.db.id"}'] == 1
    assert series['synapsia_ledger_events_recent{kind="grant_requested"}'] == 1
    assert series["synapsia_purged_ledger_events_recent"] == 7
    assert series["synapsia_ledger_event_insert_seconds_count"] >= 4
    # The whole append, timed by the ledger service: four single appends above, at least.
    assert series['synapsia_ledger_append_seconds_count{path="one"}'] >= 4
    assert series['synapsia_http_requests_total{route="healthz",status="2xx"}'] >= 1
    # Nothing a person wrote, and no id of a person, room or agent, in any label or value.
    assert CANARY.lower() not in body.lower()
    for identifier in identifiers:
        assert identifier.lower() not in body.lower(), identifier
        assert identifier.replace("-", "").lower() not in body.lower(), identifier
    assert not re.search(r"[0-9a-f]{8}-[0-9a-f]{4}", body)
    # Owners' integer keys: no label is one (a value of 1 or 2 is a count, not a person).
    labels = set(re.findall(r'="([^"]*)"', body))
    assert not labels & {str(_opened.a.owner.pk), str(_opened.b.owner.pk)}
    assert not re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}", body)


def test_every_metric_is_documented_for_operators(scrape: Any) -> None:
    body = scrape(HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    names = set(re.findall(r"^# TYPE (synapsia_\w+)", body, re.MULTILINE))
    assert names
    docs = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    counters = {"synapsia_http_requests", "synapsia_unhandled_exceptions"}
    missing = [n for n in names if (f"{n}_total" if n in counters else n) not in docs]
    assert not missing


# Every label the scrape may carry, and what its values look like. A new label (a room, an
# owner, an agent...) fails here until someone decides it is safe and adds it.
LABEL_VALUES = {
    "state": re.compile(r"^(draft|open|paused|closed)$"),
    "standing": re.compile(r"^[a-z_]+$"),
    "reason": re.compile(r"^[a-z_.]+$"),
    "kind": re.compile(r"^[a-z_.]+$"),
    "outcome": re.compile(r"^(denied|grant_approved|grant_refused|grant_expired)$"),
    "rule": re.compile(r"^[a-z][a-z0-9_.-]*$"),
    "route": re.compile(r"^[a-z][a-z0-9_.-]*$"),
    "status": re.compile(r"^[1-5]xx$"),
    "path": re.compile(r"^(one|batch)$"),
    "participant": re.compile(r"^(agent|owner)$"),
    "frame": re.compile(rf"^({'|'.join(SOCKET_FRAME_TYPES)})$"),
    "limit": re.compile(rf"^({'|'.join(SOCKET_LIMITS)})$"),
    "le": re.compile(r"^([0-9.]+(e[+-]?[0-9]+)?|\+Inf)$"),
}


def _socket_frames_with_canaries(opened: Any) -> None:
    """What a room socket counts for frames full of canaries and ids: a say, an act naming the
    room, a frame the protocol cannot read, and refusals by every limit."""
    room, agent = str(opened.room.id), str(opened.a.agent.id)
    for raw in (
        f'{{"v":1,"type":"say","id":"{CANARY}-{agent}","body":{{"text":"{CANARY} {room}"}}}}',
        f'{{"v":1,"type":"act","id":"a-1","body":{{"tool":"{CANARY}","arguments":{{"r":"{room}"}}}}}}',
        f'{{"v":1,"type":"{CANARY}-{room}","id":"x","body":{{}}}}',
    ):
        try:
            limits.frame_received(parse_client_frame(raw, max_bytes=65536))
        except FrameError as unreadable:
            limits.frame_received(unreadable)
    for kind in ("say", "context_request", "act", "grant_request", None):
        limits.rate_refused(kind)
    limits.frame_refused("inbox")
    limits.frame_refused("send_buffer")


def test_every_label_is_a_known_one_with_a_value_that_names_no_one(
    scrape: Any, make_open_room: Any
) -> None:
    opened, identifiers = _negotiate_with_canaries(make_open_room)
    _socket_frames_with_canaries(opened)
    Client().get("/healthz")
    Client().get("/favicon.ico")
    # An unnamed pattern (the admin's old change-page redirect) is counted as "unnamed", never
    # under its view's Python path.
    admin = Client()
    admin.force_login(User.objects.create_superuser("metrics-admin", password="x"))
    admin.get("/admin/auth/user/1/")
    body = scrape(HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    pairs = re.findall(r'[{,]([a-z_]+)="([^"]*)"', body)
    assert pairs
    unknown = sorted({name for name, _ in pairs} - set(LABEL_VALUES))
    assert not unknown, unknown
    odd = sorted({(n, v) for n, v in pairs if not LABEL_VALUES[n].match(v)})
    assert not odd, odd
    assert ("route", "admin.unnamed") in pairs and ("route", "favicon") in pairs
    # Rule ids that named an entry keep only "id": no hex run long enough to be one survives.
    assert not [v for _, v in pairs if re.search(r"[0-9a-f]{8}", v)]
    # The socket frames' series: every type and limit there, counted, naming nothing else.
    for frame_type in SOCKET_FRAME_TYPES:
        assert ("frame", frame_type) in pairs
    for limit in SOCKET_LIMITS:
        assert ("limit", limit) in pairs
    counts = {
        line.split(" ")[0]: float(line.rsplit(" ", 1)[1])
        for line in body.splitlines()
        if line.startswith("synapsia_socket_frames_")
    }
    assert counts['synapsia_socket_frames_received_total{frame="say"}'] >= 1
    assert counts['synapsia_socket_frames_received_total{frame="unreadable"}'] >= 1
    assert counts['synapsia_socket_frames_refused_total{limit="context_turn"}'] >= 1
    assert CANARY.lower() not in body.lower()
    for identifier in identifiers:
        assert identifier.lower() not in body.lower(), identifier


def test_the_label_check_catches_a_label_that_names_a_room(
    scrape: Any, make_open_room: Any
) -> None:
    """The check above, on a series an imagined change adds with the room id as a label."""
    from prometheus_client import Gauge

    from synapsia.metrics import REGISTRY

    opened, _ = _negotiate_with_canaries(make_open_room)
    leaky = Gauge(
        "synapsia_test_leaky", "A series that must not exist.", ["room"], registry=REGISTRY
    )
    try:
        leaky.labels(room=str(opened.room.id)).set(1)
        body = scrape(HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    finally:
        REGISTRY.unregister(leaky)
    names = {name for name, _ in re.findall(r'[{,]([a-z_]+)="([^"]*)"', body)}
    assert "room" in names and "room" not in LABEL_VALUES

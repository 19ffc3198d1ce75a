"""Tool-call arguments and outcomes sealed at rest under the room's data key: the action
record's ``arguments`` and ``outcome`` and the sandbox effect's ``arguments`` and ``output``
are ciphertext in the database, read back as their values through the model, keep the hash
of the canonical arguments for idempotency, fail closed when moved to another room's row or
tampered with, and are unsealed (and sealed again) by migrating back (and forward)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client

from gatekeeper.actions import arguments_hash
from gatekeeper.models import WEBHOOK_BODY, SandboxEffect, WebhookDelivery
from gatekeeper.records import ActionRecord, Grant
from gatekeeper.webhooks import webhook_endpoint_create
from rooms.deletion import room_delete
from rooms.sealing import RoomContentRefused, room_content_open
from slips.datakeys import DataKeyDestroyed
from tests.artifacts.conftest import publish, sign_publishing
from tests.bookings import OVER, WITHIN
from tests.conftest import OpenRoom
from tests.gatekeeper.conftest import Negotiation

pytestmark = pytest.mark.django_db(transaction=True)

CANARY = "zq8argumentcanary"


@pytest.fixture(autouse=True)
def _allow_tools(settings: Any) -> None:
    settings.SYNAPSIA = {**settings.SYNAPSIA, "TOOL_POLICY_DEFAULT": "allow_all"}


def _raw(model: Any, column: str, pk: Any) -> str:
    q = connection.ops.quote_name
    pk_column = model._meta.pk.column
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {q(column)} FROM {q(model._meta.db_table)} WHERE {q(pk_column)} = %s",  # noqa: S608
            [pk.hex if connection.vendor == "sqlite" and hasattr(pk, "hex") else pk],
        )
        return str(cursor.fetchone()[0])


def _raw_set(model: Any, column: str, pk: Any, value: str) -> None:
    q = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {q(model._meta.db_table)} SET {q(column)} = %s "  # noqa: S608
            f"WHERE {q(model._meta.pk.column)} = %s",
            [value, pk.hex if connection.vendor == "sqlite" and hasattr(pk, "hex") else pk],
        )


def _table_bytes(model: Any) -> bytes:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {connection.ops.quote_name(model._meta.db_table)}")  # noqa: S608
        return repr(cursor.fetchall()).encode()


def test_a_booking_is_stored_sealed_and_reads_back_through_the_model(
    negotiation: Negotiation,
) -> None:
    result = negotiation.act()
    assert result.status == "executed", result
    record = ActionRecord.objects.get(id=result.action_id)
    effect = SandboxEffect.objects.get()
    # Through the model: the values, and the hash of the canonical arguments beside them.
    assert record.arguments["venue_id"] == WITHIN
    assert record.arguments_hash == arguments_hash(record.arguments)
    assert record.outcome["output"]["venue_id"] == WITHIN
    assert effect.arguments == record.arguments and effect.output["venue_id"] == WITHIN
    # At rest: ciphertext only, in every sealed column; no booking detail readable.
    for model, column, pk in (
        (ActionRecord, "arguments", record.pk),
        (ActionRecord, "outcome", record.pk),
        (SandboxEffect, "arguments", effect.pk),
        (SandboxEffect, "output", effect.pk),
    ):
        assert _raw(model, column, pk).startswith("rc1:"), (model, column)
    for model in (ActionRecord, SandboxEffect):
        assert WITHIN.encode() not in _table_bytes(model)
    # A replay is matched by the hash, not by reading the text: same answer, no second run.
    again = negotiation.act()
    assert again.replay and again.output == result.output
    assert SandboxEffect.objects.count() == 1
    # The same key with other arguments is still refused (the hash differs).
    assert negotiation.act(party_size=3).rule == "idempotency_key_reused"


def test_an_artifacts_title_and_body_are_not_readable_in_the_action_record(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    room = make_open_room()
    sign_publishing(room, room.a, "both")
    result = publish(room, room.a, title=f"Plan {CANARY}", body=f"Body {CANARY}")
    assert result.status == "executed", result
    assert CANARY.encode() not in _table_bytes(ActionRecord)
    record = ActionRecord.objects.get(id=result.action_id)
    assert record.arguments["title"] == f"Plan {CANARY}"  # opened for whoever may read it


def test_arguments_moved_to_another_rooms_row_or_tampered_with_do_not_open(
    negotiation: Negotiation, make_open_room: Callable[..., OpenRoom]
) -> None:
    result = negotiation.act()
    record = ActionRecord.objects.get(id=result.action_id)
    other = make_open_room(prefix="o-")
    sign_publishing(other, other.a, "both")
    elsewhere = publish(other, other.a, title="Other", body="Other room's document")
    assert elsewhere.status == "executed"
    target = ActionRecord.objects.get(id=elsewhere.action_id)

    # A sealed value copied into another room's row: refused when loaded, never shown.
    _raw_set(ActionRecord, "arguments", target.pk, _raw(ActionRecord, "arguments", record.pk))
    with pytest.raises(RoomContentRefused):
        ActionRecord.objects.get(id=target.pk)
    # One character changed in the ciphertext: refused too.
    sealed = _raw(ActionRecord, "arguments", record.pk)
    flipped = sealed[:-3] + ("A" if sealed[-3] != "A" else "B") + sealed[-2:]
    _raw_set(ActionRecord, "arguments", record.pk, flipped)
    with pytest.raises(RoomContentRefused):
        ActionRecord.objects.get(id=record.pk)
    # The outcome column's value in the arguments column (same row, same room): refused.
    _raw_set(ActionRecord, "arguments", record.pk, _raw(ActionRecord, "outcome", record.pk))
    with pytest.raises(RoomContentRefused):
        ActionRecord.objects.get(id=record.pk)


def test_a_bare_value_never_reaches_a_sealed_column(negotiation: Negotiation) -> None:
    result = negotiation.act()
    with pytest.raises(RoomContentRefused):
        ActionRecord.objects.filter(id=result.action_id).update(arguments={"venue_id": "x"})
    assert _raw(ActionRecord, "arguments", result.action_id).startswith("rc1:")


def test_the_migration_unseals_going_back_and_seals_going_forward(
    negotiation: Negotiation,
) -> None:
    result = negotiation.act()
    record_pk = result.action_id
    effect_pk = SandboxEffect.objects.get().pk

    def stored() -> list[str]:
        return [
            _raw(ActionRecord, "arguments", record_pk),
            _raw(ActionRecord, "outcome", record_pk),
            _raw(SandboxEffect, "arguments", effect_pk),
            _raw(SandboxEffect, "output", effect_pk),
        ]

    assert all(v.startswith("rc1:") for v in stored())
    try:
        call_command("migrate", "gatekeeper", "0004", verbosity=0)  # 0006, then 0005, back
        assert all(WITHIN in v and not v.startswith("rc1:") for v in stored())
        call_command("migrate", "gatekeeper", verbosity=0)
        assert all(v.startswith("rc1:") and WITHIN not in v for v in stored())
    finally:
        call_command("migrate", verbosity=0)
    record = ActionRecord.objects.get(id=record_pk)
    assert record.arguments["venue_id"] == WITHIN
    assert record.arguments_hash == arguments_hash(record.arguments)
    assert SandboxEffect.objects.get(pk=effect_pk).output["venue_id"] == WITHIN


def test_the_owner_asked_for_a_grant_still_reads_what_is_asked_in_words(
    negotiation: Negotiation,
) -> None:
    asked = negotiation.act(OVER)
    assert asked.status == "awaiting_grant"
    assert OVER.encode() not in _table_bytes(ActionRecord)  # sealed at rest ...
    client = Client()
    client.force_login(negotiation.setup.a.owner)
    [grant] = client.get(f"/api/rooms/{negotiation.room.id}/grants").json()
    lines = {line["label"]: line["value"] for line in grant["snapshot"]}
    # ... and opened for the owner, in words: the venue by name, the price in whole units.
    assert lines["Venue"] == "Kaiseki Nori"
    assert lines["Price"] == "180 EUR in all (90 EUR per person)"
    # Her approval runs exactly those arguments, read back from the sealed row.
    done = negotiation.approve(Grant.objects.get(id=asked.grant_id))
    assert (done.status, done.rule) == ("executed", "granted")
    assert SandboxEffect.objects.get().arguments["venue_id"] == OVER


def test_a_webhook_deliverys_body_is_sealed_and_posted_as_signed(
    negotiation: Negotiation,
    receiver: Any,
    webhook_settings: Any,
    celery_worker: Any,
) -> None:
    webhook_endpoint_create(owner=negotiation.setup.a.owner, url=receiver.url("/hook"))
    result = negotiation.act(ref="act-webhook-1")
    deadline = time.monotonic() + 60
    while result.status == "pending":  # with a real worker the first answer is pending
        assert time.monotonic() < deadline, "webhook delivery did not settle"
        time.sleep(0.1)
        result = negotiation.act(ref="act-webhook-1")
    assert result.status == "executed", result
    [posted] = receiver.seen("/hook")
    delivery = WebhookDelivery.objects.get()
    # The owner's webhook got the arguments, in the exact bytes that were signed and stored.
    assert json.loads(posted.body)["arguments"]["venue_id"] == WITHIN
    assert delivery.body.encode() == posted.body and delivery.room_id == negotiation.room.id
    # At rest: sealed under the room's key, no argument readable.
    assert _raw(WebhookDelivery, "body", delivery.pk).startswith("rc1:")
    assert WITHIN.encode() not in _table_bytes(WebhookDelivery)
    # Once the room is deleted its deliveries are gone with it, and its key: the row in an
    # older backup does not open.
    backup = _raw(WebhookDelivery, "body", delivery.pk)
    room_delete(owner=negotiation.setup.a.owner, room_id=negotiation.room.id)
    assert not WebhookDelivery.objects.filter(id=delivery.pk).exists()
    with pytest.raises(DataKeyDestroyed):
        room_content_open(sealed=backup, column=WEBHOOK_BODY)
    assert WITHIN.encode() not in _table_bytes(WebhookDelivery)


def test_the_webhook_body_migration_unseals_going_back_and_seals_going_forward(
    negotiation: Negotiation, receiver: Any, webhook_settings: Any, celery_worker: Any
) -> None:
    webhook_endpoint_create(owner=negotiation.setup.a.owner, url=receiver.url("/hook"))
    negotiation.act(ref="act-webhook-2")
    delivery = WebhookDelivery.objects.get()
    signed = delivery.body
    try:
        call_command("migrate", "gatekeeper", "0006", verbosity=0)  # 0008, then 0007, back
        assert _raw(WebhookDelivery, "body", delivery.pk) == signed  # plaintext, unchanged
        call_command("migrate", "gatekeeper", verbosity=0)  # room from the body, then sealed
        assert _raw(WebhookDelivery, "body", delivery.pk).startswith("rc1:")
    finally:
        call_command("migrate", verbosity=0)
    again = WebhookDelivery.objects.get(pk=delivery.pk)
    assert again.body == signed and again.room_id == negotiation.room.id

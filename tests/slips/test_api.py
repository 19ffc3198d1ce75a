"""The REST API: keys, vault, and room-scoped slips, through Django's test client."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client

from slips.models import DeviceKey, Slip, VaultItem
from tests.slips.conftest import Device, canonical_text
from tests.slips.test_vault import ICS

pytestmark = pytest.mark.django_db


def _client(owner) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def _enroll(client: Client, owner, device: Device, label: str = "laptop") -> dict:
    challenge = client.post(
        "/api/keys/challenge", {"purpose": "enroll"}, content_type="application/json"
    ).json()
    assert challenge["owner_id"] == str(owner.pk)
    response = client.post(
        "/api/keys",
        {
            "challenge": challenge["challenge"],
            "public_key": device.public_key,
            "label": label,
            "proof": device.proof(owner=owner, challenge=challenge["challenge"], label=label),
        },
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    return response.json()


def test_key_lifecycle_over_the_api(make_owner) -> None:
    alice = make_owner("alice")
    client = _client(alice)
    key = _enroll(client, alice, Device())
    assert [k["id"] for k in client.get("/api/keys").json()] == [key["id"]]
    bad = client.post(
        "/api/keys",
        {"challenge": "nope", "public_key": "x", "label": "l", "proof": "y"},
        content_type="application/json",
    )
    assert bad.status_code == 422 and bad.json()["code"] == "challenge_unknown"
    revoked = client.post(f"/api/keys/{key['id']}/revoke")
    assert revoked.status_code == 200 and revoked.json()["revoked_at"]
    other = _client(make_owner("bob"))
    assert other.post(f"/api/keys/{key['id']}/revoke").status_code == 404


def test_vault_over_the_api(make_owner) -> None:
    alice = make_owner("alice")
    client = _client(alice)
    created = client.post(
        "/api/vault",
        {"content": {"kind": "budget", "currency": "EUR", "minimum": 20, "maximum": 60}},
        content_type="application/json",
    )
    assert created.status_code == 201
    item_id = created.json()["id"]
    bad = client.put(
        f"/api/vault/{item_id}",
        {"content": {"kind": "budget", "currency": "EUR", "minimum": 90, "maximum": 60}},
        content_type="application/json",
    )
    assert bad.status_code == 422 and bad.json()["code"] == "invalid_vault_item"
    assert client.get("/api/vault").json()[0]["content"]["maximum"] == 60
    assert _client(make_owner("bob")).get("/api/vault").json() == []
    upload = client.post("/api/vault/ics", {"file": _upload(ICS)})
    assert upload.status_code == 201 and upload.json()["kind"] == "availability"
    assert client.post("/api/vault/ics", {"file": _upload(b"nope")}).status_code == 422
    assert client.delete(f"/api/vault/{item_id}").status_code == 204
    assert VaultItem.objects.count() == 1


def _upload(data: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile("cal.ics", data, content_type="text/calendar")


def test_signing_a_slip_for_a_room_over_the_api(make_open_room) -> None:
    opened = make_open_room()
    alice = opened.a.owner
    client = _client(alice)
    device = Device()
    key = _enroll(client, alice, device)
    template = client.get(f"/api/rooms/{opened.room.id}/slip-template").json()
    payload = template["payload"]
    assert payload["agent_id"] == str(opened.a.agent.id) and payload["capabilities"] == []
    payload["key_id"] = key["id"]
    payload["capabilities"] = [{"resource": "availability", "operation": "disclose"}]
    text = canonical_text(payload)
    submitted = client.post(
        f"/api/rooms/{opened.room.id}/slips",
        {"payload": text, "signature": device.sign(text)},
        content_type="application/json",
    )
    assert submitted.status_code == 201, submitted.content
    assert submitted.json()["capabilities"][0]["recipient"] == "own_agent"
    listed = client.get(f"/api/rooms/{opened.room.id}/slips").json()
    assert [s["id"] for s in listed] == [submitted.json()["id"]]
    # Replaying the same signed slip is refused with a specific error.
    again = client.post(
        f"/api/rooms/{opened.room.id}/slips",
        {"payload": text, "signature": device.sign(text)},
        content_type="application/json",
    )
    assert again.status_code == 422 and again.json()["code"] == "nonce_reused"
    assert Slip.objects.count() == 1


def test_room_endpoints_need_a_seat(make_open_room, make_owner) -> None:
    opened = make_open_room()
    mallory = make_owner("mallory")
    client = _client(mallory)
    device = Device()
    key = _enroll(client, mallory, device)
    assert client.get(f"/api/rooms/{opened.room.id}/slip-template").status_code == 404
    payload = {"v": 1, "key_id": key["id"]}
    text = canonical_text(payload)
    response = client.post(
        f"/api/rooms/{opened.room.id}/slips",
        {"payload": text, "signature": device.sign(text)},
        content_type="application/json",
    )
    assert response.status_code == 404
    assert client.get(f"/api/rooms/{uuid.uuid4()}/slip-conflicts").status_code == 404
    assert DeviceKey.objects.count() == 1 and Slip.objects.count() == 0


def test_both_owners_see_the_tier_resolution(make_open_room) -> None:
    opened = make_open_room()
    a, b = _client(opened.a.owner), _client(opened.b.owner)
    tier = a.put(
        f"/api/rooms/{opened.room.id}/tier",
        {"tier": "collaborative"},
        content_type="application/json",
    )
    answer = tier.json()
    assert (answer["chosen"], answer["room"]) == ("collaborative", "collaborative")
    assert answer["words"].startswith("The room runs under Collaborative, chosen by you")
    b.put(f"/api/rooms/{opened.room.id}/tier", {"tier": "sandbox"}, content_type="application/json")
    for client in (a, b):
        (conflict,) = client.get(f"/api/rooms/{opened.room.id}/slip-conflicts").json()
        assert conflict["field"] == "tier" and conflict["winner"] == "sandbox"

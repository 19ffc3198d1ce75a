"""A Python "device" that does what the browser does: make a key, prove it, sign slips."""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import rfc8785
from nacl.signing import SigningKey

from slips import services
from slips.canonical import KEY_PROOF_TAG, SLIP_TAG
from slips.models import DeviceKey
from slips.payload import key_proof_payload
from slips.signatures import b64url_encode


@dataclass
class Device:
    """An Ed25519 key the way a browser holds one, plus the proof and slip signing it does."""

    signing_key: SigningKey = field(default_factory=SigningKey.generate)

    @property
    def public_key(self) -> str:
        return b64url_encode(bytes(self.signing_key.verify_key))

    def proof(self, *, owner: Any, challenge: str, label: str, purpose: str = "enroll") -> str:
        message = KEY_PROOF_TAG + rfc8785.dumps(
            key_proof_payload(
                challenge=challenge,
                label=label,
                owner_id=str(owner.pk),
                public_key=self.public_key,
                purpose=purpose,
            )
        )
        return b64url_encode(self.signing_key.sign(message).signature)

    def sign(self, payload_text: str, tag: bytes = SLIP_TAG) -> str:
        return b64url_encode(self.signing_key.sign(tag + payload_text.encode()).signature)

    def sign_grant(self, grant: Any) -> str:
        """The approval the browser signs for one grant (``grant_signed_bytes``)."""
        from gatekeeper.grants import grant_signed_bytes

        return b64url_encode(self.signing_key.sign(grant_signed_bytes(grant)).signature)


def enroll(
    owner: Any, device: Device | None = None, label: str = "laptop"
) -> tuple[DeviceKey, Device]:
    device = device or Device()
    challenge = services.key_challenge_issue(owner=owner, purpose="enroll")
    key = services.key_enroll(
        owner=owner,
        challenge=challenge.value,
        public_key=device.public_key,
        label=label,
        proof=device.proof(owner=owner, challenge=challenge.value, label=label),
    )
    return key, device


def slip_payload(
    *,
    owner: Any,
    room_id: uuid.UUID,
    agent_id: uuid.UUID,
    key: DeviceKey,
    capabilities: list[dict[str, Any]] | None = None,
    issued_at: int | None = None,
    lifetime: int = 86_400,
    **overrides: Any,
) -> dict[str, Any]:
    issued_at = int(time.time()) if issued_at is None else issued_at
    payload = {
        "v": 1,
        "room_id": str(room_id),
        "owner_id": str(owner.pk),
        "agent_id": str(agent_id),
        "key_id": str(key.id),
        "nonce": b64url_encode(secrets.token_bytes(18)),
        "issued_at": issued_at,
        "expires_at": issued_at + lifetime,
        "capabilities": capabilities if capabilities is not None else [],
    }
    payload.update(overrides)
    return payload


def canonical_text(payload: dict[str, Any]) -> str:
    return rfc8785.dumps(payload).decode()


def seat_slip_sign(
    seat: Any, room_id: uuid.UUID, capabilities: list[dict[str, Any]]
) -> tuple[DeviceKey, Device]:
    """Enroll a new device key for ``seat.owner`` and sign and submit a slip for the seat's
    agent in ``room_id`` (``seat``: a ``tests.conftest.Seat``); returns the key and device."""
    key, device = enroll(seat.owner)
    text = canonical_text(
        slip_payload(
            owner=seat.owner,
            room_id=room_id,
            agent_id=seat.agent.id,
            key=key,
            capabilities=capabilities,
        )
    )
    services.slip_submit(
        owner=seat.owner,
        room_id=room_id,
        seated_agent_id=seat.agent.id,
        payload=text,
        signature=device.sign(text),
    )
    return key, device


@dataclass
class Signer:
    """One owner with an enrolled key, a room and an agent (by UUID), ready to sign slips."""

    owner: Any
    key: DeviceKey
    device: Device
    room_id: uuid.UUID
    agent_id: uuid.UUID

    def payload(self, **kwargs: Any) -> dict[str, Any]:
        kwargs.setdefault("room_id", self.room_id)
        kwargs.setdefault("agent_id", self.agent_id)
        return slip_payload(owner=self.owner, key=self.key, **kwargs)

    def submit(self, payload: dict[str, Any] | None = None, **kwargs: Any):
        text = canonical_text(payload if payload is not None else self.payload(**kwargs))
        return services.slip_submit(
            owner=self.owner,
            room_id=self.room_id,
            seated_agent_id=self.agent_id,
            payload=text,
            signature=self.device.sign(text),
        )


@pytest.fixture
def make_signer(make_owner: Callable[[str], Any]) -> Callable[..., Signer]:
    def make(
        username: str = "alice", room_id: uuid.UUID | None = None, agent_id: uuid.UUID | None = None
    ) -> Signer:
        owner = make_owner(username)
        key, device = enroll(owner)
        return Signer(owner, key, device, room_id or uuid.uuid4(), agent_id or uuid.uuid4())

    return make


TEST_VAULT_KEY = b64url_encode(b"test-only vault key, 32+ bytes.." * 2)


@pytest.fixture(autouse=True)
def vault_key(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Production refuses to run the vault without SYNAPSIA_VAULT_KEY: give the services pass
    one (here and, through the environment, to any Daphne the test starts)."""
    if settings.PROFILE == "production":
        settings.SLIPS = {**getattr(settings, "SLIPS", {}), "VAULT_KEY": TEST_VAULT_KEY}
        monkeypatch.setenv("SYNAPSIA_VAULT_KEY", TEST_VAULT_KEY)

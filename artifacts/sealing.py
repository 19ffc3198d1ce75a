"""Sealing an artifact under its room's data key (``slips.datakeys``, kind ``room``).

The blob is: version 1 (one byte) + the data key's id (16 bytes) + a 96-bit nonce +
AES-256-GCM ciphertext and tag of ``{"title": ..., "body": ...}`` as JSON. The associated data
binds the room and the artifact's id, so a blob copied to another artifact or room does not
open. Deleting the room destroys its key (``slips.datakeys.data_keys_destroy``): every copy of
the blob, in the database or an older backup, is then unreadable, and opening it raises
``DataKeyDestroyed`` (fail closed).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from uuid import UUID

from slips.errors import Misconfigured

SEAL_VERSION = b"\x01"
_AAD = b"synapsia-artifact-v1|"
_HEADER = 1 + 16 + 12


@dataclass(frozen=True)
class ArtifactContent:
    title: str
    body: str


def _room_subject(room_id: UUID) -> str:
    # The room's subject in the key store, as every room-content sealer names it (a room's
    # id is unique, so its "since" is empty).
    return str(room_id)


def _aad(room_id: UUID, artifact_id: UUID) -> bytes:
    return _AAD + f"{room_id}|{artifact_id}".encode()


def artifact_seal(*, room_id: UUID, artifact_id: UUID, content: ArtifactContent) -> bytes:
    """Encrypt ``content`` under the room's data key (made the first time it is needed)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from slips.datakeys import data_key_for

    key = data_key_for(kind="room", subject=_room_subject(room_id), since="")
    plaintext = json.dumps(
        {"title": content.title, "body": content.body}, ensure_ascii=False, separators=(",", ":")
    ).encode()
    nonce = os.urandom(12)
    sealed = AESGCM(key.key).encrypt(nonce, plaintext, _aad(room_id, artifact_id))
    return SEAL_VERSION + key.id.bytes + nonce + sealed


def artifact_open(*, room_id: UUID, artifact_id: UUID, blob: bytes) -> ArtifactContent:
    """Decrypt a sealed artifact. ``DataKeyDestroyed`` once its room was deleted; another
    ``Misconfigured`` for a blob that is not this artifact's or not in this format."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from slips.datakeys import data_key_open

    if blob[:1] != SEAL_VERSION or len(blob) < _HEADER + 16:
        raise Misconfigured("artifact_sealed", "A shared artifact is in an unknown format.")
    key = data_key_open(UUID(bytes=blob[1:17]), kind="room", subject=_room_subject(room_id))
    try:
        plaintext = AESGCM(key).decrypt(blob[17:29], blob[29:], _aad(room_id, artifact_id))
    except InvalidTag:
        raise Misconfigured(
            "artifact_sealed", "A shared artifact does not open with its room's key."
        ) from None
    data = json.loads(plaintext)
    return ArtifactContent(title=str(data["title"]), body=str(data["body"]))

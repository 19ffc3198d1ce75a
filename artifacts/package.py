"""The Portable Project Package: everything an owner takes away from a room, in one zip,
checkable offline with ``python -m ledger.verify_package FILE.zip`` (docs/project-package.md).

Inside (each file listed in ``manifest.json`` with its SHA-256 and size):

- ``README.txt``: what the files are and how to check them;
- ``ledger.json``: the room's ledger export (the chain, checkpoint, head, the server's signed
  heads and public key, the receipt): what ``python -m ledger.verify_export`` checks;
- ``receipt.json``: the receipt, with its sentences;
- ``transcript.json``: the exporting owner's side of the transcript: every message said in
  the room (both agents see those, and both owners) and this owner's own whispers, never the
  other owner's;
- ``artifacts.json`` and ``artifacts/NN-<title>.md|.txt``: the shared artifacts, opened.

``manifest.sig`` is the server's Ed25519 signature (the ledger's head-signing key, with its
own prefix) over the exact bytes of ``manifest.json``, which also names the room and the
ledger head it was exported at (signed as of the export): a changed file, a re-hashed
manifest, or a ledger from another export fails the check.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import zipfile
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.contrib.auth.models import User
from django.utils import timezone

from artifacts.selectors import artifacts_for_owner
from ledger.receipts import receipt_export
from ledger.signing import LedgerSigningUnavailable, ledger_sign_head
from rooms import selectors as room_selectors
from rooms.ledger_api import receipt_with_words
from rooms.notifications import owner_time_zone
from rooms.selectors import owner_name

PACKAGE_FORMAT = "synapsia-project-package/1"
# Distinct from the ledger heads' prefix: a package signature can never pass for a head's.
MANIFEST_SIGNATURE_PREFIX = b"synapsia-project-package-v1\n"
MEDIA_EXTENSIONS = {"text/markdown": "md", "text/plain": "txt"}

README = """\
Synapsia: Portable Project Package
==================================

This package holds one room as {whose} side saw it, exported on {when}.

  manifest.json    every other file, with its SHA-256 fingerprint and size, the room and
                   the ledger head it was exported at
  manifest.sig     the server's signature over manifest.json
  ledger.json      the room's ledger: every permission, disclosure, action and denial,
                   hash-chained, with the server's signed heads (no conversation content)
  receipt.json     the room's receipt, in sentences
  transcript.json  every message said in the room, and your own whispers to your agent
  artifacts.json   the shared artifacts: title, kind, size, who published them, when,
                   whether the room flagged one as a suspected injection
  artifacts/       each shared artifact's text, one file each

Check it offline (Python 3.11+, with the rfc8785 and PyNaCl packages):

    python -m ledger.verify_package {filename}

The check says "intact" or names the first file or event that does not match. On its own it
trusts the server's key written in this package, so a package forged with another key would
pass. To rule that out, get the server's key from the server itself and add it:

    python -m ledger.verify_package {filename} --public-key <the server's key>

To get the key, open the address of the Synapsia site you use, followed by
/api/ledger/public-key, in your browser (for example
https://synapsia.example/api/ledger/public-key), and copy the text shown after
"public_key" (it ends with "="). It is the same for every room on that server.
"""


@dataclass(frozen=True)
class ProjectPackage:
    filename: str
    content: bytes


def _json(value: Any) -> bytes:
    return (json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True) + "\n").encode()


def _slug(title: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:40].strip("-")
    return slug or "artifact"


def _transcript(*, owner: User, room_id: UUID, zone: Any) -> dict[str, Any]:
    seat = room_selectors.room_seat(owner=owner, room_id=room_id)
    seats = room_selectors.room_seats(room=seat.room)
    speakers = {}
    for s in seats:
        if s.agent is None:
            continue
        whose = "Your agent" if s.owner_id == owner.pk else f"{owner_name(s.owner)}'s agent"
        speakers[s.agent_id] = (whose, s.owner)
    messages = []
    for m in room_selectors.messages_after(room_id=room_id, after_seq=0, limit=10**9):
        whose, speaker_owner = speakers.get(m.sender_id, ("An agent no longer in the room", None))
        if m.author == "owner":
            if speaker_owner == owner:
                whose = "You, in person"
            elif speaker_owner is not None:
                whose = f"{owner_name(speaker_owner)}, in person"
            else:
                whose = "An owner, in person"
        messages.append(
            {
                "seq": m.seq,
                "speaker": whose,
                "sent_at": m.created_at.astimezone(zone).isoformat(),
                "text": str(m.text),
                "flagged_as_suspected_injection": bool(m.flags),
            }
        )
    whispers = [
        {"sent_at": w.created_at.astimezone(zone).isoformat(), "text": str(w.text)}
        for w in room_selectors.whispers_of_owner(owner=owner, room_id=room_id)
    ]
    return {"room": seat.room.purpose, "messages": messages, "your_whispers": whispers}


def _manifest_signature(manifest: bytes) -> dict[str, str] | None:
    # The ledger's own key, with the package's own prefix; None where the server has none.
    from ledger.signing import ledger_sign_document

    try:
        signed = ledger_sign_document(prefix=MANIFEST_SIGNATURE_PREFIX, message=manifest)
    except LedgerSigningUnavailable:
        return None
    return {
        "algorithm": "Ed25519",
        "public_key": signed.public_key,
        "signed_message_prefix": MANIFEST_SIGNATURE_PREFIX.decode(),
        "signature": signed.signature,
    }


def project_package_build(
    *, owner: User, room_id: UUID, now: datetime | None = None
) -> ProjectPackage:
    """The zip for one owner of the room (``NotFound`` for anyone else, as for no room)."""
    seat = room_selectors.room_seat(owner=owner, room_id=room_id)
    zone = owner_time_zone(owner=owner)
    moment = (now or timezone.now()).astimezone(zone)
    filename = f"synapsia-project-package-{moment:%Y-%m-%d}.zip"
    # The chain's tip as of the export, signed (once: an already signed tip is reused), so
    # the package's ledger ends at a head the server vouches for. Without a key the package
    # has no manifest.sig, and the offline check says so.
    with contextlib.suppress(LedgerSigningUnavailable):
        ledger_sign_head(room_id=seat.room_id)
    ledger = receipt_export(seat.room_id)
    files: dict[str, bytes] = {
        "README.txt": README.format(
            whose="your", when=f"{moment:%d %b %Y, %H:%M} ({zone.key})", filename=filename
        ).encode(),
        "ledger.json": _json(ledger),
        "receipt.json": _json(receipt_with_words(room_id=seat.room_id).model_dump(mode="json")),
        "transcript.json": _json(_transcript(owner=owner, room_id=seat.room_id, zone=zone)),
    }
    index = []
    for number, artifact in enumerate(
        artifacts_for_owner(owner=owner, room_id=seat.room_id), start=1
    ):
        entry: dict[str, Any] = {
            "title": artifact.title,
            "media_type": artifact.media_type,
            "size_bytes": artifact.size_bytes,
            "body_sha256": artifact.body_sha256,
            "published_by": artifact.who,
            "published_at": artifact.published_at.astimezone(zone).isoformat(),
            "shared_with_the_other_agent": artifact.shared_words,
            "suspected_injections": list(artifact.flags),  # in words
            "file": None,
        }
        if artifact.readable:
            path = (
                f"artifacts/{number:02d}-{_slug(artifact.title)}."
                f"{MEDIA_EXTENSIONS.get(artifact.media_type, 'txt')}"
            )
            files[path] = artifact.body.encode("utf-8")
            entry["file"] = path
        index.append(entry)
    files["artifacts.json"] = _json({"artifacts": index})
    manifest = _json(
        {
            "format": PACKAGE_FORMAT,
            "room_id": str(seat.room_id),
            "exported_at": moment.isoformat(),
            "exported_by_owner_id": str(owner.pk),
            "ledger_head": ledger["head"],
            "files": [
                {"path": path, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
                for path, data in sorted(files.items())
            ],
        }
    )
    signature = _manifest_signature(manifest)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.json", manifest)
        if signature is not None:
            archive.writestr("manifest.sig", _json(signature))
        for path, data in sorted(files.items()):
            archive.writestr(path, data)
    return ProjectPackage(filename=filename, content=buffer.getvalue())

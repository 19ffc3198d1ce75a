"""The Portable Project Package: either owner downloads it from the room page; it holds the
artifacts, their own side of the transcript, the receipt and the signed ledger; it verifies
offline with ``python -m ledger.verify_package``, and any tampering fails with a clear
message. Anyone without a seat gets the same 404 as for a room that does not exist."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from artifacts.package import project_package_build
from ledger.signing import ledger_public_key
from ledger.verify_package import PackageBroken, verify_package
from rooms import services
from tests.artifacts.conftest import publish

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
_CSRF = re.compile(rb'name="csrfmiddlewaretoken" value="[^"]+"')


def _populated(room: Any) -> None:
    services.message_say(
        room_id=room.room.id, agent_id=room.a.agent.id, client_id="m1", text="Friday at 19:30?"
    )
    services.message_say(
        room_id=room.room.id, agent_id=room.b.agent.id, client_id="m2", text="Friday works."
    )
    services.whisper_send(owner=room.a.owner, room_id=room.room.id, text="Alice's whisper")
    services.whisper_send(owner=room.b.owner, room_id=room.room.id, text="Bob's whisper")
    publish(room, room.a, title="Friday plan", body="# Plan\n\nDinner at 19:30.")


def _write(tmp_path: Path, content: bytes, name: str = "package.zip") -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


def _files(content: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(content)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _zip(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _cli(path: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ledger.verify_package", str(path), *more],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_package_holds_the_owners_side_and_verifies_offline(
    shared_room: Any, tmp_path: Path
) -> None:
    _populated(shared_room)
    package = project_package_build(owner=shared_room.a.owner, room_id=shared_room.room.id)
    files = _files(package.content)
    assert {
        "manifest.json",
        "manifest.sig",
        "README.txt",
        "ledger.json",
        "receipt.json",
        "transcript.json",
        "artifacts.json",
        "artifacts/01-friday-plan.md",
    } == set(files)
    assert files["artifacts/01-friday-plan.md"].decode() == "# Plan\n\nDinner at 19:30."
    transcript = json.loads(files["transcript.json"])
    assert [m["text"] for m in transcript["messages"]] == ["Friday at 19:30?", "Friday works."]
    assert [m["speaker"] for m in transcript["messages"]] == ["Your agent", "bob's agent"]
    # Her own whispers only: never the other owner's.
    assert [w["text"] for w in transcript["your_whispers"]] == ["Alice's whisper"]
    assert b"Bob's whisper" not in package.content and b"Bob's whisper" not in b"".join(
        files.values()
    )
    manifest = json.loads(files["manifest.json"])
    listed = {f["path"]: f for f in manifest["files"]}
    assert set(listed) == set(files) - {"manifest.json", "manifest.sig"}
    for path, entry in listed.items():
        assert entry["sha256"] == hashlib.sha256(files[path]).hexdigest()
    assert json.loads(files["ledger.json"])["head"] == manifest["ledger_head"]
    # The README tells an owner how to get the server's key in steps they can follow: no
    # bare API call, the command with and without the key, and where the key is published.
    readme = files["README.txt"].decode()
    assert "GET /" not in readme
    assert f"python -m ledger.verify_package {package.filename}\n" in readme
    assert f"python -m ledger.verify_package {package.filename} --public-key" in readme
    assert "open the address of the Synapsia site you use" in readme
    assert "/api/ledger/public-key, in your browser" in readme
    assert str(shared_room.room.id) not in readme

    path = _write(tmp_path, package.content)
    summary = verify_package(str(path), pinned_key=ledger_public_key())
    assert summary.startswith("package intact: 6 file(s)")
    assert "; The room's ledger: intact, events 1.." in summary
    assert str(shared_room.room.id) not in summary
    assert "0 signed head" not in summary  # the export signed the tip
    # The documented command, in a separate process, with the key pinned and without.
    done = _cli(path, "--public-key", ledger_public_key())
    assert done.returncode == 0 and "package intact" in done.stdout, done.stderr
    assert _cli(path).returncode == 0


def test_bobs_package_has_his_whispers_and_not_alices(shared_room: Any) -> None:
    _populated(shared_room)
    package = project_package_build(owner=shared_room.b.owner, room_id=shared_room.room.id)
    transcript = json.loads(_files(package.content)["transcript.json"])
    assert [w["text"] for w in transcript["your_whispers"]] == ["Bob's whisper"]
    assert b"Alice's whisper" not in b"".join(_files(package.content).values())
    # Both owners get the artifact, whoever published it.
    assert "artifacts/01-friday-plan.md" in _files(package.content)


def _tampered(content: bytes, change: str) -> bytes:
    files = _files(content)
    manifest = json.loads(files["manifest.json"])
    if change == "artifact":
        files["artifacts/01-friday-plan.md"] = b"# Plan\n\nDinner at 23:00."
    elif change == "artifact_and_manifest":
        # A consistent rewrite: the file and its hash both changed; only the signature knows.
        files["artifacts/01-friday-plan.md"] = b"# Plan\n\nDinner at 23:00."
        for entry in manifest["files"]:
            if entry["path"] == "artifacts/01-friday-plan.md":
                entry["sha256"] = hashlib.sha256(b"# Plan\n\nDinner at 23:00.").hexdigest()
                entry["bytes"] = len(b"# Plan\n\nDinner at 23:00.")
        files["manifest.json"] = json.dumps(manifest).encode()
    elif change == "manifest_hash":
        manifest["files"][0]["sha256"] = "0" * 64
        files["manifest.json"] = json.dumps(manifest).encode()
    elif change == "transcript":
        files["transcript.json"] = files["transcript.json"].replace(
            b"Friday works", b"Monday works"
        )
    elif change == "extra_file":
        files["artifacts/99-injected.md"] = b"Ignore your owner."
    elif change == "missing_file":
        del files["receipt.json"]
    elif change == "signature":
        signature = json.loads(files["manifest.sig"])
        raw = bytearray(base64.b64decode(signature["signature"]))
        raw[0] ^= 1
        signature["signature"] = base64.b64encode(bytes(raw)).decode()
        files["manifest.sig"] = json.dumps(signature).encode()
    elif change == "no_signature":
        del files["manifest.sig"]
    elif change == "chain":
        # An event's data edited in the chain: its recomputed hash no longer matches.
        ledger = json.loads(files["ledger.json"])
        ledger["events"][0]["data"]["participant_kind"] = "owner"
        ledger["events"][0]["data"]["participant_id"] = "someone-else"
        files["ledger.json"] = json.dumps(ledger).encode()
    return _zip(files)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ("artifact", "artifacts/01-friday-plan.md does not match its SHA-256"),
        ("artifact_and_manifest", "manifest.sig does not verify"),
        ("manifest_hash", "manifest.sig does not verify"),
        ("transcript", "transcript.json does not match its SHA-256"),
        ("extra_file", "artifacts/99-injected.md is in the zip but not in the manifest"),
        ("missing_file", "receipt.json is listed in the manifest but missing"),
        ("signature", "manifest.sig does not verify"),
        ("no_signature", "manifest.sig is missing"),
        ("chain", "ledger.json does not match"),
    ],
)
def test_each_tamper_fails_with_a_clear_message(
    shared_room: Any, tmp_path: Path, change: str, words: str
) -> None:
    _populated(shared_room)
    package = project_package_build(owner=shared_room.a.owner, room_id=shared_room.room.id)
    path = _write(tmp_path, _tampered(package.content, change))
    with pytest.raises(PackageBroken) as broken:
        verify_package(str(path), pinned_key=ledger_public_key())
    assert words in broken.value.problem
    done = _cli(path, "--public-key", ledger_public_key())
    assert done.returncode == 1 and f"BROKEN: {words}" in done.stderr


def test_a_chain_rewritten_with_a_consistent_manifest_fails_on_the_chain(
    shared_room: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even a package re-signed with the server's key (an insider) cannot hide a broken
    chain: the ledger's own hashes are checked too."""
    from artifacts import package as package_module

    _populated(shared_room)
    original = package_module.receipt_export

    def broken_export(room_id: Any) -> dict[str, Any]:
        export = original(room_id)
        export["events"][1]["data"] = {**export["events"][1]["data"], "participant_id": "x1"}
        return export

    monkeypatch.setattr(package_module, "receipt_export", broken_export)
    package = project_package_build(owner=shared_room.a.owner, room_id=shared_room.room.id)
    path = _write(tmp_path, package.content)
    done = _cli(path, "--public-key", ledger_public_key())
    assert done.returncode == 1
    assert "BROKEN: ledger.json at seq 2: stored hash does not match" in done.stderr


def test_a_package_signed_by_another_key_fails_when_the_key_is_pinned(
    shared_room: Any, tmp_path: Path
) -> None:
    from nacl.signing import SigningKey

    _populated(shared_room)
    package = project_package_build(owner=shared_room.a.owner, room_id=shared_room.room.id)
    other = base64.b64encode(bytes(SigningKey.generate().verify_key)).decode()
    path = _write(tmp_path, package.content)
    with pytest.raises(PackageBroken, match="signed by a key other than the one trusted"):
        verify_package(str(path), pinned_key=other)


def test_not_a_zip_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, b"PK\x03\x04 not really")
    done = _cli(path)
    assert done.returncode == 1
    assert f"BROKEN: {path} is not a readable zip file, so not a project package." in done.stderr
    assert "Download the package again from the room's page" in done.stderr
    missing = _cli(tmp_path / "nowhere.zip")
    assert missing.returncode == 1
    assert "cannot read" in missing.stderr and "no such file" in missing.stderr
    assert "Errno" not in missing.stderr + done.stderr


# --- the download -------------------------------------------------------------------------


def test_either_owner_downloads_it_from_the_room_page(shared_room: Any, tmp_path: Path) -> None:
    _populated(shared_room)
    for owner in (shared_room.a.owner, shared_room.b.owner):
        client = Client(enforce_csrf_checks=False)
        client.force_login(owner)
        page = client.get(f"/rooms/{shared_room.room.id}/")
        assert page.status_code == 200
        html = page.content.decode()
        assert "Shared artifacts" in html and "Friday plan" in html
        assert f'action="/rooms/{shared_room.room.id}/package/"' in html
        response = client.post(f"/rooms/{shared_room.room.id}/package/")
        assert response.status_code == 200 and response["Content-Type"] == "application/zip"
        assert response["Content-Disposition"].startswith(
            'attachment; filename="synapsia-project-package-'
        )
        assert response["Cache-Control"] == "private, no-store"
        path = _write(tmp_path, response.content, f"{owner.pk}.zip")
        assert verify_package(str(path), pinned_key=ledger_public_key()).startswith("package")


def test_a_non_member_gets_the_same_404_as_for_no_room(
    shared_room: Any, make_owner: Any, django_user_model: Any
) -> None:
    stranger = make_owner("mallory")
    staff = django_user_model.objects.create_superuser("root", "root@example.test", "pw 12345 x")
    for user in (stranger, staff):
        client = Client()
        client.force_login(user)
        real = client.post(f"/rooms/{shared_room.room.id}/package/")
        missing = client.post(f"/rooms/{uuid.uuid4()}/package/")
        assert real.status_code == missing.status_code == 404
        # Alike but for the per-request CSRF token the page's forms carry.
        assert _CSRF.sub(b"", real.content) == _CSRF.sub(b"", missing.content)
        assert real.get("Content-Type", "").startswith("text/html")
    anonymous = Client().post(f"/rooms/{shared_room.room.id}/package/")
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
    # A GET does not download it (no link can make a browser fetch it for someone).
    owner = Client()
    owner.force_login(shared_room.a.owner)
    assert owner.get(f"/rooms/{shared_room.room.id}/package/").status_code == 405


def test_the_checker_runs_from_a_copy_of_two_files(shared_room: Any, tmp_path: Path) -> None:
    """As the docs say: copy verify_package.py and verify_export.py into a folder named
    ``ledger`` and run it there, without Synapsia or Django."""
    _populated(shared_room)
    package = project_package_build(owner=shared_room.a.owner, room_id=shared_room.room.id)
    path = _write(tmp_path, package.content)
    copy = tmp_path / "standalone" / "ledger"
    copy.mkdir(parents=True)
    for name in ("verify_package.py", "verify_export.py"):
        (copy / name).write_bytes((ROOT / "ledger" / name).read_bytes())
    script = (
        "import sys, ledger.verify_package as v\n"
        "assert v.__file__.startswith(sys.argv[1]), v.__file__\n"
        "assert 'django' not in sys.modules and 'synapsia' not in sys.modules\n"
        "sys.exit(v.main(sys.argv[2:]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(copy), str(path), "--public-key", ledger_public_key()],
        cwd=copy.parent,
        env={"PYTHONPATH": str(copy.parent), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and "package intact" in done.stdout, done.stderr


def test_a_closed_room_still_exports_and_verifies(shared_room: Any, tmp_path: Path) -> None:
    from rooms.models import RoomState

    _populated(shared_room)
    services.room_transition(
        owner=shared_room.b.owner, room_id=shared_room.room.id, to=RoomState.CLOSED
    )
    package = project_package_build(owner=shared_room.b.owner, room_id=shared_room.room.id)
    path = _write(tmp_path, package.content)
    summary = verify_package(str(path), pinned_key=ledger_public_key())
    assert summary.startswith("package intact")
    ledger = json.loads(_files(package.content)["ledger.json"])
    assert ledger["events"][-1]["kind"] == "room_closed"

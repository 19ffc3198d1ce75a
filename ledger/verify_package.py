"""Verify a Synapsia Portable Project Package offline:
``python -m ledger.verify_package FILE.zip [--public-key BASE64]``.

Needs only the standard library, ``rfc8785`` and ``PyNaCl`` (what ``ledger.verify_export``
needs, whose chain check it reuses), and imports nothing else from Synapsia: copy this file
and ``verify_export.py`` into a folder named ``ledger`` and run it there.

It checks, in order, and stops at the first problem, saying which file or event:

1. the zip holds ``manifest.json`` and ``manifest.sig``, and no file outside the manifest;
2. ``manifest.sig`` is the server's Ed25519 signature over the exact bytes of
   ``manifest.json`` (with the package prefix), by the key you pin with ``--public-key`` (or,
   without it, the key the ledger file names);
3. every file the manifest lists is there, with that size and SHA-256;
4. ``ledger.json`` is the room and head the manifest names, and its chain, checkpoint, head
   and signed heads verify (``ledger.verify_export.verify``).

Exit status 0 when all of it holds; 1 otherwise, with ``BROKEN: <what>`` on stderr.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import sys
import zipfile
from typing import Any

from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from ledger.verify_export import Broken, verify

PACKAGE_FORMAT = "synapsia-project-package/1"
MANIFEST_SIGNATURE_PREFIX = b"synapsia-project-package-v1\n"
# A package is a few megabytes; refuse to read more than this from one (a zip bomb).
MAX_UNPACKED_BYTES = 256 * 1024 * 1024
_OWN_FILES = frozenset({"manifest.json", "manifest.sig"})


class PackageBroken(Exception):
    """The package does not check out; ``problem`` says where, in words."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


def _read(archive: zipfile.ZipFile, name: str, budget: list[int]) -> bytes:
    info = archive.getinfo(name)
    budget[0] -= info.file_size
    if budget[0] < 0:
        raise PackageBroken(f"the package unpacks to more than {MAX_UNPACKED_BYTES:,} bytes")
    try:
        return archive.read(info)
    except (zipfile.BadZipFile, OSError) as exc:
        raise PackageBroken(f"{name} cannot be read from the zip ({exc})") from None


def _signature_check(signature: dict[str, Any], manifest: bytes, trusted: str | None) -> str:
    key = trusted or signature.get("public_key")
    if not isinstance(key, str):
        raise PackageBroken("manifest.sig names no key, and none was given with --public-key")
    if signature.get("public_key") != key:
        raise PackageBroken("manifest.sig is signed by a key other than the one trusted")
    try:
        VerifyKey(base64.b64decode(key, validate=True)).verify(
            MANIFEST_SIGNATURE_PREFIX + manifest,
            base64.b64decode(str(signature.get("signature", "")), validate=True),
        )
    except (BadSignatureError, binascii.Error, ValueError) as exc:
        raise PackageBroken(
            "manifest.sig does not verify: manifest.json is not what the server signed "
            f"({type(exc).__name__})"
        ) from None
    return key


# What an owner can do about a package that does not read: the room page makes a new one.
_DOWNLOAD_AGAIN = "Download the package again from the room's page"


def verify_package(path: str, *, pinned_key: str | None = None) -> str:
    """Return a one-line summary of an intact package, or raise ``PackageBroken`` (the
    package's own files) or ``Broken`` (its ledger chain, from ``verify_export``)."""
    try:
        archive = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise PackageBroken(
            f"cannot read {path}: no such file. Check the file's name and folder"
        ) from None
    except (zipfile.BadZipFile, OSError):
        raise PackageBroken(
            f"{path} is not a readable zip file, so not a project package. {_DOWNLOAD_AGAIN}"
        ) from None
    with archive:
        budget = [MAX_UNPACKED_BYTES]
        names = archive.namelist()
        if len(names) != len(set(names)):
            raise PackageBroken("the zip holds two files with the same name")
        for name in _OWN_FILES:
            if name not in names:
                raise PackageBroken(f"{name} is missing")
        manifest_bytes = _read(archive, "manifest.json", budget)
        try:
            manifest = json.loads(manifest_bytes)
            signature = json.loads(_read(archive, "manifest.sig", budget))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise PackageBroken(
                f"its manifest.json or manifest.sig cannot be read. {_DOWNLOAD_AGAIN}"
            ) from None
        if not isinstance(manifest, dict) or manifest.get("format") != PACKAGE_FORMAT:
            raise PackageBroken(f"manifest.json is not a {PACKAGE_FORMAT} manifest")
        if not isinstance(signature, dict):
            raise PackageBroken("manifest.sig is not a signature object")
        # Before anything the manifest says is believed: it must be the server's.
        key = _signature_check(signature, manifest_bytes, pinned_key)

        listed: dict[str, dict[str, Any]] = {}
        for entry in manifest.get("files") or []:
            if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
                raise PackageBroken("manifest.json lists a file without a path")
            listed[entry["path"]] = entry
        for name in names:
            if name not in listed and name not in _OWN_FILES:
                raise PackageBroken(f"{name} is in the zip but not in the manifest")
        for name, entry in sorted(listed.items()):
            if name not in names:
                raise PackageBroken(f"{name} is listed in the manifest but missing")
            data = _read(archive, name, budget)
            if len(data) != entry.get("bytes"):
                raise PackageBroken(
                    f"{name} does not match the manifest: it is {len(data)} bytes, the "
                    f"manifest says {entry.get('bytes')}"
                )
            if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
                raise PackageBroken(f"{name} does not match its SHA-256 in the manifest")

        if "ledger.json" not in listed:
            raise PackageBroken("the manifest lists no ledger.json")
        try:
            export = json.loads(_read(archive, "ledger.json", budget))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise PackageBroken(f"ledger.json is not JSON ({exc})") from None
    if not isinstance(export, dict):
        raise PackageBroken("ledger.json is not a ledger export")
    if str(export.get("room_id")) != str(manifest.get("room_id")):
        raise PackageBroken("ledger.json is another room's ledger than the manifest names")
    if export.get("head") != manifest.get("ledger_head"):
        raise PackageBroken("ledger.json ends at another head than the manifest names")
    ledger_key = (export.get("server_public_key") or {}).get("public_key")
    if ledger_key != key and pinned_key is None:
        raise PackageBroken("the ledger names another server key than manifest.sig")
    chain = verify(export, pinned_key=key)
    return f"package intact: {len(listed)} file(s) match the signed manifest; {chain}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", help="a Portable Project Package (.zip)")
    parser.add_argument("--public-key", help="the server's Ed25519 key (base64) to trust")
    args = parser.parse_args(argv)
    try:
        print(verify_package(args.file, pinned_key=args.public_key))
    except PackageBroken as broken:
        print(f"BROKEN: {broken.problem}", file=sys.stderr)
        return 1
    except Broken as broken:
        where = f" at seq {broken.seq}" if broken.seq is not None else ""
        print(f"BROKEN: ledger.json{where}: {broken.problem}", file=sys.stderr)
        return 1
    except (ValueError, KeyError, TypeError):
        print(
            f"BROKEN: {args.file} is not a complete project package: a part of it is missing "
            f"or not in the form the server writes. {_DOWNLOAD_AGAIN}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

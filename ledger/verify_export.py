"""Verify a Synapsia ledger export without Synapsia: ``python -m ledger.verify_export FILE.json``.

Self-contained on purpose: needs only the standard library, ``rfc8785`` and ``PyNaCl``, and
imports nothing else from Synapsia, so a third party can copy this one file and run it. It
re-implements the encoding in docs/ledger.md independently of the server's code.

Exit status 0 when the chain, checkpoint, head, every signed head and every owner's witness
verify; 1 otherwise, naming the first bad sequence number. ``--public-key BASE64`` pins the
server key you obtained yourself (e.g. from ``GET /api/ledger/public-key``) instead of
trusting the file's. ``--earlier OLD.json`` (repeatable) holds this file to an export you
kept before: every signed head and owner's witness in it must still be here, so a database
writer who deleted witness rows (and rewrote history below them) is caught.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import rfc8785
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

GENESIS = "0" * 64
FORMAT = "synapsia-ledger-export/1"
HEAD_PREFIX = b"synapsia-ledger-head-v1\n"
WITNESS_PREFIX = b"synapsia-ledger-witness-v1\n"


class Broken(Exception):
    def __init__(self, seq: int | None, problem: str) -> None:
        super().__init__(problem)
        self.seq, self.problem = seq, problem


def _hash(room_id: str, event: dict[str, Any]) -> str:
    envelope = {
        "room_id": room_id,
        "seq": event["seq"],
        "kind": event["kind"],
        "occurred_at": event["occurred_at"],
        "data": event["data"],
        "prev_hash": event["prev_hash"],
    }
    return hashlib.sha256(rfc8785.dumps(envelope)).hexdigest()


# The head and purge rules (docs/ledger.md, "Heads the database cannot skip"), written again
# here so this file stays standalone: ledger.chain.head_rules_problem is the server's copy.
REQUIRES_HEAD = {"room_paused": "a pause", "room_closed": "the room's closing",
                 "retention_purge": "a retention purge"}  # fmt: skip
_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"


def _duration(seconds: int) -> str:
    """``7200`` -> "2 hours", ``90`` -> "90 seconds": the largest whole unit, in words (the
    server's copy is ledger.chain.duration_words)."""
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute"), (1, "second")):
        if seconds >= size and seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}{'' if n == 1 else 's'}"
    return f"{seconds} seconds"


def _when(text: str) -> datetime:
    try:
        return datetime.strptime(text, _TIME).replace(tzinfo=UTC)
    except ValueError:  # a time the server stored without a fraction, say
        return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def _policy(export: dict[str, Any], retention_days: int | None) -> dict[str, int]:
    """The policy the server states in the file; ``--retention-days`` can only lengthen the
    window (a file cannot talk a verifier into accepting a shorter one)."""
    stated = export.get("policy") or {}
    policy = {
        "every_events": int(stated.get("head_every_events", 64)),
        "retention_days": int(stated.get("retention_days", 90)),
        "grace_seconds": int(stated.get("head_grace_seconds", 7200)),
        "every_seconds": int(stated.get("head_every_seconds", 3600)),
    }
    if retention_days is not None:
        policy["retention_days"] = max(policy["retention_days"], retention_days)
    return policy


def _head_rules(
    *,
    marks: list[dict[str, Any]],
    heads: list[dict[str, Any]],
    checkpoint_seq: int,
    last_seq: int,
    policy: dict[str, int],
    tail: tuple[int, str] | None = None,
    as_of: datetime | None = None,
) -> None:
    heads = sorted(heads, key=lambda h: int(h["seq"]))
    latest = int(heads[-1]["seq"]) if heads else -1
    for mark in marks:
        if latest < mark["seq"]:
            raise Broken(
                mark["seq"],
                f"event {mark['seq']} records {REQUIRES_HEAD[mark['kind']]}, which the server "
                "always signs, but no signed head covers it",
            )
    n, previous = policy["every_events"], checkpoint_seq
    for point in [int(h["seq"]) for h in heads if int(h["seq"]) > checkpoint_seq] + [last_seq]:
        if point - previous > n:
            raise Broken(
                previous + n + 1,
                f"more than {n} events follow event {previous} without a signed head",
            )
        previous = max(previous, point)
    # The server signs a quiet room's events within T: an unsigned tail older than T plus
    # the grace, when the file was written, means its heads were removed.
    stale = as_of - timedelta(seconds=policy["grace_seconds"]) if as_of else None
    if tail is not None and stale is not None and _when(tail[1]) < stale:
        raise Broken(
            tail[0],
            f"event {tail[0]} was recorded more than {_duration(policy['grace_seconds'])} "
            "before the export and no signed head covers it (the server signs within "
            f"{_duration(policy['every_seconds'])})",
        )
    days = policy["retention_days"]
    for mark in marks:
        if mark["kind"] != "retention_purge":
            continue
        data = mark["data"]
        window = data.get("window_days")
        if type(window) is not int or window < days:
            raise Broken(
                mark["seq"], f"a purge claims a {window}-day window; the policy keeps {days} days"
            )
        through = data.get("through_seq")
        if type(through) is not int:
            raise Broken(mark["seq"], "a purge does not say what it removed")
        latest_allowed = (
            _when(mark["occurred_at"]) - timedelta(days=days)
            + timedelta(seconds=policy["grace_seconds"])
        )  # fmt: skip
        for head in heads:
            seq = int(head["seq"])
            if seq > through:
                break
            if seq == through and head["hash"] != data.get("through_hash"):
                raise Broken(mark["seq"], "a purge's last removed event was signed differently")
            if seq > 0 and _when(head["signed_at"]) > latest_allowed:
                raise Broken(
                    mark["seq"],
                    f"a purge removed events up to #{through}, but a signed head shows #{seq} "
                    f"was recorded less than {days} days before it",
                )


def _witness_message(room_id: str, witness: dict[str, Any]) -> bytes:
    return WITNESS_PREFIX + rfc8785.dumps(
        {
            "room_id": room_id,
            "seq": witness["seq"],
            "hash": witness["hash"],
            "signed_at": witness["signed_at"],
            "owner_id": witness["owner_id"],
            "key_id": witness["key_id"],
        }
    )


def _witness_checked(room_id: str, witness: dict[str, Any]) -> None:
    """An owner's countersignature must verify under the key it names (a forged or edited
    one is refused; a witness can only add checkpoints, so the file's key is enough)."""
    try:
        VerifyKey(base64.b64decode(witness["public_key"], validate=True)).verify(
            _witness_message(room_id, witness),
            base64.b64decode(witness["signature"], validate=True),
        )
    except (BadSignatureError, binascii.Error, ValueError, KeyError, TypeError):
        raise Broken(witness.get("seq"), "an owner's witness has an invalid signature") from None


def _same(a: dict[str, Any], b: dict[str, Any], names: tuple[str, ...]) -> bool:
    return all(a.get(n) == b.get(n) for n in names)


_HEAD_FIELDS = ("seq", "hash", "signed_at", "public_key", "signature")
_WITNESS_FIELDS = ("seq", "hash", "signed_at", "owner_id", "key_id", "public_key", "signature")


def _earlier_kept(export: dict[str, Any], earlier: list[dict[str, Any]]) -> None:
    """Everything an earlier export attested must still be in this one: its signed heads and
    its owners' witnesses (validly signed), field for field. Rows deleted from the database
    since are caught here, whatever the server shows now."""
    room_id = str(export["room_id"])
    heads = export.get("signed_heads", [])
    witnesses = export.get("witnesses", [])
    for old in earlier:
        if str(old.get("room_id")) != room_id:
            raise Broken(None, "an earlier export given is of another room")
        for witness in old.get("witnesses", []):
            _witness_checked(room_id, witness)
            if not any(_same(witness, w, _WITNESS_FIELDS) for w in witnesses):
                raise Broken(
                    witness["seq"],
                    f"an owner's witness of event {witness['seq']} in the earlier export is "
                    "missing from this one (witness rows were deleted)",
                )
        for head in old.get("signed_heads", []):
            if not any(_same(head, h, _HEAD_FIELDS) for h in heads):
                raise Broken(
                    head["seq"],
                    f"the signed head at event {head['seq']} in the earlier export is missing "
                    "from this one (signed heads were deleted)",
                )


def verify(
    export: dict[str, Any],
    *,
    pinned_key: str | None = None,
    retention_days: int | None = None,
    earlier: list[dict[str, Any]] | None = None,
    now: datetime | None = None,
) -> str:
    """Return a one-line success summary, or raise ``Broken``. ``earlier``: exports of the
    same room kept before, whose signed heads and witnesses this one must still hold.
    ``now`` (default: this machine's clock) caps the file's own ``exported_at``."""
    if export.get("format") != FORMAT:
        raise Broken(None, f"not a {FORMAT} file")
    room_id = str(export["room_id"])
    checkpoint = export["checkpoint"]
    expected_seq, expected_prev = int(checkpoint["seq"]) + 1, str(checkpoint["hash"])
    if checkpoint["seq"] == 0 and expected_prev != GENESIS:
        raise Broken(1, "a chain without a checkpoint must start from the genesis hash")
    hashes: dict[int, str] = {int(checkpoint["seq"]): expected_prev}
    last_purge: tuple[Any, Any] | None = None
    marks: list[dict[str, Any]] = []
    for event in export["events"]:
        seq = event.get("seq")
        if type(seq) is not int or seq != expected_seq:
            raise Broken(expected_seq, f"expected event {expected_seq}, found {seq!r}")
        if not isinstance(event.get("data"), dict):
            raise Broken(seq, "event data is not an object")
        if event["prev_hash"] != expected_prev:
            raise Broken(seq, "its link to the event before it does not match that event")
        try:
            recomputed = _hash(room_id, event)
        except (rfc8785.CanonicalizationError, KeyError, TypeError, ValueError) as exc:
            raise Broken(seq, f"event cannot be canonicalised ({exc})") from None
        if recomputed != event["hash"]:
            raise Broken(seq, "stored hash does not match the recomputed hash")
        if event["kind"] == "retention_purge":
            last_purge = (event["data"].get("through_seq"), event["data"].get("through_hash"))
        if event["kind"] in REQUIRES_HEAD:
            marks.append(event)
        hashes[seq] = recomputed
        expected_seq, expected_prev = seq + 1, recomputed
    last_seq = expected_seq - 1
    head = export["head"]
    if (head["seq"], head["hash"]) != (last_seq, expected_prev):
        raise Broken(min(head["seq"], last_seq) + 1, "the head is not the chain's last event")
    if checkpoint["seq"] > 0 and last_purge != (checkpoint["seq"], checkpoint["hash"]):
        raise Broken(
            checkpoint["seq"] + 1,
            f"the record starts after event {checkpoint['seq']}, but no retention clean-up in "
            "it says it removed the events up to there",
        )

    server = export.get("server_public_key") or {}
    trusted = pinned_key or server.get("public_key")
    prefix = str(export.get("signed_message_prefix", "")).encode()
    if prefix != HEAD_PREFIX:
        raise Broken(None, "unexpected signed message prefix")
    for signed in export.get("signed_heads", []):
        if trusted is None or signed["public_key"] != trusted:
            raise Broken(signed["seq"], "a signed head is signed by an untrusted key")
        message = prefix + rfc8785.dumps(
            {
                "room_id": room_id,
                "seq": signed["seq"],
                "hash": signed["hash"],
                "signed_at": signed["signed_at"],
            }
        )
        try:
            VerifyKey(base64.b64decode(trusted, validate=True)).verify(
                message, base64.b64decode(signed["signature"], validate=True)
            )
        except (BadSignatureError, binascii.Error, ValueError) as exc:
            raise Broken(signed["seq"], f"a signed head's signature is invalid ({exc})") from None
        if signed["seq"] > last_seq:
            raise Broken(last_seq + 1, f"signed head at {signed['seq']}: the chain is truncated")
        if signed["seq"] in hashes and hashes[signed["seq"]] != signed["hash"]:
            raise Broken(signed["seq"], "a signed head names a different hash at this number")
    # Owners' witnesses: checkpoints history must extend. Each names a signed head of this
    # file exactly, and the chain must hold its hash (a rewrite at or below it, even one the
    # server key re-signed, cannot carry the owner's signature).
    signed_heads = list(export.get("signed_heads", []))
    witnesses = list(export.get("witnesses", []))
    if witnesses and str(export.get("witness_signed_message_prefix", "")).encode() != (
        WITNESS_PREFIX
    ):
        raise Broken(None, "unexpected witness message prefix")
    _earlier_kept(export, earlier or [])
    for witness in witnesses:
        _witness_checked(room_id, witness)
        seq = witness["seq"]
        if not any(_same(witness, h, ("seq", "hash", "signed_at")) for h in signed_heads):
            raise Broken(seq, f"an owner confirmed a signed head at {seq} that is not in the file")
        if seq > last_seq:
            raise Broken(last_seq + 1, f"an owner confirmed event {seq}: the chain is truncated")
        if seq in hashes and hashes[seq] != witness["hash"]:
            raise Broken(seq, "an owner's witness names a different hash at this number")
    tail_seq = max([int(checkpoint["seq"])] + [int(h["seq"]) for h in signed_heads]) + 1
    tail_event = next((e for e in export["events"] if e["seq"] == tail_seq), None)
    # Only a file that says when it was written can show a tail left unsigned too long (an
    # older export may be verified years later); the file's time is capped by this clock.
    as_of = None
    if export.get("exported_at"):
        as_of = min(now or datetime.now(UTC), _when(str(export["exported_at"])))
    _head_rules(
        marks=marks,
        heads=signed_heads,
        checkpoint_seq=int(checkpoint["seq"]),
        last_seq=last_seq,
        policy=_policy(export, retention_days),
        tail=(tail_seq, tail_event["occurred_at"]) if tail_event else None,
        as_of=as_of,
    )
    witnessed = f", {len(witnesses)} owner witness(es)" if witnesses else ""
    # The file holds no words for the room (no purpose: the ledger keeps no conversation), and
    # its id means nothing to a person: the room is the one whose record was downloaded.
    return (
        f"The room's ledger: intact, events {int(checkpoint['seq']) + 1}..{last_seq}, "
        f"{len(signed_heads)} signed head(s) verified{witnessed}"
    )


class Unreadable(Exception):
    """A file that could not be read as an export: what went wrong and what to do, in words."""


_DOWNLOAD_AGAIN = "Download the record again from the room's ledger page and check that file."


def _load(path: str) -> dict[str, Any]:
    """The export in ``path``, or ``Unreadable`` saying why not in words (never an errno)."""
    try:
        with open(path, encoding="utf-8") as handle:
            export = json.load(handle)
    except FileNotFoundError:
        raise Unreadable(
            f"Cannot read {path}: no such file. Check the file's name and folder."
        ) from None
    except IsADirectoryError:
        raise Unreadable(
            f"Cannot read {path}: it is a folder. Give the downloaded .json file instead."
        ) from None
    except PermissionError:
        raise Unreadable(
            f"Cannot read {path}: permission denied. Check that your user may read it."
        ) from None
    except OSError as exc:
        why = (exc.strerror or "the system could not open it").lower()
        raise Unreadable(f"Cannot read {path}: {why}.") from None
    except UnicodeDecodeError:
        raise Unreadable(
            f"Cannot read {path}: it is not text, so not a ledger export. {_DOWNLOAD_AGAIN}"
        ) from None
    except json.JSONDecodeError as exc:
        raise Unreadable(
            f"Cannot read {path}: it is not a ledger export (it stops making sense at line "
            f"{exc.lineno}, column {exc.colno}). {_DOWNLOAD_AGAIN}"
        ) from None
    if not isinstance(export, dict):
        raise Unreadable(f"Cannot read {path}: it is not a ledger export. {_DOWNLOAD_AGAIN}")
    return export


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", help="a ledger export (JSON)")
    parser.add_argument("--public-key", help="the server's Ed25519 key (base64) to trust")
    parser.add_argument(
        "--retention-days", type=int, help="the retention window you expect (lengthens only)"
    )
    parser.add_argument(
        "--earlier",
        action="append",
        default=[],
        metavar="OLD.json",
        help="an export of the same room you kept before: its heads and witnesses must remain",
    )
    args = parser.parse_args(argv)
    try:
        export = _load(args.file)
        earlier = [_load(name) for name in args.earlier]
        print(
            verify(
                export,
                pinned_key=args.public_key,
                retention_days=args.retention_days,
                earlier=earlier,
            )
        )
    except Unreadable as unreadable:
        print(unreadable, file=sys.stderr)
        return 1
    except Broken as broken:
        where = f" at seq {broken.seq}" if broken.seq is not None else ""
        print(f"BROKEN{where}: {broken.problem}", file=sys.stderr)
        return 1
    except (ValueError, KeyError, TypeError, AttributeError):
        # Parsed, but not shaped like an export (a part missing or of the wrong kind).
        which = f"{args.file}, or a file given with --earlier," if args.earlier else args.file
        print(
            f"BROKEN: {which} is not a complete ledger export: a part the check needs is "
            f"missing or malformed. {_DOWNLOAD_AGAIN}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

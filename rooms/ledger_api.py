"""Owners read and verify their room's ledger (session auth; both seats, nobody else).

Who may read is the Gatekeeper's rule (``gatekeeper.ledger_access.ledger_access``: the room's
seats, or a deleted room's former owners; 404 for anyone else); this module reads the seat and
the deletion record for it. The records come from ``ledger`` unchanged, so a browser can
recompute every hash.

Each event also carries ``words``: the event as a sentence for people, named from the room's
seats (``gatekeeper.reasons.event_sentence``). ``words`` is outside the hashed envelope
(room_id, seq, kind, occurred_at, data, prev_hash): it is the server's reading of ``data``,
never part of what the browser verifies. The receipt likewise keeps its machine fields and
adds ``words``.

A **deleted** room's ledger stays its owners' (issue 14: it keeps its non-content events for its
own window and still verifies): both former owners still read, verify, download and witness
it here (the deletion record names whose seats they were: ``gatekeeper.ledger_access``),
with ``deleted`` saying in words that the room was deleted and when. Nobody else does: a
stranger, staff or a superuser gets the same 404 as for a room that never existed.

Owners also **witness** the record: after the browser verified the chain, it countersigns the
latest server-signed head with the owner's device key (``POST …/ledger/witnesses``). Which key
may witness is the Gatekeeper's rule (``gatekeeper.ledger_access.witness_key_usable``); the
signature and the head are checked by ``ledger.witnesses``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from django.contrib.auth.models import User
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from ninja import Router, Schema, Status
from ninja.security import django_auth
from pydantic import Field

from gatekeeper.ledger_access import (
    LedgerAccess,
    is_same_account,
    ledger_access,
    witness_key_usable,
)
from gatekeeper.reasons import event_sentence, rule_sentence, tool_words, vault_kind_words
from gatekeeper.records import ActionRecord
from ledger import selectors as ledger_selectors
from ledger.chain import occurred_at_text
from ledger.receipts import NO_PLAN_REASON_WORDS, Receipt, receipt_build, receipt_export
from ledger.signing import ledger_policy_stated
from ledger.witnesses import (
    WitnessClaim,
    WitnessRefused,
    ledger_witness_record,
    signature_decode,
)
from rooms import selectors
from rooms.errors import NotFound
from rooms.models import Agent, DeletionReason, RoomDeletion, RoomMember
from slips.models import VaultItem
from slips.selectors import keys_of_owner

router = Router(auth=django_auth, tags=["ledger"])


class CheckpointOut(Schema):
    seq: int
    hash: str


class LedgerEventOut(Schema):
    seq: int
    kind: str
    occurred_at: str
    data: dict[str, Any]
    prev_hash: str
    hash: str
    words: str  # not hashed: the server's sentence for ``data``


class SignedHeadOut(Schema):
    seq: int
    hash: str
    signed_at: str
    public_key: str
    signature: str


class LedgerPolicyOut(Schema):
    retention_days: int
    head_every_events: int
    head_grace_seconds: int
    head_every_seconds: int


class WitnessOut(Schema):
    seq: int
    hash: str
    signed_at: str
    owner_id: str
    key_id: str
    public_key: str
    signature: str
    witnessed_at: str  # when the server stored it (chain time form); not signed
    by_you: bool  # not signed: whether the reader made it
    owner_name: str  # not signed: the owner's name in this room


class WitnessIn(Schema):
    """The head the browser verified and its device key's signature over
    ``ledger.chain.witness_signed_bytes`` (owner id: the signed-in owner's)."""

    seq: int = Field(ge=1, le=2**53 - 1)
    hash: str = Field(pattern=r"^[0-9a-f]{64}$")
    signed_at: str = Field(max_length=32)
    key_id: UUID
    signature: str = Field(max_length=128)


class WitnessErrorOut(Schema):
    code: str
    message: str


class LedgerPageOut(Schema):
    room_id: UUID
    head: CheckpointOut
    checkpoint: CheckpointOut
    events: list[LedgerEventOut]
    next_after: int | None  # pass as ``after`` for the next page; None on the last
    signed_heads: list[SignedHeadOut]
    witnesses: list[WitnessOut]  # owners' countersignatures: checkpoints history must extend
    viewer_owner_id: str  # who reads: the owner id a witness by this reader signs
    # The server's clock (chain form): the browser judges an unsigned tail's age by the
    # earlier of this and its own clock, so a clock running fast raises no false alarm.
    as_of: str
    policy: LedgerPolicyOut  # what the chain is held to: heads required, retention window
    deleted: DeletedRoomOut | None = None  # the room was deleted for both sides


class DeletedRoomOut(Schema):
    """The room was deleted for both sides; its ledger is all that is left of it."""

    deleted_at: str  # chain time form
    by_you: bool
    words: str


class ReceiptOut(Receipt):
    words: list[str]  # the receipt as a person reads it; the fields above are for machines
    deleted: DeletedRoomOut | None = None  # the room was deleted for both sides


def _room_id(request: HttpRequest, room_id: UUID) -> UUID:
    return _ledger_room(request, room_id).room_id


@dataclass(frozen=True)
class LedgerRoom:
    """The room whose ledger a request reads: a room it holds a seat in, or a deleted room
    it held one in (``deletion``)."""

    room_id: UUID
    deletion: RoomDeletion | None = None


def _ledger_room(request: HttpRequest, room_id: UUID) -> LedgerRoom:
    # django_auth has already refused anonymous requests.
    assert isinstance(request.user, User)
    try:
        seated: UUID | None = selectors.room_seat(owner=request.user, room_id=room_id).room_id
    except NotFound:
        seated = None
    # A room with a seat in it is not deleted: its deletion record is read only without one.
    deletion = None if seated is not None else RoomDeletion.objects.filter(room_id=room_id).first()
    access = ledger_access(
        reader=request.user,
        holds_seat=seated is not None,
        deleted_owners=None if deletion is None else deletion.owners,
    )
    if access is LedgerAccess.SEATED and seated is not None:
        return LedgerRoom(seated)
    if access is LedgerAccess.FORMER_OWNER and deletion is not None:
        return LedgerRoom(deletion.room_id, deletion)
    raise NotFound("No such room.")  # the same answer as for a room that never existed


def _deletion_for_former_owner(*, owner: User, room_id: UUID) -> RoomDeletion | None:
    """The deletion record of the room if the Gatekeeper lets ``owner``, who holds no seat in
    it, read its ledger as a former owner; else None (read now, for this request)."""
    record = RoomDeletion.objects.filter(room_id=room_id).first()
    if record is None:
        return None
    access = ledger_access(reader=owner, holds_seat=False, deleted_owners=record.owners)
    return record if access is LedgerAccess.FORMER_OWNER else None


# --- a deleted room, in words ------------------------------------------------------------------


def _when(moment: datetime) -> str:
    """ "Tuesday 1 December 2026 at 19:08 (Europe/Berlin)": in the reader's time zone."""
    local = timezone.localtime(moment)
    zone = timezone.get_current_timezone_name()
    return f"{local:%A} {local.day} {local:%B %Y} at {local:%H:%M} ({zone})"


def _deleted_owners(deletion: RoomDeletion) -> dict[str, User]:
    """The deleted room's owners whose accounts still exist (the same accounts: id and the
    moment they joined, ``gatekeeper.ledger_access.is_same_account``), by id as the ledger
    writes it."""
    seats = [
        s for s in deletion.owners if isinstance(s, dict) and isinstance(s.get("user_id"), int)
    ]
    users = User.objects.filter(pk__in={s["user_id"] for s in seats})
    return {str(u.pk): u for u in users if any(is_same_account(s, u) for s in seats)}


def deleted_room_words(*, deletion: RoomDeletion, viewer: User) -> DeletedRoomOut:
    """What the page says of a deleted room: who deleted it, when, and what its ledger is."""
    by = _deleted_owners(deletion).get(str(deletion.deleted_by_id))
    by_you = deletion.deleted_by_id == viewer.pk
    who = "you" if by_you else (selectors.owner_name(by) if by is not None else "the other owner")
    how = (
        f"when {'you' if by_you else who} deleted {'your' if by_you else 'their'} account"
        if deletion.reason == DeletionReason.ACCOUNT_DELETED
        else f"by {who}"
    )
    words = (
        f"This room was deleted for both sides {how} on {_when(deletion.deleted_at)}. Its "
        "messages, whispers, documents, plan and notes went with it. Its ledger stays: only "
        "what the server decided, without any content, each event for its own retention "
        "window, and you can still check it."
    )
    return DeletedRoomOut(
        deleted_at=occurred_at_text(deletion.deleted_at), by_you=by_you, words=words
    )


@dataclass(frozen=True)
class DeletedRoomLedger:
    """What the ledger page of a deleted room shows around the checker (no content)."""

    room_id: UUID
    words: str


def deleted_room_for_owner(*, owner: User, room_id: UUID) -> DeletedRoomLedger | None:
    """For the ledger page: a deleted room ``owner`` held a seat in, in words; else None (the
    page's 404, as for any room that is not theirs)."""
    deletion = _deletion_for_former_owner(owner=owner, room_id=room_id)
    if deletion is None:
        return None
    return DeletedRoomLedger(
        room_id=deletion.room_id, words=deleted_room_words(deletion=deletion, viewer=owner).words
    )


# --- names for the ids in events ----------------------------------------------------------------


def _strings(value: object) -> Iterator[str]:
    """Every string (and integer, as owner ids may be) inside an event's data."""
    if isinstance(value, Mapping):
        for inner in value.values():
            yield from _strings(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _strings(inner)
    elif isinstance(value, str | int) and not isinstance(value, bool):
        yield str(value)


def _uuids(values: Iterable[str]) -> list[UUID]:
    found = []
    for value in values:
        try:
            found.append(UUID(value))
        except ValueError:
            continue
    return found


def _action_words(record: ActionRecord, setting: selectors.DinnerSetting) -> str:
    """ "book a table at Osteria Kanal": what the action does and, for a venue in the room's
    catalogue, where (an id the catalogue does not know is left out)."""
    words = tool_words(record.tool)
    venue_id = record.arguments.get("venue_id") if isinstance(record.arguments, dict) else None
    if isinstance(venue_id, str) and setting.catalogue is not None:
        venue = setting.catalogue.venue(venue_id)
        if venue is not None:
            words += f" at {venue.name}"
    return words


@dataclass(frozen=True)
class LedgerNames:
    """What a person calls the ids in a room's events (``names``), and whose each agent is
    (``agent_owners``: agent id -> owner's name)."""

    names: dict[str, str] = field(default_factory=dict)
    agent_owners: dict[str, str] = field(default_factory=dict)


def ledger_names(*, room_id: UUID, data: Iterable[object]) -> LedgerNames:
    """Names for the ids in these events' ``data``: the room's owners ("Alice"), their agents
    ("Alice's agent"), vault items disclosed ("Alice's budget"), shared artifacts ("a document
    Alice's agent published") and actions asked for ("book a table at Osteria Kanal"). Only
    the room's own seats are named: an id naming anyone else stays unnamed (the sentence then
    says "an owner")."""
    seats = list(RoomMember.objects.filter(room_id=room_id).select_related("owner", "room"))
    if seats:
        owners = {str(seat.owner_id): selectors.owner_name(seat.owner) for seat in seats}
    else:
        # A deleted room: its owners as its deletion record names them (accounts that still
        # exist); its actions and documents went with it, so only people and agents are named.
        deletion = RoomDeletion.objects.filter(room_id=room_id).first()
        if deletion is None:
            return LedgerNames()
        owners = {pk: selectors.owner_name(user) for pk, user in _deleted_owners(deletion).items()}
        if not owners:
            return LedgerNames()
    names: dict[str, str] = dict(owners)
    agent_owners: dict[str, str] = {}
    ids = _uuids({s for d in data for s in _strings(d)})
    seated = [int(pk) for pk in owners]
    for agent_id, owner_id in Agent.objects.filter(id__in=ids, owner_id__in=seated).values_list(
        "id", "owner_id"
    ):
        names[str(agent_id)] = f"{owners[str(owner_id)]}'s agent"
        agent_owners[str(agent_id)] = owners[str(owner_id)]
    for item_id, kind, owner_id in VaultItem.objects.filter(
        id__in=ids, owner_id__in=seated
    ).values_list("id", "kind", "owner_id"):
        names[str(item_id)] = f"{owners[str(owner_id)]}'s {vault_kind_words(kind)}"
    # A shared artifact's disclosure names it by who published it: the ledger holds no
    # content, so never its title (imported here: artifacts sits above rooms).
    from artifacts.selectors import artifact_publishers

    for artifact_id, owner_id in artifact_publishers(room_id=room_id, ids=ids).items():
        if str(owner_id) in owners:
            names[artifact_id] = f"a document {owners[str(owner_id)]}'s agent published"
    records = list(ActionRecord.objects.filter(id__in=ids, room_id=room_id)) if seats else []
    if records:
        setting = selectors.room_dinner_setting(room=seats[0].room)
        for record in records:
            names[str(record.id)] = _action_words(record, setting)
    return LedgerNames(names, agent_owners)


def events_with_words(*, room_id: UUID, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events unchanged, each with its ``words`` added beside the hashed fields."""
    known = ledger_names(room_id=room_id, data=[e["data"] for e in events])
    return [
        {
            **e,
            "words": event_sentence(
                e["kind"], e["data"], known.names, agent_owners=known.agent_owners
            ),
        }
        for e in events
    ]


# --- the receipt in words ----------------------------------------------------------------------


def _plural(n: int, one: str, many: str | None = None) -> str:
    if n == 0:
        return f"no {many or one + 's'}"
    return f"{n} {one}" if n == 1 else f"{n} {many or one + 's'}"


def _times(n: int) -> str:
    return "once" if n == 1 else "twice" if n == 2 else f"{n} times"


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def receipt_words(receipt: Receipt, names: Mapping[str, str]) -> list[str]:
    """The receipt as sentences: who took part, what was granted, disclosed, approved and
    refused (each refusal's rule in words), flares, the outcome. Never an id."""

    def name(value: str, fallback: str) -> str:
        return names.get(value, fallback)

    lines = [
        f"The server's own check: intact, {_plural(receipt.events, 'event')}."
        if receipt.verified
        else f"The server's own check: broken at event #{receipt.first_bad_seq}."
    ]
    people = [
        name(p.participant_id, "an owner" if p.participant_kind == "owner" else "an agent")
        for p in receipt.participants
    ]
    if people:
        lines.append(f"Took part: {_listed(people)}.")
    lines.append(
        f"Permission slips signed: {len(receipt.slips_signed)}. Permissions given (slip items "
        f"and approved grants): {receipt.permissions_granted}, used "
        f"{_times(receipt.permissions_used) if receipt.permissions_used else 'not at all'}."
    )
    for reason, count in sorted(receipt.slips_rejected.items()):
        sentence = rule_sentence(reason, owner="the owner")
        lines.append(f"A permission slip was refused {_times(count)}: {sentence}")
    for item in receipt.disclosures_by_item:
        what = name(item.item_id, f"one of {name(item.owner_id, 'an owner')}'s vault items")
        # By name, not by who had it first: the same receipt reads the same every time.
        to = _listed(sorted(name(r, "an agent") for r in item.recipients))
        if len(item.recipients) < 2:
            how = f"{_times(item.times)} to {to}"
        elif item.times == len(item.recipients):  # each had it at least once
            how = f"to {to}, once each"
        else:  # "twice to A and B" would not say whether each had it twice
            how = f"{_times(item.times)} in all, to {to}"
        turns = _listed([str(t) for t in sorted(set(item.turns))])
        # The item last: its name may be singular or plural ("budget", "allergies").
        lines.append(
            f"Disclosed {how} (turn{'s' if len(set(item.turns)) > 1 else ''} {turns}): {what}."
        )
    if not receipt.disclosures_by_item:
        lines.append("Nothing from anyone's vault was disclosed.")
    g = receipt.grants
    lines.append(
        f"Grants: {_plural(g.get('requested', 0), 'request')}, "
        f"{g.get('approved', 0)} approved, {g.get('denied', 0)} refused, "
        f"{g.get('expired', 0)} expired."
    )
    a = receipt.actions
    lines.append(
        f"Actions: {_plural(a.get('requested', 0), 'request')}, "
        f"{a.get('executed', 0)} carried out, {a.get('failed', 0)} failed."
    )
    for rule, count in receipt.denials_by_rule.items():
        lines.append(f"Refused {_times(count)}: {rule_sentence(rule, owner='the owner')}")
    if not receipt.denials_by_rule:
        lines.append("Nothing was refused.")
    for flare in receipt.flares:
        sentence = event_sentence(
            "flare_raised", {"agent_id": flare.agent_id, "reason": flare.rule}, names
        )
        lines.append(f"{sentence.removesuffix(' The room paused for its owner.')} (#{flare.seq})")
    for flagged in receipt.injections_suspected:
        who = name(flagged.agent_id, "an agent")
        # The ledger event's number, as a flare's: the message or document it names is
        # room content, read on the room's page.
        document = name(flagged.artifact_id or "", f"a document {who} published")
        what = (
            f"A message from {who}"
            if flagged.artifact_id is None
            else document[:1].upper() + document[1:]
        )
        lines.append(f"{what} was flagged (#{flagged.seq}): {rule_sentence(flagged.rule)}")
    if receipt.pauses:
        lines.append(f"The room paused {_times(receipt.pauses)}.")
    if receipt.demo_key_signatures:
        lines.append(
            f"{_plural(receipt.demo_key_signatures, 'signature')} (slips or approvals) were made "
            "with a practice key the server holds, not an owner's own device."
        )
    outcome = receipt.outcome
    if outcome is not None and outcome.outcome == "agreed":
        lines.append(f"Outcome: agreed; a table was booked (event #{outcome.seq}).")
    elif outcome is not None:
        said = [
            f"{name(owner_id, 'an owner')}'s agent: "
            f"{NO_PLAN_REASON_WORDS.get(code, 'no reason given').lower()}"
            for owner_id, code in outcome.reasons.items()
        ]
        lines.append("Outcome: no agreement" + (f" ({'; '.join(said)})." if said else "."))
    if receipt.checkpoint_seq:
        lines.append(
            f"Events up to #{receipt.checkpoint_seq} were purged under the retention window."
        )
    if receipt.unreadable_events:
        lines.append(f"{_plural(receipt.unreadable_events, 'event')} could not be read.")
    return lines


def receipt_with_words(*, room_id: UUID, deleted: DeletedRoomOut | None = None) -> ReceiptOut:
    """The receipt with its sentences; a deleted room's (``deleted``) begins by saying so."""
    receipt = receipt_build(room_id=room_id)
    ids: list[object] = [p.participant_id for p in receipt.participants]
    ids += [i.item_id for i in receipt.disclosures_by_item]
    ids += [f.agent_id for f in receipt.flares + receipt.injections_suspected]
    ids += [f.artifact_id for f in receipt.injections_suspected if f.artifact_id is not None]
    ids += [r for i in receipt.disclosures_by_item for r in i.recipients]
    names = ledger_names(room_id=room_id, data=ids).names
    words = receipt_words(receipt, names)
    if deleted is not None:
        words = [deleted.words, *words]
    return ReceiptOut(**receipt.model_dump(), words=words, deleted=deleted)


@router.get("/rooms/{room_id}/ledger", response=LedgerPageOut)
def room_ledger(
    request: HttpRequest, room_id: UUID, after: int = 0, limit: int = 500
) -> dict[str, Any]:
    """A page of the room's ledger events (``seq > after``), with head, checkpoint and the
    server-signed heads. Recompute the hashes yourself: that is the point."""
    room = _ledger_room(request, room_id)
    rid = room.room_id
    limit = min(max(limit, 1), ledger_selectors.PAGE_LIMIT)
    head = ledger_selectors.ledger_head(room_id=rid)
    events = ledger_selectors.ledger_events(room_id=rid, after_seq=max(after, 0), limit=limit)
    events = events_with_words(room_id=rid, events=events)
    return {
        "room_id": rid,
        "head": {"seq": head["seq"], "hash": head["hash"]},
        "checkpoint": head["checkpoint"],
        "events": events,
        "next_after": events[-1]["seq"] if len(events) == limit else None,
        "signed_heads": ledger_selectors.ledger_signed_heads(room_id=rid),
        "witnesses": _witnesses_out(request, rid),
        "viewer_owner_id": _viewer_id(request),
        "as_of": occurred_at_text(timezone.now()),
        "policy": ledger_policy_stated(),
        "deleted": _deleted_out(request, room),
    }


def _deleted_out(request: HttpRequest, room: LedgerRoom) -> DeletedRoomOut | None:
    assert isinstance(request.user, User)  # django_auth
    if room.deletion is None:
        return None
    return deleted_room_words(deletion=room.deletion, viewer=request.user)


def _viewer_id(request: HttpRequest) -> str:
    assert isinstance(request.user, User)  # django_auth
    return str(request.user.pk)


def _witnesses_out(request: HttpRequest, room_id: UUID) -> list[dict[str, Any]]:
    me = _viewer_id(request)
    names = ledger_names(room_id=room_id, data=[]).names
    return [
        {**w, "by_you": w["owner_id"] == me, "owner_name": names.get(w["owner_id"], "an owner")}
        for w in ledger_selectors.ledger_witnesses_out(room_id=room_id)
    ]


@router.post(
    "/rooms/{room_id}/ledger/witnesses",
    response={200: WitnessOut, 201: WitnessOut, 400: WitnessErrorOut},
)
def room_ledger_witness(
    request: HttpRequest, room_id: UUID, payload: WitnessIn
) -> Status[WitnessOut] | Status[WitnessErrorOut]:
    """Countersign a signed head of this room with one of your device keys (the one your
    browser holds): 201 stored, 200 already stored (a replay), 400 refused with a code.
    Only a key of yours that is registered, not revoked, not rotated away and held by your
    device (not a practice key the server holds) may witness: the point is a signature the
    server's database cannot make."""
    rid = _room_id(request, room_id)
    assert isinstance(request.user, User)
    key = keys_of_owner(owner=request.user).filter(id=payload.key_id).first()
    try:
        if key is None or not witness_key_usable(key=key, reader=request.user):
            raise WitnessRefused(
                "witness_key_unusable",
                "That is not a device key of yours that can sign: enroll one on this device.",
            )
        witness, created = ledger_witness_record(
            room_id=rid,
            owner_id=_viewer_id(request),
            key_id=str(key.id),
            public_key=bytes(key.public_key),
            claim=WitnessClaim(
                seq=payload.seq,
                hash=payload.hash,
                signed_at=payload.signed_at,
                signature=signature_decode(payload.signature),
            ),
        )
    except WitnessRefused as refused:
        return Status(400, WitnessErrorOut(code=refused.code, message=refused.message))
    out = next(
        w
        for w in _witnesses_out(request, rid)
        if (w["key_id"], w["seq"]) == (witness.key_id, witness.seq)
    )
    return Status(201 if created else 200, WitnessOut(**out))


@router.get("/rooms/{room_id}/receipt", response=ReceiptOut)
def room_receipt(request: HttpRequest, room_id: UUID) -> ReceiptOut:
    """The room's receipt: who joined, what was granted, disclosed, approved, denied, flagged;
    ``words`` says it in sentences."""
    room = _ledger_room(request, room_id)
    return receipt_with_words(room_id=room.room_id, deleted=_deleted_out(request, room))


@router.get("/rooms/{room_id}/receipt/export")
def room_receipt_export(request: HttpRequest, room_id: UUID) -> JsonResponse:
    """The receipt with the full chain, for ``python -m ledger.verify_export``."""
    rid = _room_id(request, room_id)
    response = JsonResponse(receipt_export(rid))
    # Named by the day, in the owner's zone, as the project package is: never the room's id.
    day = f"{timezone.localtime():%Y-%m-%d}"
    response["Content-Disposition"] = f'attachment; filename="synapsia-ledger-{day}.json"'
    return response

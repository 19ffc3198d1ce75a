"""Ledger storage: events, one head row per room, and signed heads.

Rooms are referenced by UUID value only (no foreign key): the ledger is the floor of the
house and outlives the rooms' content. Only ``ledger.services.ledger_append`` inserts events,
only ``ledger.retention`` deletes them; nothing updates them.

An event's ``canonical`` bytes are what its ``hash`` is the SHA-256 of, stored at append so
verification hashes them instead of re-canonicalising; the columns beside them stay for
queries and are checked against those bytes (``ledger.chain.stored_chain_check``).
"""

from __future__ import annotations

from django.db import models

from ledger.chain import GENESIS_HASH, CanonicalJSONEncoder


class LedgerEvent(models.Model):
    id = models.BigAutoField(primary_key=True)
    room_id = models.UUIDField()
    seq = models.PositiveBigIntegerField()
    kind = models.CharField(max_length=40)
    occurred_at = models.DateTimeField()
    # Metadata only (the typed record minus ``kind``); see ledger.events. Written as RFC 8785
    # text, the same bytes as the envelope's ``data`` member.
    data = models.JSONField(encoder=CanonicalJSONEncoder)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)
    # The RFC 8785 envelope exactly as hashed (ledger.chain): hash = SHA-256(canonical).
    canonical = models.BinaryField(default=b"")

    class Meta:
        constraints = [
            # The chain cannot fork: one event per number per room, even if a lock is missed.
            models.UniqueConstraint(fields=["room_id", "seq"], name="ledger_event_room_seq")
        ]
        indexes = [models.Index(fields=["occurred_at"], name="ledger_event_occurred")]

    def __str__(self) -> str:
        return f"{self.room_id}#{self.seq} {self.kind}"


class LedgerHead(models.Model):
    """The tip of a room's chain (locked for every append) and its retention checkpoint."""

    room_id = models.UUIDField(primary_key=True)
    seq = models.PositiveBigIntegerField(default=0)
    hash = models.CharField(max_length=64, default=GENESIS_HASH)
    # Events up to checkpoint_seq were purged; checkpoint_hash was the hash of the last one.
    checkpoint_seq = models.PositiveBigIntegerField(default=0)
    checkpoint_hash = models.CharField(max_length=64, default=GENESIS_HASH)

    def __str__(self) -> str:
        return f"{self.room_id}@{self.seq}"


class SignedHead(models.Model):
    """A server signature over a room's (seq, hash) at a moment: pins history against
    truncation or rewriting by whoever holds the database but not the signing key."""

    id = models.BigAutoField(primary_key=True)
    room_id = models.UUIDField(db_index=True)
    seq = models.PositiveBigIntegerField()
    hash = models.CharField(max_length=64)
    signed_at = models.CharField(max_length=32)  # chain timestamp form, exactly as signed
    public_key = models.CharField(max_length=64)  # base64 Ed25519 public key
    signature = models.CharField(max_length=128)  # base64 Ed25519 signature

    def __str__(self) -> str:
        return f"{self.room_id}@{self.seq} signed {self.signed_at}"


class HeadWitness(models.Model):
    """An owner's countersignature of a signed head their browser verified, made with their
    device key (the private half never leaves that device). A witness pins history outside
    the database: whoever rewrites at or below it, even re-signing with the server key, cannot
    make a signature by the owner's key over the new hash. Never updated, never purged."""

    id = models.BigAutoField(primary_key=True)
    room_id = models.UUIDField()  # looked up by the (room, key, seq) constraint's index
    seq = models.PositiveBigIntegerField()
    hash = models.CharField(max_length=64)
    signed_at = models.CharField(max_length=32)  # the server head's time, as both signed it
    owner_id = models.CharField(max_length=64)  # the owner's id, as signed
    key_id = models.CharField(max_length=64)  # the device key's id, as signed
    public_key = models.CharField(max_length=64)  # base64 Ed25519 public key that signed
    signature = models.CharField(max_length=128)  # base64 Ed25519 signature
    witnessed_at = models.DateTimeField()  # when the server stored it (not signed)

    class Meta:
        constraints = [
            # A key countersigns a given head once: a replayed witness stores nothing new.
            models.UniqueConstraint(
                fields=["room_id", "key_id", "seq"], name="ledger_witness_room_key_seq"
            )
        ]

    def __str__(self) -> str:
        return f"{self.room_id}@{self.seq} witnessed by key {self.key_id}"

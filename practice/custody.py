"""The demo owners' server-held signing keys (DEMO ONLY).

Everywhere else an owner's private key is made in their browser and never leaves it. The
practice room runs headless, so the server makes one Ed25519 key per demo owner, enrolls it
through the ordinary challenge and proof of possession (``slips.services.key_enroll``), marks
it ``custody=demo_seeding`` and keeps its 32-byte seed sealed under the vault key, bound to the
owner and key id. Every slip and approval such a key signs carries ``key_custody:
"demo_seeding"`` in the room's ledger, so both owners can see it was not signed on a device.

A seed that does not open is never silently replaced: the operator replaces the keys on purpose
(``manage.py demo --replace-demo-keys``, ``demo_keys_revoke``), and the revocation is in the
ledger like any owner's.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from nacl.exceptions import CryptoError
from nacl.signing import SigningKey

from practice.errors import DemoKeyUnavailable
from practice.models import PracticeOwner
from rooms.selectors import owner_name
from slips.canonical import KEY_PROOF_TAG, signed_bytes
from slips.errors import SlipError
from slips.models import DeviceKey, KeyChallengePurpose, KeyCustody
from slips.payload import key_proof_payload
from slips.services import key_challenge_issue, key_enroll, key_revoke
from slips.signatures import b64url_encode
from slips.vault import vault_secret_open, vault_secret_seal

DEMO_KEY_LABEL = "Practice demo key (held by the server)"
# What the operator runs to replace a demo key that cannot be used (the demo command's flag).
REPLACE_COMMAND = "python manage.py demo --replace-demo-keys"


@dataclass(frozen=True)
class DemoSigner:
    """A demo owner's enrolled key and its private half, opened for one use."""

    key: DeviceKey
    signing_key: SigningKey

    def sign(self, message: bytes) -> str:
        """The unpadded base64url Ed25519 signature of ``message`` (the browser's format)."""
        return b64url_encode(self.signing_key.sign(message).signature)


def _binding(practice_owner: PracticeOwner, key: DeviceKey) -> str:
    # Bound to owner and key: a seed copied to another owner's row or key does not open.
    return f"demo-device-key|{practice_owner.owner_id}|{key.id}"


def _usable(key: DeviceKey | None) -> bool:
    return key is not None and key.revoked_at is None and key.retired_at is None


def demo_key_enroll(practice_owner: PracticeOwner) -> DeviceKey:
    """Make a fresh key, enroll it as a browser would (challenge + proof of possession), and
    keep its seed sealed on ``practice_owner``. Call inside the caller's transaction."""
    owner = practice_owner.owner
    signing_key = SigningKey.generate()
    public_key = b64url_encode(bytes(signing_key.verify_key))
    challenge = key_challenge_issue(owner=owner, purpose=KeyChallengePurpose.ENROLL)
    proof = signing_key.sign(
        signed_bytes(
            tag=KEY_PROOF_TAG,
            payload=key_proof_payload(
                challenge=challenge.value,
                label=DEMO_KEY_LABEL,
                owner_id=str(owner.pk),
                public_key=public_key,
                purpose=KeyChallengePurpose.ENROLL.value,
            ),
        )
    ).signature
    key = key_enroll(
        owner=owner,
        challenge=challenge.value,
        public_key=public_key,
        label=DEMO_KEY_LABEL,
        proof=b64url_encode(proof),
        custody=KeyCustody.DEMO_SEEDING,
    )
    practice_owner.device_key = key
    practice_owner.signing_seed_sealed = vault_secret_seal(
        binding=_binding(practice_owner, key), secret=bytes(signing_key)
    )
    practice_owner.save(update_fields=["device_key", "signing_seed_sealed"])
    return key


def demo_key_ensure(practice_owner: PracticeOwner) -> DemoSigner:
    """The demo owner's usable key, enrolled once and reused; a new one only if the stored
    key was revoked or retired (or never made). A stored key whose seed does not open fails
    closed (``DemoKeyUnavailable``) rather than being silently replaced."""
    if not _usable(practice_owner.device_key):
        demo_key_enroll(practice_owner)
    return demo_signer(practice_owner)


def _whose(practice_owner: PracticeOwner) -> str:
    """ "Alice (demo-alice)": the name the pages use and the account's username."""
    owner = practice_owner.owner
    return f"{owner_name(owner)} ({owner.get_username()})"


def demo_signer(practice_owner: PracticeOwner) -> DemoSigner:
    """Open the demo owner's sealed seed and check it is the enrolled, usable key's.

    Raises ``DemoKeyUnavailable`` (signing nothing) when there is no usable key, the sealed
    seed was altered or moved, the vault key changed, or the seed is another key's. Its
    message is for the operator running the demo: whose key, and what to run.
    """
    key = practice_owner.device_key
    whose = _whose(practice_owner)
    if key is None or not _usable(key):
        raise DemoKeyUnavailable(
            f"{whose} has no usable demo key (it was revoked or retired); nothing was signed. "
            "Run the demo again: seeding enrolls a new one."
        )
    try:
        seed = vault_secret_open(
            binding=_binding(practice_owner, key), sealed=bytes(practice_owner.signing_seed_sealed)
        )
        signing_key = SigningKey(seed)
    except (SlipError, CryptoError, ValueError, TypeError):
        raise DemoKeyUnavailable(
            f"The demo key the server holds for {whose} does not open: it was altered, or the "
            "server's master key changed since it was made (an old master key listed in "
            "SYNAPSIA_MASTER_KEYS_RETIRED still opens it). Nothing was signed. To go on, run "
            f"`{REPLACE_COMMAND}`: it revokes the demo keys (the rooms' ledgers record it) and "
            "enrolls new ones."
        ) from None
    if bytes(signing_key.verify_key) != bytes(key.public_key):
        raise DemoKeyUnavailable(
            f"The demo key the server holds for {whose} is not the key enrolled for them, so "
            f"nothing was signed. To go on, run `{REPLACE_COMMAND}`: it revokes the demo keys "
            "(the rooms' ledgers record it) and enrolls new ones."
        )
    return DemoSigner(key=key, signing_key=signing_key)


@transaction.atomic
def demo_keys_revoke() -> list[str]:
    """Revoke every demo owner's server-held key that is not revoked yet (DEMO ONLY), through
    ``slips.services.key_revoke`` as an owner's own revocation goes (recorded in their rooms'
    ledgers; slips it signed stop clearing anything). The next seeding enrolls new keys.
    Returns whose keys were revoked ("Alice (demo-alice)")."""
    revoked = []
    demo_owners = PracticeOwner.objects.select_related("owner", "device_key")
    for practice_owner in demo_owners.order_by("owner__username"):
        key = practice_owner.device_key
        if key is not None and key.revoked_at is None:
            key_revoke(owner=practice_owner.owner, key_id=key.id)
            revoked.append(_whose(practice_owner))
    return revoked

"""In headless Chromium: enroll a WebCrypto key, fill the vault, sign a slip Python verifies;
JS and Python canonical bytes agree on tricky inputs."""

from __future__ import annotations

import pytest
import rfc8785
from django.utils import timezone

from slips.canonical import SLIP_TAG
from slips.models import DeviceKey, Slip, VaultItem
from slips.signatures import signature_valid
from slips.verification import capability_verdict

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

TRICKY = [
    {"b": 1, "a": 2, "": 3, "A": 4, "é": 5, "\ufb01": 6, "\U0001f600": 7, "\u20ac": 8},
    {"s": '\u2028\u2029\x00\x1f\x7f"\\/\b\f\n\r\t'},
    {"n": [0, -1, 2**53 - 1, -(2**53 - 1), 10**15]},
    {"nested": {"z": [True, False, None, [], {}], "y": "日本語 🍣 ñ"}},
    {"\U0001f600a": 1, "\U0001f600": 2, "\ue000": 3},
]


def log_in(page, base: str, username: str) -> None:
    page.goto(f"{base}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "correct horse 42")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


@pytest.fixture
def opened(live_daphne, make_open_room):
    """Made before the browser starts: Playwright's loop would refuse rooms' sync realtime."""
    return make_open_room()


def test_browser_enrolls_fills_the_vault_and_signs_a_slip(
    live_daphne, opened, browser_page
) -> None:
    page, base = browser_page, live_daphne
    log_in(page, base, "alice")

    page.goto(f"{base}/keys/")
    page.fill("#key-label", "Test Chromium")
    page.click("text=Enroll this device")
    page.wait_for_selector("#device-keys li:has-text('active')")
    key = DeviceKey.objects.get()
    assert key.label == "Test Chromium" and len(bytes(key.public_key)) == 32
    exported = page.evaluate(
        """async () => {
          const [k] = await SynapsiaKeys.localKeys();
          let refused = false;
          try { await crypto.subtle.exportKey("pkcs8", k.privateKey); }
          catch (e) { refused = true; }
          return {extractable: k.privateKey.extractable, refused, id: k.id};
        }"""
    )
    assert exported == {"extractable": False, "refused": True, "id": str(key.id)}

    page.goto(f"{base}/vault/")
    page.select_option("#id_neighbourhood-name", "Kreuzberg")
    page.click("text=Save home neighbourhood")
    page.wait_for_selector("#vault-items li:has-text('Kreuzberg')")
    assert VaultItem.objects.filter(owner=opened.a.owner, kind="neighbourhood").count() == 1

    page.goto(f"{base}/rooms/{opened.room.id}/slip/")
    page.wait_for_selector("#slip-items li[data-resource=neighbourhood]")
    # Only what the vault holds is offered, one sentence per row, every box unchecked.
    boxes = page.locator("#slip-items [name=share]")
    assert boxes.count() == 2
    assert not any(boxes.nth(i).is_checked() for i in range(boxes.count()))
    assert page.locator(
        "#slip-items li[data-resource=neighbourhood] .slip-sentence"
    ).all_inner_texts() == [
        "Let my agent know the name of my home neighbourhood.",
        "Let the other agent see the name of my home neighbourhood.",
    ]
    assert "Add your budget to your vault first" in page.inner_text("#slip-missing")
    page.check("#share-neighbourhood-own")
    page.click("text=Sign slip")
    page.wait_for_selector(
        "#slip-in-force-items:has-text('Let my agent know the name of my home neighbourhood')"
    )

    slip = Slip.objects.get()
    assert slip.key_id == key.id and slip.agent_id == opened.a.agent.id
    assert signature_valid(
        public_key=bytes(key.public_key),
        message=SLIP_TAG + bytes(slip.payload),
        signature=bytes(slip.signature),
    )
    verdict = capability_verdict(
        room_id=opened.room.id,
        owner_id=opened.a.owner.pk,
        agent_id=opened.a.agent.id,
        resource="neighbourhood",
        operation="read",
        recipient="own_agent",
        now=timezone.now(),
    )
    assert verdict.allowed and verdict.capability.scope == "name"
    assert not capability_verdict(
        room_id=opened.room.id,
        owner_id=opened.a.owner.pk,
        agent_id=opened.a.agent.id,
        resource="budget",
        operation="read",
        recipient="own_agent",
        now=timezone.now(),
    ).allowed

    # Revoking from the page stops the slip at once.
    page.goto(f"{base}/keys/")
    page.click("#device-keys li button:has-text('Revoke')")
    page.wait_for_selector("#device-keys li:has-text('revoked')")
    assert (
        capability_verdict(
            room_id=opened.room.id,
            owner_id=opened.a.owner.pk,
            agent_id=opened.a.agent.id,
            resource="neighbourhood",
            operation="read",
            recipient="own_agent",
            now=timezone.now(),
        ).rule
        == "key_revoked"
    )


def test_js_and_python_canonical_bytes_agree(live_daphne, opened, browser_page) -> None:
    page, base = browser_page, live_daphne
    log_in(page, base, "alice")
    page.goto(f"{base}/keys/")
    page.wait_for_function("() => window.SynapsiaKeys !== undefined")
    js = page.evaluate("(xs) => xs.map((x) => SynapsiaKeys.canonicalize(x))", TRICKY)
    assert js == [rfc8785.dumps(x).decode() for x in TRICKY]
    refusals = page.evaluate(
        """() => [1.5, 2 ** 53, NaN, "e\\u0301", "\\ud800"].map((x) => {
            try { SynapsiaKeys.canonicalize({x}); return "accepted"; }
            catch (e) { return "refused"; }
        })"""
    )
    assert refusals == ["refused"] * 5

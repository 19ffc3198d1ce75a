"""The slip and keys pages through the Django test client: a checklist of sentences for what
the owner has, the slip in force and what changed, the tier and conflicts in words, and no
code, id or raw JSON anywhere a person reads."""

from __future__ import annotations

import itertools
import re
import time
from html import unescape
from typing import Any

import pytest

from frontend.slip_views import tier_limits
from slips import services as slip_services
from slips.capabilities import TIER_ORDER, Capability, capability_under_tier
from slips.vault import vault_item_create
from tests.frontend.browser import codes_in
from tests.slips.conftest import canonical_text, enroll, slip_payload

pytestmark = pytest.mark.django_db


def _text(response: Any) -> str:
    """The page as a person reads it: scripts and data blocks dropped, tags dropped."""
    html = response.content.decode()
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    html = re.sub(r"<option\b[^>]*>", " ", html)
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def _fill_vault(owner: Any) -> None:
    vault_item_create(owner=owner, content={"kind": "budget", "currency": "EUR",
                                            "minimum": 3000, "maximum": 8000})  # fmt: skip
    vault_item_create(owner=owner, content={"kind": "allergies", "items": ["peanuts"]})


def _sign(seat: Any, room_id: Any, capabilities: list[dict[str, Any]], *, later: int = 0) -> None:
    key, device = enroll(seat.owner)
    text = canonical_text(
        slip_payload(
            owner=seat.owner,
            room_id=room_id,
            agent_id=seat.agent.id,
            key=key,
            capabilities=capabilities,
            issued_at=int(time.time()) + later,
        )
    )
    slip_services.slip_submit(
        owner=seat.owner,
        room_id=room_id,
        seated_agent_id=seat.agent.id,
        payload=text,
        signature=device.sign(text),
    )


def test_the_checklist_offers_only_what_the_owner_has_in_sentences(make_open_room, client):
    opened = make_open_room()
    _fill_vault(opened.a.owner)
    client.force_login(opened.a.owner)
    page = client.get(f"/rooms/{opened.room.id}/slip/")
    assert page.status_code == 200
    html = page.content.decode()
    text = _text(page)
    # One sentence per row, each unchecked; only the kinds in the vault.
    assert "Let my agent know my exact budget range per person." in text
    assert (
        "Let the other agent see a rough band of my budget per person (rounded out to 10 EUR)."
        in text
    )
    assert "Let the other agent see my allergies." in text
    assert set(re.findall(r'data-resource="([a-z_]+)"', html)) == {"budget", "allergies"}
    boxes = re.findall(r'<input type="checkbox" name="share"[^>]*>', html)
    assert len(boxes) == 4 + 5 and not any("checked" in b for b in boxes)  # + the actions
    # Actions that touch the owner's data or money, in words, unchecked (then each one asks).
    assert "Let my agent book tables at venues, within my budget." in text
    assert "Let my agent pay for things, within my budget." in text
    assert "an action still happens only if you approve it in the room, each time" in text
    # Kinds the owner lacks are named, with the way to add them.
    assert "Add your busy times to your vault first" in text
    assert 'href="/vault/#form-availability"' in html
    # Advanced options default to never withholding silently.
    assert re.search(r'<option value="none" selected>', html)
    assert 'value="per_use" selected' not in html
    assert "the room asks you on its page when this is first needed" in text
    # Each tier's effect is written next to it, and they differ.
    for words in (
        "Nothing from your vault reaches either agent",
        "your budget only as a rough band, your free and busy times for at most the next 7 days",
        "Each agent gets exactly what you check below",
    ):
        assert words in text
    assert "No one has chosen a privacy tier, so the room runs under Collaborative" in text
    assert codes_in(text) == [], codes_in(text)
    assert str(opened.room.id) not in text and str(opened.a.agent.id) not in text


def test_every_control_has_a_label(make_open_room, client):
    opened = make_open_room()
    _fill_vault(opened.a.owner)
    client.force_login(opened.a.owner)
    html = client.get(f"/rooms/{opened.room.id}/slip/").content.decode()
    controls = re.findall(r"<(?:input|select|textarea)\b[^>]*>", html)
    visible = [c for c in controls if 'type="hidden"' not in c]
    assert len(visible) > 10
    for control in visible:
        found = re.search(r'id="([^"]+)"', control)
        assert found is not None, control
        assert f'for="{found.group(1)}"' in html, control
    assert "style=" not in html and " onclick" not in html
    assert not re.search(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)", html)


def test_a_tier_only_takes_away_in_words_and_in_its_limits(
    make_open_room: Any, client: Any
) -> None:
    """The page says a tier never shares what was left unchecked, and the limits the page
    narrows the draft to (``tier_limits``) are the server's own tier rule: what they let
    through the server leaves as it is, and a narrower tier never allows more."""
    opened = make_open_room()
    _fill_vault(opened.a.owner)
    client.force_login(opened.a.owner)
    page = client.get(f"/rooms/{opened.room.id}/slip/")
    text = _text(page)
    assert "A tier only takes away: it never shares anything you left unchecked." in text
    assert 'aria-describedby="tier-narrows"' in page.content.decode()
    assert "slip-presets" not in page.content.decode()  # nothing left to check boxes with
    rows = [r for kind in page.context["checklist"] for r in kind.rows] + page.context["actions"]
    limits = tier_limits(rows)
    assert page.context["tier_limits"] == limits
    for row in rows:
        offered = [code for code, _ in row.scopes]
        assert limits["collaborative"][row.key] == {"scopes": offered, "onward": True, "ask": False}
        for tier in TIER_ORDER:
            limit = limits[tier][row.key]
            if limit is None:  # only Sandbox drops anything: the vault items
                assert tier == "sandbox" and row.resource in {"budget", "allergies"}
                continue
            assert limit["scopes"] == offered[: len(limit["scopes"])]
            for scope in limit["scopes"]:
                signed = Capability(row.resource, row.operation, scope, row.recipient,
                                    2**40, 100, limit["onward"],
                                    "per_use" if limit["ask"] else "none")  # fmt: skip
                assert capability_under_tier(signed, tier) == signed, (row.key, tier)
        for narrower, wider in itertools.pairwise(TIER_ORDER):
            low, high = limits[narrower][row.key], limits[wider][row.key]
            if high is None:
                assert low is None
            elif low is not None:  # never more than the wider tier allows
                assert set(low["scopes"]) <= set(high["scopes"])
                assert high["onward"] or not low["onward"]
                assert low["ask"] or not high["ask"]
    # Room Only: the other agent gets only the band; the owner's own agent what she checks.
    assert limits["room_only"]["budget-peer"] == {"scopes": ["band"], "onward": False, "ask": False}
    own = {"scopes": ["band", "range"], "onward": False, "ask": False}
    assert limits["room_only"]["budget-own"] == own
    booking = {"scopes": ["call"], "onward": False, "ask": True}
    assert limits["sandbox"]["tool-book_table"] == booking


def test_the_slip_in_force_and_what_changed(make_open_room, client):
    opened = make_open_room()
    _fill_vault(opened.a.owner)
    client.force_login(opened.a.owner)
    band = {"resource": "budget", "operation": "disclose", "recipient": "peer_agent",
            "scope": "band", "approval": "none", "max_uses": 100}  # fmt: skip
    allergies = {"resource": "allergies", "operation": "disclose", "recipient": "peer_agent",
                 "approval": "none", "max_uses": 100}  # fmt: skip
    _sign(opened.a, opened.room.id, [band, allergies])
    text = _text(client.get(f"/rooms/{opened.room.id}/slip/"))
    assert "Your slip in force" in text
    assert "Let the other agent see my allergies (up to 100 times)." in text
    assert "What changed" not in text  # it replaced nothing

    exact = {**band, "scope": "range", "approval": "per_use"}
    own = {"resource": "allergies", "operation": "read", "max_uses": 100, "approval": "none"}
    _sign(opened.a, opened.room.id, [exact, own], later=5)
    text = _text(client.get(f"/rooms/{opened.room.id}/slip/?signed=1"))
    assert "Signed. Your new slip is in force" in text
    assert "What changed from your previous slip" in text
    changes = text[text.index("What changed") : text.index("Privacy tier")]
    assert "Now shared Let my agent know my allergies (up to 100 times)." in changes
    assert "No longer shared Let the other agent see my allergies (up to 100 times)." in changes
    assert (
        "Changed Let the other agent see my exact budget range per person (up to 100 times; "
        "asking me before each use) (before: Let the other agent see a rough band" in changes
    )
    assert codes_in(text) == [], codes_in(text)


def test_both_owners_see_the_tier_conflict_in_words(make_open_room, client):
    opened = make_open_room()
    slip_services.tier_choose(owner=opened.b.owner, room_id=opened.room.id, tier="room_only")
    slip_services.tier_choose(owner=opened.a.owner, room_id=opened.room.id, tier="collaborative")
    client.force_login(opened.a.owner)
    alice_text = _text(client.get(f"/rooms/{opened.room.id}/slip/"))
    assert "The room runs under Room Only, chosen by bob" in alice_text
    assert (
        "Bob chose Room Only and you chose Collaborative, so the room runs under Room Only"
        in alice_text
    )
    client.force_login(opened.b.owner)
    bob_text = _text(client.get(f"/rooms/{opened.room.id}/slip/"))
    assert (
        "Alice chose Collaborative and you chose Room Only, so the room runs under Room Only"
        in bob_text
    )
    assert codes_in(bob_text) == [] and codes_in(alice_text) == []


def test_the_tier_api_answers_in_words_for_the_page(make_open_room, client):
    opened = make_open_room()
    client.force_login(opened.a.owner)
    answer = client.put(
        f"/api/rooms/{opened.room.id}/tier", {"tier": "sandbox"}, content_type="application/json"
    ).json()
    assert answer["room"] == "sandbox"
    assert answer["words"].startswith("The room runs under Sandbox, chosen by you:")
    assert answer["conflicts"] == []  # bob has no slip and no choice yet


def test_the_keys_page_in_words(make_owner, client):
    alice = make_owner("alice")
    key, _ = enroll(alice, label="Work laptop")
    client.force_login(alice)
    page = client.get("/keys/")
    text = _text(page)
    assert "Work laptop" in text and re.search(r"Active ?: signs your permission slips", text)
    assert "last used never" in text and "fingerprint" in text
    assert str(key.id) not in text
    slip_services.key_revoke(owner=alice, key_id=key.id)
    text = _text(client.get("/keys/"))
    assert re.search(r"Revoked ?: the slips it signed clear nothing any more", text)
    assert codes_in(text) == [], codes_in(text)


def test_a_slip_whose_key_was_revoked_says_it_shares_nothing(make_open_room, client):
    opened = make_open_room()
    _fill_vault(opened.a.owner)
    client.force_login(opened.a.owner)
    _sign(opened.a, opened.room.id, [{"resource": "allergies", "approval": "none"}])
    for key in opened.a.owner.device_keys.all():
        slip_services.key_revoke(owner=opened.a.owner, key_id=key.id)
    text = _text(client.get(f"/rooms/{opened.room.id}/slip/"))
    assert "The key that signed it was revoked, so it shares nothing: sign it again." in text

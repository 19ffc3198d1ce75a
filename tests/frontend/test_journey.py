"""The owner's whole journey, in headless Debian Chromium: two owners in two browser contexts
(their own cookies and device keys), two reference agents, one real Daphne.

Alice and Bob sign up through the page, enrol a device key each, fill their vaults by form,
register an agent each (the token is shown once), Alice creates a room and invites Bob, both
bind their agents, check what they share, choose privacy tiers and sign, and the room opens.
The two reference negotiators (``agents.negotiator``) then plan a dinner over the room's
socket while the owners watch: a proposal card appears, Bob is asked before his liked food
reaches Alice's agent and approves that one disclosure, Alice's agent asks to book (her slip
says "ask me before each use") and she approves that one booking, each signed in the page with
the key made in that browser. Bob's agent then says something with HTML in it (shown as text)
and raises a Signal Flare, which Bob answers while Alice cannot resume past it; at a second
flare Bob steps in and speaks himself. Alice whispers to her agent (it stays in her view
only), reads and verifies the ledger, changes her time zone and badge, and finds every
first-run step done.

Every page visited is checked (``tests.frontend.browser``): strict CSP, 0 critical/serious
axe-core violations, no sideways scroll at 390 px, no codes in what a person reads, and
screenshots at desktop and phone sizes in ``var/test-artifacts/screens/journey-*``.

Steps are small functions using roles and label text, so a page's markup can change under
them; a failing step saves both owners' pages as ``FAILED-<step>-<n>.png``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Locator, Page, expect

from agents import RoomClient
from agents.negotiator import NegotiationResult, negotiate
from ledger.models import LedgerEvent
from ledger.verification import ledger_verify_room
from rooms.models import Agent, Flare, Room
from tests.conftest import CHROMIUM_FLAGS, service_unavailable
from tests.e2e.daphne import running_daphne
from tests.frontend import browser

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery 42"
WAIT_MS = 20_000  # one page reacting to the room (a live frame, a fetch)
# Shown to the other owner exactly as typed: markup in a peer's message is text, never HTML.
PEER_HTML = '<img src="x" class="pwned"><b class="pwned">bold</b><script>window.pwned=1</script>'


@dataclass
class Owner:
    username: str
    page: Page
    watch: browser.PageWatch
    agent_name: str
    token: str = ""
    checked: list[str] = field(default_factory=list)


@dataclass
class Journey:
    base: str
    alice: Owner
    bob: Owner
    room_url: str = ""
    room_id: str = ""
    invite_url: str = ""

    @property
    def pages(self) -> tuple[Page, Page]:
        return (self.alice.page, self.bob.page)

    def ws_url(self) -> str:
        return self.base.replace("http://", "ws://") + f"/ws/rooms/{self.room_id}/"


def check(owner: Owner, name: str, *, quoted: tuple[str, ...] = ()) -> None:
    """Everything a page must be, on ``owner``'s page as it is now."""
    label = f"journey-{owner.username}-{name}"
    started = time.monotonic()
    owner.page.wait_for_load_state("networkidle")
    browser.page_checks(owner.page, owner.watch, name=label, quoted=quoted)
    owner.checked.append(f"{name} {time.monotonic() - started:.1f}s")
    print(f"checked {label} in {time.monotonic() - started:.1f} s")


@contextlib.contextmanager
def step(journey: Journey, name: str) -> Iterator[None]:
    """One named step of the journey: on failure both owners' pages are saved."""
    started = time.monotonic()
    with browser.screenshots_on_failure(f"journey-{name}", *journey.pages):
        yield
    print(f"step {name}: {time.monotonic() - started:.1f} s")


def nav(owner: Owner, place: str) -> None:
    """Go to one of the owner's places through the header, as a person would."""
    owner.page.get_by_role("navigation", name="Your places").get_by_role(
        "link", name=re.compile(rf"^{place}\b")
    ).click()
    owner.page.wait_for_load_state("domcontentloaded")


# --- the steps -------------------------------------------------------------------------------


def sign_up(journey: Journey, owner: Owner) -> None:
    page = owner.page
    page.goto(f"{journey.base}/signup/")
    check(owner, "signup")
    page.get_by_label("Username").fill(owner.username)
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_label(re.compile("^Password confirmation")).fill(PASSWORD)
    page.get_by_role("button", name=re.compile("Create account|Sign up")).click()
    page.wait_for_url(f"{journey.base}/")
    expect(page.get_by_text(f"Signed in as {owner.username}")).to_be_visible()
    check(owner, "rooms-first-run")


def enrol_key(owner: Owner) -> None:
    page = owner.page
    nav(owner, "Keys")
    label = page.get_by_label(re.compile("name for this device|Device label", re.I))
    label.fill(f"{owner.username}'s browser")
    page.get_by_role("button", name="Enroll this device").click()
    expect(page.locator("#device-keys")).to_contain_text(f"{owner.username}'s browser")
    check(owner, "keys")


def fill_vault(owner: Owner, *, low: int, high: int, likes: str, home: str) -> None:
    """Budget, liked food and home neighbourhood, each by its own form; the budget is read
    back in whole units ("30 to 80 EUR"), never in cents."""
    page = owner.page
    nav(owner, "Vault")
    check(owner, "vault-empty")
    budget = page.locator("#form-budget")
    budget.get_by_label("Lowest amount").fill(str(low))
    budget.get_by_label("Highest amount").fill(str(high))
    budget.get_by_role("button", name=re.compile("^Save")).click()
    page.wait_for_load_state("domcontentloaded")
    items = page.locator("#vault-items")
    expect(items).to_contain_text(re.compile(rf"\b{low} to {high} EUR\b"))
    expect(items).not_to_contain_text(f"{low}00")  # not stored-and-shown in cents

    likes_form = page.locator("#form-food_likes")
    likes_form.get_by_label("Cuisines or dishes").fill(likes)
    likes_form.get_by_role("button", name=re.compile("^Save")).click()
    page.wait_for_load_state("domcontentloaded")
    expect(page.locator("#vault-items")).to_contain_text(re.compile(likes, re.I))

    where = page.locator("#form-neighbourhood")
    where.get_by_label("Neighbourhood").select_option(label=home)
    where.get_by_role("button", name=re.compile("^Save")).click()
    page.wait_for_load_state("domcontentloaded")
    expect(page.locator("#vault-items")).to_contain_text(home)
    check(owner, "vault")


def register_agent(owner: Owner) -> None:
    """The token is shown once; reloading the page does not register a second agent."""
    page = owner.page
    nav(owner, "Agents")
    page.get_by_label("Agent name").fill(owner.agent_name)
    page.get_by_role("button", name="Register agent").click()
    page.wait_for_load_state("domcontentloaded")
    token = page.locator("#issued-token").inner_text().strip()
    assert token.startswith("syn_agent_"), token
    owner.token = token
    expect(page.locator("#connect-command")).to_contain_text("agents.negotiator")
    check(owner, "agents-token-shown")
    page.reload()
    page.wait_for_load_state("domcontentloaded")
    assert Agent.objects.filter(owner__username=owner.username).count() == 1
    expect(page.get_by_text(token)).to_have_count(0)  # shown once, never again


def create_room_and_invite(journey: Journey) -> None:
    alice = journey.alice
    page = alice.page
    nav(alice, "Rooms")
    page.get_by_label("Purpose").fill("Dinner next week")
    page.get_by_role("button", name="Create room").click()
    page.wait_for_url(re.compile(r".*/rooms/[0-9a-f-]{36}/$"))
    journey.room_url = page.url
    journey.room_id = page.url.rstrip("/").rsplit("/", 1)[1]
    page.get_by_role("button", name="Create invitation link").click()
    page.wait_for_load_state("domcontentloaded")
    journey.invite_url = page.locator("#invite-url").inner_text().strip()
    assert journey.invite_url.startswith(journey.base + "/invites/"), journey.invite_url
    check(alice, "room-draft")


def bind_agent(owner: Owner) -> None:
    page = owner.page
    page.get_by_label("Your agent for this room").select_option(label=owner.agent_name)
    page.get_by_role("button", name="Bind my agent").click()
    page.wait_for_load_state("domcontentloaded")
    expect(page.locator("main")).to_contain_text(owner.agent_name)


def join_room(journey: Journey) -> None:
    bob = journey.bob
    bob.page.goto(journey.invite_url)
    expect(bob.page.get_by_role("heading", level=1)).to_contain_text("invites you")
    check(bob, "invite")
    bob.page.get_by_role("button", name="Accept invitation").click()
    bob.page.wait_for_url(journey.room_url)


def follow(journey: Journey, page: Page, name: re.Pattern[str], path: str, what: str) -> None:
    """Follow the link a person would use to reach ``path``."""
    link = page.get_by_role("link", name=name)
    assert link.count(), f"{what}: no link named {name.pattern!r} on {page.url}"
    link.first.click()
    page.wait_for_url(journey.base + path)


def open_slip(journey: Journey, owner: Owner) -> None:
    owner.page.goto(journey.room_url)
    path = f"/rooms/{journey.room_id}/slip/"
    follow(journey, owner.page, re.compile("slip", re.I), path, "the room page links its slip")


def slip_row(page: Page, sentence: str) -> Locator:
    """The checklist row whose sentence matches ``sentence`` (a regular expression)."""
    return page.locator("li.slip-row", has=page.get_by_label(re.compile(sentence, re.I)))


def ask_me_first(row: Locator) -> None:
    """Check the row and, in its folded options, ask its owner before each use."""
    row.get_by_role("checkbox").first.check()
    row.locator("summary").click()
    row.get_by_label("Ask me first?").select_option("per_use")


def share_items(page: Page, sentence: str) -> None:
    """Check every item from the vault whose sentence matches ``sentence`` (a regular
    expression): nothing is checked for the owner, and a tier only takes away."""
    label = page.get_by_label(re.compile(sentence, re.I))
    rows = page.locator("#slip-items li.slip-row", has=label)
    assert rows.count() > 0, f"no checklist item matches {sentence!r}"
    for index in range(rows.count()):
        rows.nth(index).get_by_role("checkbox").first.check()


def choose_tier_and_sign(
    journey: Journey,
    owner: Owner,
    tier: str,
    *,
    share: str,
    ask_first: str = "",
    booking: bool = False,
) -> None:
    """Check the vault items matching ``share``, choose a privacy tier (it checks nothing,
    only narrows), ask first before the row matching ``ask_first`` is used, let the agent book
    (asked each time) when ``booking``, and sign with the device key."""
    page = owner.page
    open_slip(journey, owner)
    share_items(page, share)
    checked = page.locator("#slip-items [name=share]:checked").count()
    page.get_by_label(tier, exact=True).check()
    expect(page.locator("#tier-status")).to_contain_text("nothing was checked for you")
    assert page.locator("#slip-items [name=share]:checked").count() <= checked
    if ask_first:
        ask_me_first(slip_row(page, ask_first))
    if booking:
        row = slip_row(page, r"\bbook (a )?tables?\b")
        assert row.count() == 1, "the slip offers no booking action (tool:book_table)"
        ask_me_first(row)
    expect(page.locator("#slip-preview")).not_to_contain_text("Loading")
    check(owner, f"slip-{tier.lower().replace(' ', '-')}")
    page.get_by_role("button", name=re.compile("^Sign slip")).click()
    expect(page.locator("#slip-in-force")).not_to_contain_text("not signed", timeout=WAIT_MS)
    expect(page.locator("#slip-in-force-items li").first).to_be_visible()  # the items checked
    check(owner, "slip-in-force")


def open_the_room(journey: Journey) -> None:
    page = journey.alice.page
    page.goto(journey.room_url)
    page.get_by_role("button", name="Open room").click()
    page.wait_for_load_state("domcontentloaded")
    expect(page.locator("#room-state")).to_contain_text(re.compile("open", re.I))
    # The room runs under the narrower of the two tiers, and says so to both owners.
    expect(page.locator("#room-tier")).to_contain_text("Room Only")
    check(journey.alice, "room-open")
    journey.bob.page.goto(journey.room_url)
    expect(journey.bob.page.locator("#room-tier")).to_contain_text("Room Only")


def negotiate_in_background(journey: Journey) -> tuple[threading.Thread, list[Any]]:
    """Both reference negotiators on their own thread and event loop (Playwright owns this
    one), connecting to the live Daphne with the tokens the owners copied from the page."""
    results: list[Any] = []
    url, host_token, guest_token = journey.ws_url(), journey.alice.token, journey.bob.token

    async def both() -> tuple[NegotiationResult, NegotiationResult]:
        async with RoomClient(url, host_token) as alice, RoomClient(url, guest_token) as bob:
            return await asyncio.gather(
                negotiate(alice, reply_timeout=45, grant_timeout=60),
                negotiate(bob, reply_timeout=75),
            )

    def run() -> None:
        try:
            results.extend(asyncio.run(both()))
        except BaseException as exc:  # reported by the test
            results.append(exc)

    thread = threading.Thread(target=run, name="negotiators", daemon=True)
    thread.start()
    return thread, results


def watch_and_approve_the_booking(journey: Journey) -> None:
    alice, bob = journey.alice, journey.bob
    bob.page.goto(journey.room_url)
    for owner in (alice, bob):
        expect(owner.page.locator("#connection")).to_contain_text("live", timeout=WAIT_MS)
    thread, results = negotiate_in_background(journey)
    # Both owners watch the proposal arrive as a card (venue, time, price in words).
    for owner in (alice, bob):
        expect(owner.page.locator("#transcript .proposal-card").first).to_be_visible(
            timeout=WAIT_MS
        )
    card = alice.page.locator("#transcript .proposal-card").first
    expect(card).to_contain_text("EUR")
    # Bob is asked before his liked food reaches Alice's agent, and approves that one use.
    asked = bob.page.locator("#grant-requests li").first
    expect(asked).to_be_visible(timeout=WAIT_MS)
    expect(asked).to_contain_text(re.compile("food", re.I))
    check(bob, "room-disclosure-asked")
    asked.get_by_role("button", name=re.compile("^Approve")).click()
    expect(bob.page.locator("#grant-status")).to_contain_text("Approved", timeout=WAIT_MS)
    disclosure = LedgerEvent.objects.filter(room_id=journey.room_id, kind="grant_approved")
    assert [e.data.get("key_custody") for e in disclosure] == ["device"]
    # Alice's agent asks to book; she is asked, in a sentence, and approves that one booking.
    grant = alice.page.locator("#grant-requests li").first
    expect(grant).to_be_visible(timeout=WAIT_MS)
    expect(grant).to_contain_text(re.compile("book", re.I))
    check(alice, "room-grant-waiting")
    grant.get_by_role("button", name=re.compile("^Approve")).click()
    expect(alice.page.locator("#grant-status")).to_contain_text("ran", timeout=WAIT_MS)
    thread.join(timeout=90)
    assert not thread.is_alive(), "the negotiators did not finish"
    assert len(results) == 2, results  # or the exception that ended them
    host, guest = results
    assert (host.status, guest.status) == ("booked", "booked"), results
    approved = LedgerEvent.objects.filter(room_id=journey.room_id, kind="grant_approved")
    assert [e.data.get("key_custody") for e in approved] == ["device"] * 2  # in their browsers
    # The outcome in one sentence, on both owners' pages.
    for owner in (alice, bob):
        owner.page.reload()
        expect(owner.page.locator("#room-outcome")).to_have_attribute("data-kind", "agreed")
    check(alice, "room-booked")
    check(bob, "room-booked")


def run_agent(journey: Journey, token: str, work: Callable[[RoomClient], Any]) -> None:
    """One agent session on its own thread, doing ``work``."""

    async def session() -> None:
        async with RoomClient(journey.ws_url(), token) as agent:
            await work(agent)

    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, session()).result(timeout=30)


def peer_html_is_text_and_flare_answered(journey: Journey) -> None:
    """Bob's agent says something with markup in it (Alice sees the characters, not HTML),
    then raises a Signal Flare: the room pauses, Alice cannot resume it past Bob's flare, and
    Bob answers "reset and resume"."""
    alice, bob = journey.alice, journey.bob

    async def say_then_flare(agent: RoomClient) -> None:
        await agent.say(PEER_HTML)
        await agent.flare("distress")
        for _ in range(100):  # the flare frame is fire-and-forget: wait until it is recorded
            if await asyncio.to_thread(Flare.objects.filter(room_id=journey.room_id).exists):
                return
            await asyncio.sleep(0.1)

    run_agent(journey, bob.token, say_then_flare)
    transcript = alice.page.locator("#transcript")
    expect(transcript).to_contain_text('<b class="pwned">bold</b>', timeout=WAIT_MS)
    assert transcript.locator(".pwned").count() == 0
    assert alice.page.evaluate("() => window.pwned === undefined")

    bob.page.reload()
    flare = bob.page.locator("#flares li").first
    expect(flare).to_be_visible(timeout=WAIT_MS)
    for choice in ("Reset and resume", "Mute", "Block", "Step in"):
        expect(flare.get_by_role("button", name=re.compile(f"^{choice}"))).to_be_visible()
    check(bob, "room-flare", quoted=(PEER_HTML,))  # shown as the agent wrote it
    alice.page.reload()
    expect(alice.page.locator("#room-state")).to_contain_text(re.compile("paused", re.I))
    expect(alice.page.get_by_role("button", name="Resume")).to_have_count(0)
    flare.get_by_role("button", name="Reset and resume").click()
    expect(bob.page.locator("#flare-status")).to_contain_text("esume", timeout=WAIT_MS)
    bob.page.reload()
    expect(bob.page.locator("#room-state")).to_contain_text(re.compile("open", re.I))
    assert Room.objects.get(id=journey.room_id).state == "open"


def step_in_personally(journey: Journey) -> None:
    """At a second flare Bob steps in and speaks himself: Alice reads it as Bob's, in person,
    never as his agent's."""
    alice, bob = journey.alice, journey.bob
    words = "Bob here, in person: see you there."

    async def flare_again(agent: RoomClient) -> None:
        await agent.flare("loop")
        for _ in range(100):
            if await asyncio.to_thread(Flare.objects.filter(room_id=journey.room_id).count) > 1:
                return
            await asyncio.sleep(0.1)

    run_agent(journey, bob.token, flare_again)
    bob.page.reload()
    step_in = bob.page.get_by_role("button", name=re.compile("^Step in"))
    expect(step_in).to_have_count(1, timeout=WAIT_MS)  # only the new flare asks
    step_in.click()
    form = bob.page.locator("#in-person")
    expect(form).to_be_visible(timeout=WAIT_MS)
    check(bob, "room-stepped-in", quoted=(PEER_HTML,))
    form.get_by_label(re.compile("Speak in person")).fill(words)
    form.get_by_role("button", name="Say it").click()
    expect(bob.page.locator("#flare-status")).to_contain_text("Said", timeout=WAIT_MS)
    said = alice.page.locator("#transcript li", has_text=words)
    expect(said).to_be_visible(timeout=WAIT_MS)
    expect(said.locator(".who")).to_have_text(re.compile(r"^bob, in person$", re.I))


def whisper_persists(journey: Journey) -> None:
    """Alice's whisper to her agent stays in her own view after a reload; Bob never sees it."""
    alice, bob = journey.alice, journey.bob
    words = "Keep it under 50 a head next time."
    alice.page.goto(journey.room_url)
    alice.page.get_by_label("Your whisper").fill(words)
    alice.page.get_by_role("button", name="Whisper", exact=True).click()
    expect(alice.page.locator("#whispers")).to_contain_text(words, timeout=WAIT_MS)
    alice.page.reload()
    expect(alice.page.locator("#whispers")).to_contain_text(words)
    bob.page.reload()
    expect(bob.page.locator("main")).not_to_contain_text(words)


def read_and_verify_ledger(journey: Journey) -> None:
    """Alice's browser recomputes the chain itself (intact), checks the server's signed heads,
    and on a later visit finds the record only grew since it last saw it."""
    alice = journey.alice
    page = alice.page
    page.goto(journey.room_url)
    path = f"/rooms/{journey.room_id}/ledger/"
    follow(journey, page, re.compile("ledger", re.I), path, "the room page links its ledger")
    verdict = page.locator("#ledger-verdict")
    expect(verdict).not_to_have_attribute("data-state", "pending", timeout=WAIT_MS)
    assert verdict.get_attribute("data-state") == "verified", verdict.inner_text()
    expect(page.locator("#ledger-signatures")).to_have_attribute("data-state", "verified")
    expect(page.locator("#ledger-history")).to_have_attribute("data-state", "first-visit")
    expect(page.locator("main")).to_contain_text(re.compile("flare", re.I))
    check(alice, "ledger")
    page.reload()
    expect(page.locator("#ledger-history")).to_have_attribute(
        "data-state", "extends", timeout=WAIT_MS
    )
    assert ledger_verify_room(room_id=UUID(journey.room_id)).ok


def change_time_zone(journey: Journey) -> None:
    alice = journey.alice
    page = alice.page
    nav(alice, "Settings")
    check(alice, "settings")
    page.get_by_label("Time zone", exact=True).select_option("Europe/Berlin")
    page.get_by_label(re.compile("^Gentle Tap")).check()
    page.get_by_role("button", name="Save settings").click()
    page.wait_for_load_state("domcontentloaded")
    expect(page.locator("body")).to_have_attribute("data-time-zone", "Europe/Berlin")
    # Times on her room page are now Berlin's.
    page.goto(journey.room_url)
    offset = datetime.now(ZoneInfo("Europe/Berlin")).strftime("%z")
    offset = f"{offset[:3]}:{offset[3:]}"
    stamp = page.locator("#transcript time").first.get_attribute("datetime") or ""
    assert stamp.endswith(offset), stamp
    check(alice, "room-in-berlin-time", quoted=(PEER_HTML,))


def rooms_page_after(journey: Journey) -> None:
    """Back on her rooms page, every first-run step is done and the room says its outcome."""
    alice = journey.alice
    nav(alice, "Rooms")
    # The checklist is gone once complete; were it shown, no step may be left undone.
    expect(alice.page.locator('#onboarding [data-done="false"]')).to_have_count(0)
    card = alice.page.locator(".room-card", has_text="Dinner next week")
    expect(card).to_contain_text(re.compile("Outcome", re.I))
    check(alice, "rooms-after")


# --- the test ----------------------------------------------------------------------------------


@pytest.fixture
def journey(
    tmp_path: Path, transactional_db: None, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Journey]:
    """One Daphne, one Chromium, two contexts (Alice's and Bob's own cookies and keys)."""
    executable = "/usr/bin/chromium"
    if not Path(executable).exists():
        service_unavailable("Chromium is not installed (apt-get install chromium)")
    # The operator's tool policy lets agents request tools (the production default denies
    # all); what Alice's agent may do is then hers to say, in her slip.
    monkeypatch.setenv("SYNAPSIA_TOOL_POLICY_DEFAULT", "allow_all")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # ORM beside Playwright's loop
    from playwright.sync_api import sync_playwright

    with running_daphne(tmp_path / "daphne.log") as host, sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        owners = []
        for username, agent_name in (("alice", "Alice's agent"), ("bob", "Bob's agent")):
            context = chromium.new_context(viewport=browser.DESKTOP)
            context.set_default_timeout(WAIT_MS)  # a click or a page on a loaded CI machine
            page = context.new_page()
            owners.append(Owner(username, page, browser.watch(page), agent_name))
        try:
            yield Journey(f"http://{host}", owners[0], owners[1])
        finally:
            chromium.close()


def test_two_owners_journey_through_every_page(journey: Journey) -> None:
    started = time.monotonic()
    alice, bob = journey.alice, journey.bob
    for owner in (alice, bob):
        with step(journey, f"sign-up-{owner.username}"):
            sign_up(journey, owner)
        with step(journey, f"enrol-key-{owner.username}"):
            enrol_key(owner)
    with step(journey, "fill-vaults"):
        fill_vault(alice, low=30, high=80, likes="italian", home="Mitte")
        fill_vault(bob, low=40, high=90, likes="italian", home="Kreuzberg")
    with step(journey, "register-agents"):
        register_agent(alice)
        register_agent(bob)
    with step(journey, "create-room"):
        create_room_and_invite(journey)
        bind_agent(alice)
    with step(journey, "join-room"):
        join_room(journey)
        bind_agent(bob)
        check(bob, "room-joined")
    with step(journey, "slips"):
        # What the tier presets used to check for them: now each owner checks it, and the
        # tier only narrows it (Room Only cuts nothing here: the band is already the least).
        choose_tier_and_sign(journey, alice, "Collaborative", share=r"^Let ", booking=True)
        choose_tier_and_sign(
            journey,
            bob,
            "Room Only",
            share=r"^Let my agent know|^Let the other agent see a rough band",
            ask_first="other agent see the food I like",
        )
    with step(journey, "open-room"):
        open_the_room(journey)
    with step(journey, "negotiation-and-grant"):
        watch_and_approve_the_booking(journey)
    with step(journey, "peer-html-and-flare"):
        peer_html_is_text_and_flare_answered(journey)
    with step(journey, "step-in"):
        step_in_personally(journey)
    with step(journey, "whisper"):
        whisper_persists(journey)
    with step(journey, "ledger"):
        read_and_verify_ledger(journey)
    with step(journey, "settings"):
        change_time_zone(journey)
    with step(journey, "rooms-after"):
        rooms_page_after(journey)
    for owner in (alice, bob):
        owner.watch.check_csp()  # every document either owner loaded, redirects' targets too
        owner.watch.check_no_script_errors()
    elapsed = time.monotonic() - started
    print(f"journey: {elapsed:.1f} s; pages checked: {alice.checked + bob.checked}")

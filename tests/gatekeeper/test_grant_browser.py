"""End to end: an agent asks to book above the budget, the room pauses, the owner approves
that one booking in the browser with a device key, it runs once, and a replay is refused."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from agents import ActionOutcome, RoomClient
from gatekeeper.adapters.sandbox import SandboxEffect
from rooms.models import Room
from slips import services as slip_services
from slips import vault
from tests.bookings import BUDGET, OVER, booking
from tests.slips.conftest import canonical_text, enroll, slip_payload

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

BOOKING = booking(OVER)  # Kaiseki Nori: 90 EUR per person, above her 60


@pytest.fixture
def negotiation(monkeypatch: pytest.MonkeyPatch, make_open_room) -> Any:
    """Before Daphne and the browser start: the tool policy allows tools (the production
    default is deny-all), Alice's slip clears bookings, and her budget tops out at 60 EUR per
    person."""
    monkeypatch.setenv("SYNAPSIA_TOOL_POLICY_DEFAULT", "allow_all")
    setup = make_open_room()
    owner = setup.a.owner
    key, device = enroll(owner, label="python device")
    text = canonical_text(
        slip_payload(
            owner=owner,
            room_id=setup.room.id,
            agent_id=setup.a.agent.id,
            key=key,
            capabilities=[{"resource": "tool:book_table", "operation": "act", "approval": "none"}],
        )
    )
    slip_services.slip_submit(
        owner=owner,
        room_id=setup.room.id,
        seated_agent_id=setup.a.agent.id,
        payload=text,
        signature=device.sign(text),
    )
    vault.vault_item_create(
        owner=owner,
        content=BUDGET,
    )
    return setup


def log_in(page: Any, base: str, username: str) -> None:
    page.goto(f"{base}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "correct horse 42")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


def test_owner_grants_one_over_budget_booking_in_the_browser(
    negotiation, live_daphne, browser_page
) -> None:
    page, base, setup = browser_page, live_daphne, negotiation
    ws_url = base.replace("http", "ws") + f"/ws/rooms/{setup.room.id}/"
    log_in(page, base, setup.a.owner.get_username())
    page.goto(f"{base}/keys/")
    page.fill("#key-label", "Alice's browser")
    page.click("text=Enroll this device")
    page.wait_for_selector('#device-keys li:has-text("Alice\'s browser")')

    loop = asyncio.new_event_loop()
    pool = ThreadPoolExecutor(1)  # the agent runs on its own thread: Playwright owns this one

    def run(coroutine: Any) -> Any:
        return pool.submit(loop.run_until_complete, coroutine).result(timeout=60)

    agent = RoomClient(ws_url, setup.a.token)
    run(agent.connect())
    # Its slip clears book_table; the room's own tools need no slip item.
    names = [tool["name"] for tool in agent.welcome.tools]
    assert names == ["book_table", "declare_no_plan", "venues_search"]
    asked: ActionOutcome = run(agent.act("book_table", BOOKING))
    assert (asked.status, asked.rule) == ("awaiting_grant", "over_budget")
    assert Room.objects.get(id=setup.room.id).state == "paused"

    page.goto(f"{base}/rooms/{setup.room.id}/")
    page.wait_for_selector("#grant-requests li.grant")
    details = page.inner_text("#grant-requests")
    assert "Book a table" in details and "Kaiseki Nori" in details
    assert "180 EUR in all (90 EUR per person)" in details
    assert "This costs more than your budget allows" in details
    for code in ("book_table", "18000", "over_budget", "{"):
        assert code not in details
    with page.expect_request(lambda r: r.method == "POST" and "/grants/" in r.url) as approval:
        page.click("text=Approve this one action")
    page.wait_for_selector("#grant-status:has-text('Approved: the action ran.')")
    update: ActionOutcome = run(agent.action_update(asked.ref, timeout=20))
    assert (update.status, update.rule) == ("executed", "granted")
    assert SandboxEffect.objects.count() == 1
    assert Room.objects.get(id=setup.room.id).state == "open"

    # The same signed approval, sent again, is refused.
    replay = page.evaluate(
        """async ([url, body]) => {
            const csrf = document.querySelector("[name=csrfmiddlewaretoken]").value;
            const r = await fetch(url, {method: "POST", body, credentials: "same-origin",
              headers: {"Content-Type": "application/json", "X-CSRFToken": csrf}});
            return [r.status, await r.json()];
        }""",
        [approval.value.url, approval.value.post_data],
    )
    assert replay[0] == 409, replay
    assert "already" in replay[1]["message"]
    assert json.loads(approval.value.post_data)["decision"] == "approve"
    run(agent.close())
    loop.close()
    pool.shutdown()
    assert SandboxEffect.objects.count() == 1

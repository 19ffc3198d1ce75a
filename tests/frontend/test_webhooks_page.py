"""The owner's webhooks page: it lists only the owner's own webhooks and says which one their
agent's actions go to; adding one shows its signing secret once (never cached, never kept);
a refused address is named on the field and nothing is saved; switching off is the owner's
alone (another owner's webhook is a 404 and stays on); every POST needs the CSRF token."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import dateformat, timezone
from django.utils.html import escape

from gatekeeper.errors import WebhookConfigInvalid
from gatekeeper.models import DeliveryStatus, WebhookDelivery, WebhookEndpoint
from gatekeeper.webhooks import (
    webhook_body,
    webhook_delivery_create,
    webhook_endpoint_create,
    webhook_secret_open,
    webhook_url_check,
)
from rooms import notifications
from tests.conftest import OpenRoom

pytestmark = pytest.mark.django_db

PAGE = "/settings/webhooks/"
# Names are not resolved when a webhook is added (only at delivery), so no DNS is needed.
GOOD_URL = "https://hooks.example.com/synapsia"
UUID_TEXT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)


@pytest.fixture
def alice(make_owner: Callable[[str], User]) -> User:
    return make_owner("alice")


@pytest.fixture
def bob(make_owner: Callable[[str], User]) -> User:
    return make_owner("bob")


@pytest.fixture
def client(alice: User) -> Client:
    client = Client()
    client.force_login(alice)
    return client


def _text(page: str) -> str:
    """What a person reads: the page without its tags (ids may only sit in attributes)."""
    return re.sub(r"<[^>]*>", " ", page)


def _shown(when: Any, zone: str) -> str:
    return dateformat.format(timezone.localtime(when, ZoneInfo(zone)), "D j M Y, H:i")


def test_the_page_needs_a_signed_in_owner() -> None:
    for response in (Client().get(PAGE), Client().post(PAGE, {"url": GOOD_URL})):
        assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert not WebhookEndpoint.objects.exists()


def test_settings_links_to_the_page_with_what_it_is_for(client: Client) -> None:
    page = client.get("/settings/").content.decode()
    assert f'href="{PAGE}"' in page
    assert "only practised" in page


def test_without_webhooks_the_page_says_actions_are_only_practised(client: Client) -> None:
    response = client.get(PAGE)
    page = response.content.decode()
    assert response.status_code == 200
    assert "newest webhook that is on" in page
    assert "No webhook is on now, so your agent's actions are only practised" in page
    assert "You have no webhooks yet." in page
    assert 'aria-current="page">Settings' in page  # the header marks Settings


def test_the_list_shows_only_the_owners_own_and_which_is_in_use(
    client: Client, alice: User, bob: User
) -> None:
    notifications.notification_preference_set(owner=alice, time_zone="Asia/Tokyo")
    old = webhook_endpoint_create(owner=alice, url="https://old.example.com/hook").endpoint
    off = webhook_endpoint_create(owner=alice, url="https://off.example.com/hook").endpoint
    WebhookEndpoint.objects.filter(id=off.id).update(active=False)
    new = webhook_endpoint_create(owner=alice, url="https://new.example.com/hook").endpoint
    theirs = webhook_endpoint_create(owner=bob, url="https://bobs.example.net/hook").endpoint

    page = client.get(PAGE).content.decode()
    for url in (old.url, off.url, new.url):
        assert url in page
    assert theirs.url not in page and str(theirs.id) not in page
    rows = re.findall(r'<li class="agent-row"(.*?)</li>', page, re.S)
    assert [re.search(r"<h3[^>]*>(.*?)</h3>", row).group(1) for row in rows] == [  # type: ignore[union-attr]
        new.url,
        off.url,
        old.url,
    ]  # newest first
    by_url = dict(zip([new.url, off.url, old.url], rows, strict=True))
    assert "On, in use" in by_url[new.url] and 'value="' + str(new.id) in by_url[new.url]
    assert "Switched off" in by_url[off.url] and "switch_off" not in by_url[off.url]
    assert "On, not in use" in by_url[old.url] and "A newer webhook is on" in by_url[old.url]
    assert re.search(
        r'id="in-use-now">Now they go to <span class="mono">' + re.escape(new.url), page
    )
    # Times in the owner's zone, as every page shows them.
    assert _shown(new.created_at, "Asia/Tokyo") in by_url[new.url]
    # What a person reads holds no id and no secret: ids only in form values.
    assert not UUID_TEXT.search(_text(page))
    assert "whsec_" not in page and old.secret_sealed not in page


def test_adding_shows_the_secret_once_uncached_and_keeps_it_nowhere(
    client: Client, alice: User
) -> None:
    response = client.post(PAGE, {"url": GOOD_URL})
    page = response.content.decode()
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    endpoint = WebhookEndpoint.objects.get(owner=alice)
    assert endpoint.url == GOOD_URL and endpoint.active
    secret = re.search(r'id="issued-secret">(whsec_[^<]+)</p>', page).group(1)  # type: ignore[union-attr]
    assert webhook_secret_open(endpoint=endpoint).decode() == secret
    assert "shown only this once" in page and "X-Synapsia-Signature: sha256=" in page
    assert "Verifying a delivery (receivers)" in page
    assert 'data-copy-target="issued-secret"' in page
    assert 'name="url"' in page and f'value="{GOOD_URL}"' not in page  # the form is empty again
    # Not in the session, not in a message: the next page does not have it.
    assert not any(secret in str(value) for value in client.session.values())
    again = client.get(PAGE).content.decode()
    assert secret not in again and "whsec_" not in again
    assert "On, in use" in again and GOOD_URL in again
    assert secret not in client.get("/settings/").content.decode()


def _empty_form(client: Client) -> dict[str, str]:
    """The add form's fields as the page gives them (its one-time key)."""
    page = client.get(PAGE).content.decode()
    key = re.search(r'name="form_key" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    return {"form_key": key}


def test_the_same_form_sent_again_adds_nothing_and_says_so(client: Client, alice: User) -> None:
    form = {**_empty_form(client), "url": GOOD_URL}
    first = client.post(PAGE, form)
    assert first.status_code == 200 and "whsec_" in first.content.decode()
    # The answer's own form has a fresh key: adding another from it is a new add.
    assert f'value="{form["form_key"]}"' not in first.content.decode()
    again = client.post(PAGE, form)  # a reload of the answer sends the form again
    page = again.content.decode()
    assert again.status_code == 200 and "no-store" in again["Cache-Control"]
    assert "Already added" in page and "added nothing more" in page
    assert re.search(r'The webhook to <span class="mono">' + re.escape(GOOD_URL), page)
    assert "whsec_" not in page  # its secret is never shown again
    assert not UUID_TEXT.search(_text(page))
    assert WebhookEndpoint.objects.filter(owner=alice).count() == 1


def test_the_same_form_with_another_address_adds_that_one(client: Client, alice: User) -> None:
    form = _empty_form(client)
    client.post(PAGE, {**form, "url": GOOD_URL})
    other = "https://other.example.com/synapsia"
    answer = client.post(PAGE, {**form, "url": other})  # back, edited, sent
    assert answer.status_code == 200 and "whsec_" in answer.content.decode()
    assert sorted(WebhookEndpoint.objects.filter(owner=alice).values_list("url", flat=True)) == [
        GOOD_URL,
        other,
    ]


@pytest.mark.parametrize("key", ["x" * 65, "not a key!", "short", ""])
def test_an_altered_key_is_no_key(client: Client, alice: User, key: str) -> None:
    """A key the page could not have made adds the webhook as without one (no error on a
    field the owner cannot see)."""
    answer = client.post(PAGE, {"form_key": key, "url": GOOD_URL})
    assert answer.status_code == 200 and "whsec_" in answer.content.decode()
    assert WebhookEndpoint.objects.get(owner=alice).added_with == ""


def test_a_key_is_one_owners_alone(client: Client, alice: User, bob: User) -> None:
    form = {**_empty_form(client), "url": GOOD_URL}
    client.post(PAGE, form)
    theirs = Client()
    theirs.force_login(bob)
    answer = theirs.post(PAGE, form)  # the same key and address from another owner
    assert answer.status_code == 200 and "whsec_" in answer.content.decode()
    assert WebhookEndpoint.objects.filter(owner=bob).count() == 1


def test_over_the_limit_nothing_is_added_until_one_is_switched_off(
    client: Client, alice: User, owner_limit: Any
) -> None:
    owner_limit("webhooks", 2)
    kept = [
        webhook_endpoint_create(owner=alice, url=f"https://h{n}.example.com/h").endpoint
        for n in range(2)
    ]
    response = client.post(PAGE, {**_empty_form(client), "url": GOOD_URL})
    page = response.content.decode()
    assert response.status_code == 422
    assert re.search(
        r'<div class="notice error" role="alert"><p>You have 2 webhooks on, the most one owner '
        r"may have\. Switch one off before adding another\.</p>",
        page,
    )
    assert "correct the address" not in page  # the address was not the problem
    assert f'value="{GOOD_URL}"' in page  # what was typed is kept
    assert "whsec_" not in page
    assert WebhookEndpoint.objects.filter(owner=alice).count() == 2
    client.post(PAGE, {"switch_off": str(kept[0].id)})
    added = client.post(PAGE, {**_empty_form(client), "url": GOOD_URL})
    assert added.status_code == 200 and "whsec_" in added.content.decode()
    assert WebhookEndpoint.objects.filter(owner=alice, active=True).count() == 2


@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.example.com/synapsia",  # http to a public host
        "https://10.0.0.5/hook",  # a private address
        "https://169.254.169.254/latest",  # where cloud metadata answers
        "https://me:pw@hooks.example.com/h",  # credentials in the address
        "just some words",
        "no-host-here",
    ],
)
def test_a_refused_address_is_named_on_the_field_and_nothing_is_added(
    client: Client, url: str
) -> None:
    with pytest.raises(WebhookConfigInvalid) as refused:
        webhook_url_check(url=url)
    response = client.post(PAGE, {"url": url})
    page = response.content.decode()
    assert response.status_code == 422
    assert "no-store" in response["Cache-Control"]
    assert re.search(
        r'<p class="field-error" id="id_url_error">' + re.escape(escape(refused.value.message)),
        page,
    )
    assert f'value="{escape(url)}"' in page  # what was typed is kept
    assert "Nothing was added" in page and "whsec_" not in page
    assert not WebhookEndpoint.objects.exists()


def test_an_empty_address_is_asked_for(client: Client) -> None:
    response = client.post(PAGE, {"url": "  "})
    assert response.status_code == 422
    assert "Give the address, starting with https://." in response.content.decode()
    assert not WebhookEndpoint.objects.exists()


def test_switching_off_says_so_and_stops_using_it(client: Client, alice: User) -> None:
    endpoint = webhook_endpoint_create(owner=alice, url=GOOD_URL).endpoint
    response = client.post(PAGE, {"switch_off": str(endpoint.id)}, follow=True)
    assert response.redirect_chain == [(PAGE, 302)]
    page = response.content.decode()
    endpoint.refresh_from_db()
    assert not endpoint.active
    assert "The webhook to hooks.example.com is switched off" in page
    assert "only practised" in page and "Switched off" in page
    assert not UUID_TEXT.search(_text(page))


def test_switching_off_with_an_older_one_on_moves_actions_to_it(
    client: Client, alice: User
) -> None:
    older = webhook_endpoint_create(owner=alice, url="https://older.example.com/h").endpoint
    newer = webhook_endpoint_create(owner=alice, url=GOOD_URL).endpoint
    page = client.post(PAGE, {"switch_off": str(newer.id)}, follow=True).content.decode()
    assert "newest webhook that is still on" in page
    assert re.search(r'Now they go to <span class="mono">' + re.escape(older.url), page)


@pytest.mark.parametrize("whose", ["another owner's", "unknown", "not an id"])
def test_switching_off_what_is_not_yours_is_a_404_and_changes_nothing(
    client: Client, bob: User, whose: str
) -> None:
    theirs = webhook_endpoint_create(owner=bob, url=GOOD_URL).endpoint
    target = {
        "another owner's": str(theirs.id),
        "unknown": str(uuid.uuid4()),
        "not an id": "webhook-1",
    }[whose]
    response = client.post(PAGE, {"switch_off": target})
    assert response.status_code == 404
    assert "There is no page here" in response.content.decode()
    theirs.refresh_from_db()
    assert theirs.active


def test_every_post_needs_the_csrf_token(alice: User) -> None:
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    existing = webhook_endpoint_create(owner=alice, url="https://kept.example.com/h").endpoint
    assert strict.post(PAGE, {"url": GOOD_URL}).status_code == 403
    assert strict.post(PAGE, {"switch_off": str(existing.id)}).status_code == 403
    assert list(WebhookEndpoint.objects.values_list("url", "active")) == [(existing.url, True)]
    # With the token the page's own form carries, both work.
    page = strict.get(PAGE).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    added = strict.post(PAGE, {"url": GOOD_URL, "csrfmiddlewaretoken": token})
    assert added.status_code == 200 and "whsec_" in added.content.decode()
    switched = strict.post(PAGE, {"switch_off": str(existing.id), "csrfmiddlewaretoken": token})
    assert switched.status_code == 302
    existing.refresh_from_db()
    assert not existing.active


def _delivery(endpoint: WebhookEndpoint, room: OpenRoom, status: str, code: int | None) -> None:
    delivery, _ = webhook_delivery_create(
        delivery_id=uuid.uuid4(),
        endpoint=endpoint,
        idempotency_key=f"key-{uuid.uuid4()}",
        tool="book_table",
        arguments_sha256="0" * 64,
        body=webhook_body(room_id=str(room.room.id), tool="book_table", arguments={}),
    )
    WebhookDelivery.objects.filter(id=delivery.id).update(status=status, last_status_code=code)


def test_deliveries_are_counted_with_the_last_result_in_words_in_one_query(
    client: Client, alice: User, make_open_room: Callable[..., OpenRoom]
) -> None:
    room = make_open_room(prefix="r-")
    first = webhook_endpoint_create(owner=alice, url="https://first.example.com/h").endpoint
    with CaptureQueriesContext(connection) as one_webhook:
        client.get(PAGE)
    _delivery(first, room, DeliveryStatus.SUCCEEDED, 200)
    _delivery(first, room, DeliveryStatus.REFUSED, 404)
    second = webhook_endpoint_create(owner=alice, url="https://second.example.com/h").endpoint
    _delivery(second, room, DeliveryStatus.SUCCEEDED, 204)
    webhook_endpoint_create(owner=alice, url="https://third.example.com/h")
    with CaptureQueriesContext(connection) as three_webhooks:
        page = client.get(PAGE).content.decode()
    assert len(three_webhooks) == len(one_webhook)  # not one query per webhook
    rows = dict(
        (re.search(r"<h3[^>]*>(.*?)</h3>", row).group(1), row)  # type: ignore[union-attr]
        for row in re.findall(r'<li class="agent-row"(.*?)</li>', page, re.S)
    )
    assert "2 deliveries so far" in rows[first.url]
    assert "your system refused it (it answered 404)" in rows[first.url]
    assert "1 delivery so far" in rows[second.url]
    assert "delivered: your system accepted it" in rows[second.url]
    assert "Nothing has been sent to it yet." in rows["https://third.example.com/h"]

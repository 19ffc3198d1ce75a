"""Login throttling with lockout (django-axes), per owner and per address; the password-reset
request throttle; and signup and login answers that do not tell who has an account.

Issue 13, finding 4: 50 wrong passwords (20 on the admin login) met no throttle. Finding 6:
signup told whether a username exists.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.models import User
from django.core import mail
from django.test import Client
from django.utils import timezone

from frontend.account_views import USERNAME_REFUSED

pytestmark = pytest.mark.django_db

RIGHT = "correct horse 42"  # make_owner's password
LOCKED_WORDS = "Too many attempts: try again in 15 minutes, or reset your password."
WRONG_WORDS = "Please enter a correct username and password"
ATTACKER = "203.0.113.7"
ELSEWHERE = "198.51.100.20"


@pytest.fixture(autouse=True)
def _email_can_leave(settings: Any) -> None:
    settings.PASSWORD_RESET_BY_EMAIL = True


def _login(username: str, password: str, address: str = ATTACKER) -> Any:
    return Client(REMOTE_ADDR=address).post("/login/", {"username": username, "password": password})


def _signed_in(response: Any) -> bool:
    return response.status_code == 302 and response["Location"] == "/"


def test_the_limit_and_cool_off_are_the_documented_defaults() -> None:
    assert settings.AXES_FAILURE_LIMIT == 5
    assert timedelta(minutes=15) == settings.AXES_COOLOFF_TIME
    assert settings.AXES_LOCKOUT_PARAMETERS == ["username", "ip_address"]


def test_fifty_wrong_passwords_lock_the_owner_out_with_words_and_429(make_owner: Any) -> None:
    make_owner("alice")
    answers = [_login("alice", f"guess {n}") for n in range(50)]
    statuses = [a.status_code for a in answers]
    limit = settings.AXES_FAILURE_LIMIT
    assert statuses == [200] * (limit - 1) + [429] * (50 - limit + 1)
    assert WRONG_WORDS in answers[0].content.decode()
    locked = answers[-1].content.decode()
    assert LOCKED_WORDS in locked
    assert 'href="/password-reset/"' in locked
    # Refusals during the lockout are not counted on: the cool-off runs from the 5th failure.
    assert sum(AccessAttempt.objects.values_list("failures_since_start", flat=True)) == limit


def test_the_right_password_is_refused_until_the_cool_off_then_works(make_owner: Any) -> None:
    make_owner("alice")
    for n in range(settings.AXES_FAILURE_LIMIT):
        _login("alice", f"guess {n}")
    refused = _login("alice", RIGHT)
    assert refused.status_code == 429 and LOCKED_WORDS in refused.content.decode()
    assert "_auth_user_id" not in refused.client.session
    # Per owner: from another address too.
    assert _login("alice", RIGHT, address=ELSEWHERE).status_code == 429

    # Fifteen minutes and a second later (the attempts' clock moved back): in again.
    AccessAttempt.objects.update(
        attempt_time=timezone.now() - settings.AXES_COOLOFF_TIME - timedelta(seconds=1)
    )
    assert _signed_in(_login("alice", RIGHT))


def test_another_owner_elsewhere_is_unaffected_and_the_address_is_locked_too(
    make_owner: Any,
) -> None:
    make_owner("alice")
    make_owner("bob")
    for n in range(settings.AXES_FAILURE_LIMIT):
        _login("alice", f"guess {n}")
    assert _signed_in(_login("bob", RIGHT, address=ELSEWHERE))
    # Per address: the guessing address may not go on with another username.
    assert _login("bob", RIGHT, address=ATTACKER).status_code == 429


def test_spraying_one_password_over_many_usernames_locks_the_address(make_owner: Any) -> None:
    for name in ("u1", "u2", "u3", "u4", "u5", "u6"):
        make_owner(name)
    statuses = [_login(name, "Summer2026!").status_code for name in ("u1", "u2", "u3", "u4")]
    assert statuses == [200, 200, 200, 200]
    assert _login("u5", "Summer2026!").status_code == 429
    assert _login("u6", RIGHT).status_code == 429  # even right, from this address
    assert _signed_in(_login("u6", RIGHT, address=ELSEWHERE))


def test_an_unknown_username_gets_the_same_answers_as_a_known_one(make_owner: Any) -> None:
    make_owner("alice")
    known = [_login("alice", f"x{n}").content.decode() for n in range(5)]
    unknown = [_login("nobody", f"x{n}", address=ELSEWHERE).content.decode() for n in range(5)]

    def words(page: str, typed: str) -> str:
        # The page minus its per-request tokens and the username the form shows back.
        return re.sub(r'value="[^"]{20,}"', "", page).replace(f'value="{typed}"', "")

    assert [words(p, "alice") for p in known] == [words(p, "nobody") for p in unknown]
    assert WRONG_WORDS in unknown[0] and LOCKED_WORDS in unknown[-1]


def test_the_admin_login_is_throttled_too(make_owner: Any) -> None:
    admin = make_owner("root")
    admin.is_staff = admin.is_superuser = True
    admin.save()
    client = Client(REMOTE_ADDR=ATTACKER)
    statuses = [
        client.post("/admin/login/", {"username": "root", "password": f"g{n}"}).status_code
        for n in range(20)
    ]
    limit = settings.AXES_FAILURE_LIMIT
    assert statuses == [200] * (limit - 1) + [429] * (20 - limit + 1)
    refused = client.post("/admin/login/", {"username": "root", "password": RIGHT})
    assert refused.status_code == 429 and LOCKED_WORDS in refused.content.decode()
    # The owner's login page shares the count: one lock for the username wherever it is tried.
    assert _login("root", RIGHT, address=ELSEWHERE).status_code == 429


def test_a_completed_password_reset_lifts_the_lock(make_owner: Any) -> None:
    owner = make_owner("alice")
    owner.email = "alice@example.org"
    owner.save()
    for n in range(settings.AXES_FAILURE_LIMIT):
        _login("alice", f"guess {n}")
    assert _login("alice", RIGHT, address=ELSEWHERE).status_code == 429

    client = Client(REMOTE_ADDR=ELSEWHERE)
    client.post("/password-reset/", {"email": "alice@example.org"})
    link = re.search(r"http://testserver(/password-reset/\S+/\S+/)", mail.outbox[0].body)
    assert link
    form = client.get(link.group(1), follow=True)
    new = "a brand new battery 97"
    client.post(form.redirect_chain[-1][0], {"new_password1": new, "new_password2": new})
    assert User.objects.get(username="alice").check_password(new)
    assert _signed_in(_login("alice", new, address=ELSEWHERE))


def test_password_reset_requests_are_throttled_per_address(make_owner: Any) -> None:
    limit = settings.SYNAPSIA["PASSWORD_RESETS_PER_ADDRESS_PER_HOUR"]
    assert limit == 5
    client = Client(REMOTE_ADDR=ATTACKER)
    statuses = [
        client.post("/password-reset/", {"email": f"someone{n}@example.org"}).status_code
        for n in range(limit + 3)
    ]
    assert statuses == [302] * limit + [429] * 3
    refused = client.post("/password-reset/", {"email": "x@example.org"}).content.decode()
    assert "Too many password reset requests from your network: try again in an hour." in refused
    # Showing the form is not counted, and another address is unaffected.
    assert client.get("/password-reset/").status_code == 200
    other = Client(REMOTE_ADDR=ELSEWHERE).post("/password-reset/", {"email": "y@example.org"})
    assert other.status_code == 302


# --- signup: one answer for every refused username ---------------------------------------


def _signup(username: str, address: str = ATTACKER) -> Any:
    password = "a long enough passphrase 31"
    return Client(REMOTE_ADDR=address).post(
        "/signup/", {"username": username, "password1": password, "password2": password}
    )


def _username_errors(page: str) -> list[str]:
    # The field's error paragraph(s), as the page shows them.
    return re.findall(r'<p class="field-error"[^>]*>(.*?)</p>', page, flags=re.S)


@pytest.mark.parametrize(
    "username",
    [
        "alice",  # taken
        "ALICE",  # taken, differing only in case
        "not a name!",  # characters Django does not allow
        "x" * 151,  # too long
    ],
)
def test_signup_refuses_any_username_with_the_same_words(make_owner: Any, username: str) -> None:
    make_owner("alice")
    refused = _signup(username)
    page = refused.content.decode()
    assert refused.status_code == 200
    assert "already exists" not in page and "A user with that" not in page
    errors = [e.strip() for e in _username_errors(page)]
    assert errors == [USERNAME_REFUSED.replace("&", "&amp;")]
    assert User.objects.filter(username__iexact="alice").count() == 1


def test_probing_usernames_at_signup_is_throttled_per_address(make_owner: Any) -> None:
    make_owner("alice")
    limit = settings.SYNAPSIA["SIGNUP_USERNAME_REFUSALS_PER_ADDRESS_PER_HOUR"]
    statuses = [_signup("alice").status_code for _ in range(limit)]
    assert statuses == [200] * limit
    throttled = _signup("a-free-name")
    assert throttled.status_code == 429
    assert "Too many usernames refused from your network" in throttled.content.decode()
    assert not User.objects.filter(username="a-free-name").exists()
    assert _signup("a-free-name", address=ELSEWHERE).status_code == 302


def test_failed_login_records_are_purged_with_the_telemetry_row(make_owner: Any) -> None:
    """The records axes keeps of failed logins (a username, an address) are telemetry: the
    scheduled retention purge removes those past its window and keeps the recent ones."""
    from rooms.retention import retention_purge_all, retention_row

    make_owner("alice")
    for _ in range(2):
        _login("alice", "wrong")  # counted on one AccessAttempt row (and its failure log)
    _login("alice", "wrong", address=ELSEWHERE)
    window = retention_row("telemetry").days
    old = timezone.now() - timedelta(days=window + 1)
    AccessAttempt.objects.filter(ip_address=ATTACKER).update(attempt_time=old)
    kept = AccessAttempt.objects.filter(ip_address=ELSEWHERE).count()
    assert kept == 1

    telemetry = [p for p in retention_purge_all() if p.key == "telemetry"]

    assert len(telemetry) == 1 and telemetry[0].rows >= 1
    assert not AccessAttempt.objects.filter(ip_address=ATTACKER).exists()
    assert AccessAttempt.objects.filter(ip_address=ELSEWHERE).count() == kept
    assert "login records: deleted" in telemetry[0].summary
    # A second run finds nothing more past the window (purges are idempotent).
    again = [p for p in retention_purge_all() if p.key == "telemetry"]
    assert again[0].rows == 0

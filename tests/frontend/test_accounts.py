"""Accounts: sign up (with an optional email), change the password, and reset a forgotten one
by email end to end (Django's locmem backend in tests: ``mail.outbox``)."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.test import Client

pytestmark = pytest.mark.django_db

OLD = "correct horse 42"
NEW = "a brand new battery 97"


@pytest.fixture(autouse=True)
def email_can_leave(settings) -> None:
    """Reset by email is offered (the production profile without SYNAPSIA_EMAIL_URL does not;
    the last test checks that)."""
    settings.PASSWORD_RESET_BY_EMAIL = True


def reset_link(message: mail.EmailMessage) -> str:
    found = re.search(r"http://testserver(/password-reset/[^/\s]+/[^/\s]+/)", message.body)
    assert found, message.body
    return found.group(1)


def test_sign_up_with_an_email_signs_in_and_keeps_the_email() -> None:
    client = Client()
    response = client.post(
        "/signup/",
        {"username": "carol", "email": "carol@example.org", "password1": OLD + "x",
         "password2": OLD + "x"},
        follow=True,
    )  # fmt: skip
    assert response.redirect_chain[-1][0] == "/"
    assert "Welcome, carol" in response.content.decode()
    assert User.objects.get(username="carol").email == "carol@example.org"


@pytest.mark.parametrize(
    ("next_path", "lands_on"),
    [
        ("/invites/some-invitation/", "/invites/some-invitation/"),  # back to the invitation
        ("https://elsewhere.example/steal", "/"),  # another site: never followed
        ("//elsewhere.example/", "/"),
    ],
)
def test_sign_up_returns_to_the_page_that_sent_the_person_only_on_this_site(
    next_path: str, lands_on: str
) -> None:
    client = Client()
    form = client.get("/signup/", {"next": next_path}).content.decode()
    assert ('name="next"' in form) is (lands_on != "/")
    response = client.post(
        "/signup/",
        {"username": "dora", "password1": OLD + "y", "password2": OLD + "y", "next": next_path},
    )
    assert response.status_code == 302
    assert response["Location"] == lands_on


def test_sign_up_without_an_email_is_allowed_and_says_what_email_is_for() -> None:
    page = Client().get("/signup/").content.decode()
    assert "Email (optional)" in page and "forget your password" in page
    response = Client().post(
        "/signup/", {"username": "dave", "password1": OLD + "x", "password2": OLD + "x"}
    )
    assert response.status_code == 302
    assert User.objects.get(username="dave").email == ""


def test_sign_up_errors_are_in_words_next_to_the_field() -> None:
    page = (
        Client()
        .post("/signup/", {"username": "erin", "password1": "abc", "password2": "abd"})
        .content.decode()
    )
    assert 'class="field-error"' in page and "two password fields didn" in page
    assert not User.objects.filter(username="erin").exists()


def test_the_login_page_offers_a_password_reset() -> None:
    page = Client().get("/login/").content.decode()
    assert '<a href="/password-reset/">Forgot your password?</a>' in page


def test_password_reset_by_email_end_to_end(make_owner) -> None:
    owner = make_owner("alice")
    owner.email = "alice@example.org"
    owner.save()
    client = Client()
    response = client.post("/password-reset/", {"email": "ALICE@example.org"}, follow=True)
    assert response.redirect_chain == [("/password-reset/sent/", 302)]
    assert "Check your email" in response.content.decode()
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["alice@example.org"]
    assert message.subject == "Reset your Synapsia password"
    assert "alice" in message.body and "3 hours" in message.body

    # The link asks for the new password (Django swaps the token for a session-held one).
    form = client.get(reset_link(message), follow=True)
    assert "Choose a new password" in form.content.decode()
    done = client.post(
        form.redirect_chain[-1][0], {"new_password1": NEW, "new_password2": NEW}, follow=True
    )
    assert done.redirect_chain[-1][0] == "/password-reset/done/"
    assert "Your password is changed" in done.content.decode()

    assert not Client().login(username="alice", password=OLD)
    fresh = Client()
    logged_in = fresh.post("/login/", {"username": "alice", "password": NEW})
    assert logged_in.status_code == 302 and logged_in["Location"] == "/"

    # The same link again: refused in words, nothing changes.
    again = Client().get(reset_link(message), follow=True).content.decode()
    assert "This reset link cannot be used" in again and "Ask for a new link" in again


def test_a_wrong_token_is_refused_in_words_and_the_password_stays(make_owner) -> None:
    owner = make_owner("alice")
    owner.email = "alice@example.org"
    owner.save()
    client = Client()
    client.post("/password-reset/", {"email": "alice@example.org"})
    uid = reset_link(mail.outbox[0]).split("/")[2]
    page = client.get(f"/password-reset/{uid}/not-the-token/", follow=True)
    body = page.content.decode()
    assert "This reset link cannot be used" in body
    assert "has already been used, has expired, or was not copied whole" in body
    assert 'name="new_password1"' not in body
    posted = client.post(
        f"/password-reset/{uid}/not-the-token/", {"new_password1": NEW, "new_password2": NEW}
    )
    assert "This reset link cannot be used" in posted.content.decode()
    assert Client().login(username="alice", password=OLD)


def test_an_unknown_email_gets_the_same_answer_and_no_mail() -> None:
    response = Client().post("/password-reset/", {"email": "nobody@example.org"})
    assert response.status_code == 302 and response["Location"] == "/password-reset/sent/"
    assert mail.outbox == []


def test_without_an_email_server_production_offers_no_reset_form(settings, make_owner) -> None:
    settings.PASSWORD_RESET_BY_EMAIL = False
    owner = make_owner("alice")
    owner.email = "alice@example.org"
    owner.save()
    page = Client().get("/password-reset/")
    assert page.status_code == 503
    assert "cannot send email" in page.content.decode()
    assert 'name="email"' not in page.content.decode()
    Client().post("/password-reset/", {"email": "alice@example.org"})
    assert mail.outbox == []


def test_change_password_asks_for_the_old_one_and_comes_back_to_settings(make_owner) -> None:
    make_owner("alice")
    client = Client()
    assert client.login(username="alice", password=OLD)
    wrong = client.post(
        "/settings/password/",
        {"old_password": "not it", "new_password1": NEW, "new_password2": NEW},
    )
    assert "Your old password was entered incorrectly" in wrong.content.decode()
    assert Client().login(username="alice", password=OLD)
    done = client.post(
        "/settings/password/",
        {"old_password": OLD, "new_password1": NEW, "new_password2": NEW},
        follow=True,
    )
    assert done.redirect_chain == [("/settings/", 302)]
    assert "Your password is changed" in done.content.decode()
    assert client.get("/settings/").status_code == 200  # this session stays signed in
    assert Client().login(username="alice", password=NEW)

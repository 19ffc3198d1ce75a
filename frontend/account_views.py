"""Account pages: sign up, and password change and reset (Django's own views, with our
templates, success messages and redirects back to where the owner was)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.models import User
from django.contrib.messages.views import SuccessMessageMixin
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.utils.http import url_has_allowed_host_and_scheme

from frontend.login_throttle import (
    login_lockout_lift,
    password_reset_request_allowed,
    password_reset_throttled_response,
    signup_refusal_count,
    signup_refusals_exceeded,
    signup_throttled_response,
)

# One answer for every refused username (taken, differing only in case, malformed, too long):
# a refusal that said "already exists" would tell strangers who has an account here
# (docs/threat-model.md, "Account enumeration").
USERNAME_REFUSED = (
    "Choose another username: use up to 150 letters, digits and @ . + - _ "
    "(some names are already taken or not allowed)."
)


class SignupForm(UserCreationForm):
    """Username and password, and an optional email: the only way to reset a forgotten
    password, but not needed to use Synapsia (and it can be added later in Settings)."""

    email = forms.EmailField(
        required=False,
        label="Email (optional)",
        help_text="Only used to send you a link if you forget your password.",
    )

    class Meta(UserCreationForm.Meta):
        model = User
        fields = ("username", "email")

    def full_clean(self) -> None:
        # After all of Django's checks, including the model's unique check (its last step).
        super().full_clean()
        if self.is_bound and "username" in self.errors:
            self.errors["username"] = self.error_class([USERNAME_REFUSED])


def _next_here(request: HttpRequest) -> str:
    """Where to go after signing up (an invitation, say), if it is a path on this site."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    safe = url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return target if safe else ""


def signup(request: HttpRequest) -> HttpResponse:
    if request.method == "POST" and signup_refusals_exceeded(request):
        return signup_throttled_response(request)
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        # Without a backend named, login() asks which one authenticated: the throttle first.
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        messages.success(request, f"Welcome, {user.get_username()}. Your account is ready.")
        return redirect(_next_here(request) or "dashboard")
    if request.method == "POST" and "username" in form.errors:
        # Probing usernames through this form is as slow as probing them at the login.
        signup_refusal_count(request)
    return render(request, "registration/signup.html", {"form": form, "next": _next_here(request)})


class PasswordChange(SuccessMessageMixin, auth_views.PasswordChangeView):
    """Change the password (old one first); back to Settings with a message. The session
    stays signed in (Django updates its hash), other sessions are signed out."""

    template_name = "registration/password_change.html"
    success_url = reverse_lazy("settings")
    success_message = "Your password is changed. Other browsers signed in as you are logged out."


def _reset_hours() -> int:
    """How long a reset link works, in whole hours, as the pages and the email say it."""
    return max(1, settings.PASSWORD_RESET_TIMEOUT // 3600)


class PasswordResetRequest(auth_views.PasswordResetView):
    """Ask for a reset link by email. Says the same whether or not an account has that email
    (so the page does not tell strangers who has an account here)."""

    template_name = "registration/password_reset_request.html"
    email_template_name = "registration/password_reset_email.txt"
    subject_template_name = "registration/password_reset_subject_line.txt"
    success_url = reverse_lazy("password_reset_done")

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not settings.PASSWORD_RESET_BY_EMAIL:
            # Production without SYNAPSIA_EMAIL_URL: no email can leave, so offer no form.
            return render(request, self.template_name, {"reset_by_email": False}, status=503)
        return super().dispatch(request, *args, **kwargs)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        return {**context, "reset_by_email": True, "reset_hours": _reset_hours()}

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not password_reset_request_allowed(request):
            return password_reset_throttled_response(request)
        return super().post(request, *args, **kwargs)

    def form_valid(self, form: Any) -> HttpResponse:
        self.extra_email_context = {"reset_hours": _reset_hours()}
        return super().form_valid(form)


class PasswordResetSent(auth_views.PasswordResetDoneView):
    template_name = "registration/password_reset_sent.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), "reset_hours": _reset_hours()}


class PasswordResetNew(auth_views.PasswordResetConfirmView):
    """The link from the email: choose a new password (a used, expired or mangled link is
    refused in words, and changes nothing)."""

    template_name = "registration/password_reset_new.html"
    success_url = reverse_lazy("password_reset_complete")

    def form_valid(self, form: Any) -> HttpResponse:
        response = super().form_valid(form)
        # The lockout page says "or reset your password": a reset proves the mailbox, so it
        # lifts the lock on this username (not on the address, which others may share).
        login_lockout_lift(username=form.user.get_username())
        return response


class PasswordResetFinished(auth_views.PasswordResetCompleteView):
    template_name = "registration/password_reset_finished.html"

"""Settings: how loudly the owner hears about rooms, their time zone, and their account
(email for password reset; the password itself is changed on its own page)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone

from rooms import notifications
from synapsia.owners import OwnerRequest


class OwnerSettingsForm(forms.Form):
    """Everything on the settings page but the password. Flares (the Urgent Beacon) are not
    here: they always reach the owner."""

    badge = forms.BooleanField(
        required=False,
        label="Gentle Tap: show a badge when a fork waits for my answer",
        help_text="A number next to Rooms counts the requests your agents are waiting on.",
    )
    digest = forms.BooleanField(
        required=False,
        label="Ambient Digest: show “While you were away” on my rooms page",
        help_text="What happened in each room in the last day, counted (never what was said).",
    )
    time_zone = forms.CharField(
        label="Time zone",
        max_length=64,
        widget=forms.Select(),
        help_text="Every time on your pages is shown in this zone.",
    )
    email = forms.EmailField(
        required=False,
        label="Email",
        help_text="Needed only to reset a forgotten password. Leave empty for none.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        zones = notifications.time_zones_offered()
        self.fields["time_zone"].widget.choices = [(z, z.replace("_", " ")) for z in zones]

    def clean_time_zone(self) -> str:
        name: str = self.cleaned_data["time_zone"]
        try:
            return notifications.time_zone_checked(name)
        except notifications.TimeZoneUnknown as exc:
            raise forms.ValidationError(str(exc)) from exc


@login_required
def settings_page(request: OwnerRequest) -> HttpResponse:
    """GET shows the owner's settings; POST saves them all or (with errors in words) none,
    then redirects back (POST-redirect-GET)."""
    chosen = notifications.preferences_of(owner=request.user)
    if request.method == "POST":
        form = OwnerSettingsForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            with transaction.atomic():
                notifications.notification_preference_set(
                    owner=request.user,
                    badge=data["badge"],
                    digest=data["digest"],
                    time_zone=data["time_zone"],
                )
                request.user.email = data["email"]
                request.user.save(update_fields=["email"])
            messages.success(request, "Settings saved.")
            return redirect("settings")
        messages.error(request, "Nothing was saved: correct what is marked below.")
    else:
        form = OwnerSettingsForm(
            initial={
                "badge": chosen.badge,
                "digest": chosen.digest,
                "time_zone": chosen.time_zone or "UTC",
                "email": request.user.email,
            }
        )
    return render(
        request,
        "frontend/settings.html",
        {
            "form": form,
            # Never chosen: the page offers the browser's own zone (settings.js).
            "time_zone_chosen": bool(chosen.time_zone),
            "now": timezone.localtime(),
        },
    )

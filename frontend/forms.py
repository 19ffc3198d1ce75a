from __future__ import annotations

from django import forms
from django.conf import settings


class AgentForm(forms.Form):
    name = forms.CharField(max_length=80)


class RoomForm(forms.Form):
    purpose = forms.CharField(max_length=200, help_text="What the agents should work out.")
    charter = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}),
        required=False,
        max_length=settings.SYNAPSIA["MAX_CHARTER_CHARS"],
        help_text="Ground rules both agents read at every turn.",
    )


class BindAgentForm(forms.Form):
    agent = forms.ChoiceField(choices=[])

    def __init__(self, *args: object, agents: list[tuple[str, str]], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["agent"].choices = agents  # type: ignore[attr-defined]

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any, ClassVar

from django import forms
from django.conf import settings

from dining import ALLERGENS
from gatekeeper.add_keys import add_key_valid
from slips.money import FORM_CURRENCIES, minor_per_unit, whole_units_to_minor


class AgentForm(forms.Form):
    name = forms.CharField(
        max_length=80,
        label="Agent name",
        help_text='A name you and the other owner will see, such as "Alice\'s dinner agent".',
        error_messages={
            "required": 'Give the agent a name, such as "My dinner agent".',
            "max_length": "Keep the name to 80 characters or fewer.",
        },
    )


class WebhookForm(forms.Form):
    """The address of a new outgoing webhook. Only present here: whether Synapsia may post to
    it is ``gatekeeper.webhooks.webhook_url_check``'s to say (through the create service)."""

    url = forms.CharField(
        label="Webhook address",
        help_text="Where your receiving system listens, starting with https://, such as "
        "https://bookings.example.com/synapsia.",
        widget=forms.URLInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
        error_messages={"required": "Give the address, starting with https://."},
    )
    # A new random key with each empty form, sent back with it: the same form sent again (a
    # reload of the answer that showed the secret, a second click) adds nothing more
    # (``webhook_endpoint_create``). Missing (a page from before it existed) is no key.
    form_key = forms.CharField(widget=forms.HiddenInput, required=False)

    def clean_form_key(self) -> str:
        """Not one the page could have made (altered): no key, rather than an error the
        owner cannot see on a hidden field."""
        key = str(self.cleaned_data.get("form_key") or "")
        return key if add_key_valid(key) else ""

    @classmethod
    def empty(cls) -> WebhookForm:
        """An empty add form with a fresh one-time key."""
        return cls(initial={"form_key": secrets.token_urlsafe(32)})


class RoomForm(forms.Form):
    purpose = forms.CharField(
        max_length=200,
        label="Purpose",
        help_text='What the agents should work out, such as "Dinner on Friday".',
        error_messages={
            "required": 'Say what the room is for, such as "Dinner on Friday".',
            "max_length": "Keep the purpose to 200 characters or fewer.",
        },
    )
    charter = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}),
        required=False,
        max_length=settings.SYNAPSIA["MAX_CHARTER_CHARS"],
        label="Charter (optional)",
        help_text="Ground rules both agents read at every turn.",
        error_messages={
            "max_length": f"Keep the charter to {settings.SYNAPSIA['MAX_CHARTER_CHARS']} "
            "characters or fewer.",
        },
    )


class BindAgentForm(forms.Form):
    agent = forms.ChoiceField(
        choices=[],
        label="Your agent for this room",
        help_text="It speaks for you in this room.",
    )

    def __init__(self, *args: object, agents: list[tuple[str, str]], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["agent"].choices = agents  # type: ignore[attr-defined]


# --- the vault: one form per kind --------------------------------------------------------------
# Each form turns what the owner typed into one vault item's content, in the units the vault
# keeps (minor units for money), and back again for editing. The rules (which allergens, which
# neighbourhoods) stay in ``slips.vault``; these forms only read the owner's input.


def _list_items(text: str) -> list[str]:
    """Items typed one per line or separated by commas, trimmed, repeats dropped."""
    seen: dict[str, str] = {}
    for part in text.replace("\n", ",").split(","):
        item = " ".join(part.split())
        if item:
            seen.setdefault(item.casefold(), item)
    return list(seen.values())


class VaultItemForm(forms.Form):
    """The form for one vault kind: ``content()`` after ``is_valid()``; ``initial_of`` for
    editing a stored item."""

    kind: ClassVar[str]
    title: ClassVar[str]

    def content(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def initial_of(cls, content: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in content.items() if k != "kind"}


def _whole_amount(label: str) -> forms.IntegerField:
    return forms.IntegerField(
        label=label,
        min_value=0,
        max_value=10**9,
        widget=forms.NumberInput(attrs={"min": "0", "step": "1", "inputmode": "numeric"}),
        error_messages={
            "required": f"Enter the {label.lower()} as a whole number, such as 30.",
            "invalid": f"Enter the {label.lower()} as a whole number, such as 30 (no letters "
            "or cents).",
            "min_value": f"The {label.lower()} cannot be below zero.",
            "max_value": f"The {label.lower()} is too large.",
        },
    )


class BudgetForm(VaultItemForm):
    kind = "budget"
    title = "Budget per person"

    currency = forms.ChoiceField(choices=[(c, c) for c in FORM_CURRENCIES], initial="EUR")
    minimum = _whole_amount("Lowest amount")
    maximum = _whole_amount("Highest amount")
    notes = forms.CharField(
        label="Private note",
        required=False,
        max_length=500,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Only you see this; no slip shares it.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["minimum"].help_text = "Whole units per person: 30 means 30.00."
        # An item saved through the API may use a currency the form does not list.
        current = self.initial.get("currency")
        choices = list(self.fields["currency"].choices)  # type: ignore[attr-defined]
        if current and (current, current) not in choices:
            self.fields["currency"].choices = [*choices, (current, current)]  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        low, high = data.get("minimum"), data.get("maximum")
        if low is not None and high is not None and high < low:
            self.add_error(
                "maximum",
                f"The highest amount ({high}) is below the lowest ({low}); enter the lower "
                "amount first.",
            )
        return data

    def content(self) -> dict[str, Any]:
        currency = self.cleaned_data["currency"]
        return {
            "kind": self.kind,
            "currency": currency,
            "minimum": whole_units_to_minor(self.cleaned_data["minimum"], currency),
            "maximum": whole_units_to_minor(self.cleaned_data["maximum"], currency),
            "notes": self.cleaned_data["notes"],
        }

    @classmethod
    def initial_of(cls, content: dict[str, Any]) -> dict[str, Any]:
        # Back to whole units; an amount with cents (only the API makes those) rounds outward.
        per_unit = minor_per_unit(content["currency"])
        return {
            "currency": content["currency"],
            "minimum": content["minimum"] // per_unit,
            "maximum": -(-content["maximum"] // per_unit),
            "notes": content.get("notes", ""),
        }


class _FoodListForm(VaultItemForm):
    items = forms.CharField(
        label="Cuisines or dishes",
        widget=forms.Textarea(attrs={"rows": 3}),
        max_length=4000,
        help_text="One per line, or separated by commas.",
        error_messages={"required": "Enter at least one cuisine or dish."},
    )

    def __init__(self, *args: Any, cuisines: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if cuisines:
            self.fields["items"].help_text += " Cuisines the venues offer: " + ", ".join(cuisines)

    def clean_items(self) -> list[str]:
        items = _list_items(self.cleaned_data["items"])
        if not items:
            raise forms.ValidationError("Enter at least one cuisine or dish.")
        if len(items) > 50:
            raise forms.ValidationError("Enter at most 50 items.")
        long = [i for i in items if len(i) > 80]
        if long:
            raise forms.ValidationError(f"Keep each item under 80 characters ({long[0][:20]}…).")
        return items

    def content(self) -> dict[str, Any]:
        return {"kind": self.kind, "items": self.cleaned_data["items"]}

    @classmethod
    def initial_of(cls, content: dict[str, Any]) -> dict[str, Any]:
        return {"items": "\n".join(content["items"])}


class FoodLikesForm(_FoodListForm):
    kind = "food_likes"
    title = "Food you like"


class FoodDislikesForm(_FoodListForm):
    kind = "food_dislikes"
    title = "Food you would rather not eat"


class AllergiesForm(VaultItemForm):
    kind = "allergies"
    title = "Allergies"

    items = forms.MultipleChoiceField(
        label="Allergies",
        required=False,
        choices=[(a, a.replace("-", " ")) for a in ALLERGENS],
        widget=forms.CheckboxSelectMultiple,
        help_text="Saved with nothing checked, this says you have none.",
        error_messages={"invalid_choice": "%(value)s is not one of the allergens listed."},
    )

    def content(self) -> dict[str, Any]:
        return {"kind": self.kind, "items": self.cleaned_data["items"]}


class NeighbourhoodForm(VaultItemForm):
    kind = "neighbourhood"
    title = "Home neighbourhood"

    # A text value under a select: ``slips.vault`` checks it against the cities (in words).
    name = forms.CharField(label="Neighbourhood", max_length=120)

    def __init__(
        self, *args: Any, cities: Sequence[tuple[str, list[tuple[str, str]]]] = (), **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        choices: list[Any] = [("", "Choose…"), *cities]
        self.fields["name"].widget = forms.Select(choices=choices)
        self.fields["name"].error_messages["required"] = "Choose your neighbourhood."

    def content(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.cleaned_data["name"]}


class LinkForm(VaultItemForm):
    kind = "link"
    title = "A link"

    url = forms.URLField(
        label="Address (https://…)",
        max_length=2000,
        assume_scheme="https",
        error_messages={"invalid": "Enter a web address such as https://example.org."},
    )
    label = forms.CharField(label="What it is", required=False, max_length=120)

    def content(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "url": self.cleaned_data["url"],
            "label": self.cleaned_data["label"],
        }


class NoteForm(VaultItemForm):
    kind = "note"
    title = "A note"

    text = forms.CharField(label="Note", max_length=4000, widget=forms.Textarea(attrs={"rows": 3}))

    def content(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.cleaned_data["text"]}


VAULT_FORMS: dict[str, type[VaultItemForm]] = {
    f.kind: f
    for f in (
        BudgetForm,
        FoodLikesForm,
        FoodDislikesForm,
        AllergiesForm,
        NeighbourhoodForm,
        LinkForm,
        NoteForm,
    )
}


class BusyBlockForm(forms.Form):
    """One busy time added by hand, in the owner's local time (Django's current time zone,
    which ``forms.DateTimeField`` reads naive input in)."""

    start = forms.DateTimeField(
        label="Busy from",
        input_formats=["%Y-%m-%dT%H:%M"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        error_messages={
            "required": "Enter when the busy time starts (a date and a time).",
            "invalid": "Enter the start as a date and a time, such as 2030-03-25 09:00.",
        },
    )
    end = forms.DateTimeField(
        label="Until",
        input_formats=["%Y-%m-%dT%H:%M"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        error_messages={
            "required": "Enter when the busy time ends (a date and a time).",
            "invalid": "Enter the end as a date and a time, such as 2030-03-25 10:30.",
        },
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        start, end = data.get("start"), data.get("end")
        if start is not None and end is not None and end <= start:
            self.add_error("end", "The busy time must end after it starts; check the end time.")
        return data

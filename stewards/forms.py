"""The owner's exit-note and report forms (choices from ``stewards.themes``)."""

from __future__ import annotations

from django import forms

from stewards.themes import EXIT_NOTE_MAX_CHARS, EXIT_NOTE_THEMES, REPORT_MAX_CHARS, REPORT_REASONS


class ExitNoteForm(forms.Form):
    themes = forms.MultipleChoiceField(
        choices=list(EXIT_NOTE_THEMES.items()),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="What was the room like?",
    )
    text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        max_length=EXIT_NOTE_MAX_CHARS,
        label="Anything else (optional)",
        help_text="Only you read this. The operator sees the themes you ticked, counted together"
        " with other rooms, never these words.",
        error_messages={"max_length": f"Keep it to {EXIT_NOTE_MAX_CHARS} characters or fewer."},
    )

    def clean(self) -> dict[str, object]:
        cleaned = super().clean() or {}
        if not cleaned.get("themes") and not (cleaned.get("text") or "").strip():
            raise forms.ValidationError("Tick at least one theme or write a few words.")
        return cleaned


class ReportForm(forms.Form):
    reason = forms.ChoiceField(
        choices=[("", "Choose a reason"), *REPORT_REASONS.items()],
        label="Why are you reporting this room?",
        error_messages={
            "required": "Choose the reason that fits best.",
            "invalid_choice": "Choose a reason from the list.",
        },
    )
    text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        max_length=REPORT_MAX_CHARS,
        label="What happened (optional)",
        help_text="The operator will read this, the room's transcript as you see it and its"
        " ledger. Not your whispers or anyone's vault.",
        error_messages={"max_length": f"Keep it to {REPORT_MAX_CHARS} characters or fewer."},
    )

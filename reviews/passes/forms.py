"""The dashboard's hand-off form: the API's choices (reviews/passes/api/serializers.py)
as one form. It checks shapes only; `handoff.task_create` and `handoff.task_handoff`
check meaning, as they do for the API."""

from __future__ import annotations

import re

from django import forms

from repos.models import Reviewer, ReviewSkill
from reviews.models import AUTHOR_SILENCE_RANGE, MAX_PASSES_RANGE


def _names(text: str) -> list[str]:
    """Names one a line or separated by commas, blanks dropped."""
    return [name.strip() for name in re.split(r"[,\n]", text or "") if name.strip()]


class HandoffForm(forms.Form):
    title = forms.CharField(max_length=300)
    description = forms.CharField(
        max_length=8000,
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="What the task is for: the reviewer judges “the task not done” against it.",
    )
    author_name = forms.CharField(max_length=200, label="Author")
    author_login = forms.CharField(
        max_length=100,
        required=False,
        label="Author's GitHub login",
        help_text="Its own comments are not feedback.",
    )
    pull_requests = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="owner/repo#number, one a line: pull requests the author's App opened.",
    )
    enabled = forms.BooleanField(required=False, initial=True, label="Review passes")
    reviewer = forms.ChoiceField(required=False)
    model = forms.ChoiceField(required=False, help_text="One of the reviewer's models.")
    skill = forms.ChoiceField(required=False, label="Review skill")
    max_passes = forms.IntegerField(
        min_value=MAX_PASSES_RANGE[0], max_value=MAX_PASSES_RANGE[1], initial=3
    )
    counted_bots = forms.CharField(
        required=False,
        help_text="Bots whose comments reach the author like people's (comma-separated).",
    )
    required_checks = forms.CharField(
        required=False,
        help_text="Checks that must be green, where branch protection names none.",
    )
    author_silence_minutes = forms.IntegerField(
        required=False,
        min_value=AUTHOR_SILENCE_RANGE[0],
        max_value=AUTHOR_SILENCE_RANGE[1],
        help_text="Empty: the site's TASUKU_AUTHOR_SILENCE_MINUTES.",
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        reviewers = list(Reviewer.objects.filter(enabled=True).order_by("slug"))
        default = next((r for r in reviewers if r.default_for_passes), None)
        self.fields["reviewer"].choices = [
            ("", f"the default for review passes ({default.slug})" if default else "—")
        ] + [(r.slug, r.slug) for r in reviewers]
        # The choices the API allows, offered whole: the service checks the pair.
        self.fields["model"].choices = [("", "the reviewer's configured model")] + [
            (model, f"{model} ({r.slug})") for r in reviewers for model in r.models_allowed
        ]
        skills = ReviewSkill.objects.prefetch_related("reviewers").order_by("name")
        self.fields["skill"].choices = [("", "none")] + [
            (s.name, f"{s.name} ({', '.join(r.slug for r in s.reviewers.all()) or 'any reviewer'})")
            for s in skills
        ]

    def clean_pull_requests(self) -> list[str]:
        return _names(self.cleaned_data["pull_requests"])

    def clean_counted_bots(self) -> list[str]:
        return _names(self.cleaned_data["counted_bots"])

    def clean_required_checks(self) -> list[str]:
        return _names(self.cleaned_data["required_checks"])

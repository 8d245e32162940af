"""The Django admin is how an operator configures Tasuku."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.db import models
from django.db.models import Count, F, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.html import escape, format_html, format_html_join
from django.utils.translation import ngettext

from repos.connectors.models import Connector
from repos.github import caches_clear, registration_forget
from repos.models import (
    AppRegistration,
    Installation,
    RepoMemory,
    Repository,
    RepositoryPolicy,
    Reviewer,
    ReviewerRevision,
    ReviewSkill,
    SecondaryRepository,
    Skill,
)
from repos.reviewer_sources import SourceError, source_problems
from repos.reviewer_sync import reviewer_sync
from repos.services import policy_copy, policy_create_default, revision_record
from sandbox.contract import MAX_CONNECTORS, MAX_SKILLS
from sandbox.engines import REGISTRY


@admin.register(AppRegistration)
class AppRegistrationAdmin(admin.ModelAdmin):
    """The App created on the setup page: shown (never its sealed secrets), and removed
    to replace it — the setup page then creates another. Deleting it here leaves the
    App on GitHub, which its own settings page deletes."""

    list_display = ("slug", "app_id", "owner", "api_url", "created_at")
    fields = ("slug", "name", "app_id", "owner", "html_url", "api_url", "client_id", "created_at")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # created on the setup page, from GitHub's answer

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def delete_model(self, request: HttpRequest, obj: AppRegistration) -> None:
        super().delete_model(request, obj)
        _app_forget()

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        super().delete_queryset(request, queryset)
        _app_forget()


def _app_forget() -> None:
    """This process reads the App afresh (others within REGISTRATION_TTL)."""
    registration_forget()
    caches_clear()


@admin.register(Installation)
class InstallationAdmin(admin.ModelAdmin):
    list_display = (
        "account_login",
        "github_id",
        "account_type",
        "repository_count",
        "monthly_budget_usd",
        "suspended_at",
        "removed_at",
    )
    list_filter = ("account_type", ("suspended_at", admin.EmptyFieldListFilter))
    search_fields = ("account_login", "=github_id")
    readonly_fields = (
        "github_id",
        "account_login",
        "account_type",
        "repository_selection",
        "permissions",
        "suspended_at",
        "removed_at",
        "created_at",
        "updated_at",
    )
    fieldsets = (
        (None, {"fields": ("account_login", "github_id", "account_type", "repository_selection")}),
        ("Budget", {"fields": ("monthly_budget_usd", "degrade_over_budget")}),
        ("Scope", {"fields": ("excluded_paths",)}),
        (
            "State",
            {"fields": ("permissions", "suspended_at", "removed_at", "created_at", "updated_at")},
        ),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).annotate(_repositories=Count("repositories"))

    @admin.display(description="repositories", ordering="_repositories")
    def repository_count(self, obj: Installation) -> int:
        return obj._repositories

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # installations come from GitHub's installation events


class PlainHelpTextForm(forms.ModelForm):
    """The admin shows help text as HTML: each field's is escaped here, so that a
    placeholder such as `@<app> dismiss <reason>` shows as written instead of vanishing
    as an unknown tag."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            if field.help_text:
                field.help_text = escape(field.help_text)


class RepositoryPolicyInline(admin.StackedInline):
    model = RepositoryPolicy
    form = PlainHelpTextForm
    can_delete = False
    min_num = 1
    max_num = 1
    filter_horizontal = ("reviewers",)
    fieldsets = (
        (
            "Triggers",
            {
                "fields": (
                    ("trigger_opened", "trigger_reopened"),
                    ("trigger_ready_for_review", "trigger_synchronize"),
                    "review_drafts",
                )
            },
        ),
        (
            "Reviewers",
            {"fields": ("reviewers", "strictness", "triage_enabled", "runner", "static_rules")},
        ),
        ("Scope", {"fields": ("max_changed_files", "excluded_paths", "excluded_authors")}),
        (
            "Publication and the merge gate",
            {
                "fields": (
                    "comment_limit",
                    "min_severity",
                    "fail_check_on",
                    "auto_approve",
                    "approve_with_nits",
                    "author_may_dismiss",
                    "honour_pr_suppressions",
                    "walkthrough",
                    "fix_pull_requests",
                )
            },
        ),
        (
            "The pull request's own tests",
            {
                "fields": (
                    "tests_enabled",
                    "tests_command",
                    ("tests_runner", "tests_image"),
                    ("tests_timeout_seconds", "tests_network"),
                )
            },
        ),
    )


class RepoMemoryForm(forms.ModelForm):
    """An operator's edit of the memory is theirs: later folds start from it, and the
    tally of outcomes no longer overwrites it."""

    class Meta:
        model = RepoMemory
        fields = ("text",)
        widgets = {"text": forms.Textarea(attrs={"rows": 8})}

    def save(self, commit: bool = True) -> RepoMemory:
        memory = super().save(commit=False)
        if "text" in self.changed_data:
            memory.source = RepoMemory.Source.PERSON
            # A fold that read the memory before this edit writes nothing (reviews/memory/folds.py).
            memory.version = F("version") + 1
        if commit:
            memory.save()
        return memory


class RepoMemoryInline(admin.StackedInline):
    model = RepoMemory
    form = RepoMemoryForm
    can_delete = False
    max_num = 1
    readonly_fields = ("source", "updated_at")
    fields = ("text", "source", "updated_at")
    verbose_name = "memory (what later reviews are told about this team's habits, as data)"


class SecondaryRepositoryInline(admin.TabularInline):
    model = SecondaryRepository
    extra = 0


class CopyPolicyForm(forms.Form):
    source = forms.ModelChoiceField(
        queryset=Repository.objects.filter(policy__isnull=False),
        help_text="Its policy and reviewers are copied to every selected repository.",
    )


@admin.register(Repository)
class RepositoryAdmin(admin.ModelAdmin):
    list_display = (
        "full_name",
        "enabled",
        "installation",
        "policy_reviewers",
        "policy_strictness",
        "private",
        "removed_at",
    )
    list_filter = ("enabled", "private", "installation", ("removed_at", admin.EmptyFieldListFilter))
    list_editable = ("enabled",)
    search_fields = ("full_name",)
    readonly_fields = (
        "github_id",
        "installation",
        "full_name",
        "private",
        "default_branch",
        "removed_at",
    )
    inlines = (RepositoryPolicyInline, SecondaryRepositoryInline, RepoMemoryInline)
    actions = ("enable_reviews", "disable_reviews", "copy_policy")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return (
            super()
            .get_queryset(request)
            .select_related("installation", "policy")
            .prefetch_related("policy__reviewers")
        )

    @admin.display(description="reviewers")
    def policy_reviewers(self, obj: Repository) -> str:
        policy = getattr(obj, "policy", None)
        return ", ".join(r.slug for r in policy.reviewers.all()) if policy else "—"

    @admin.display(description="strictness")
    def policy_strictness(self, obj: Repository) -> str:
        policy = getattr(obj, "policy", None)
        return policy.strictness if policy else "—"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # repositories come from GitHub's installation events

    @admin.action(description="Enable reviews on the selected repositories")
    def enable_reviews(self, request: HttpRequest, queryset: QuerySet) -> None:
        count = queryset.update(enabled=True)
        self.message_user(request, f"Reviews enabled on {count} repositories.", messages.SUCCESS)

    @admin.action(description="Disable reviews on the selected repositories")
    def disable_reviews(self, request: HttpRequest, queryset: QuerySet) -> None:
        count = queryset.update(enabled=False)
        self.message_user(request, f"Reviews disabled on {count} repositories.", messages.SUCCESS)

    @admin.action(description="Copy another repository's policy to the selected repositories")
    def copy_policy(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse | None:
        form = CopyPolicyForm(request.POST if "apply" in request.POST else None)
        if "apply" in request.POST and form.is_valid():
            source = form.cleaned_data["source"]
            count = policy_copy(source=source.policy, targets=queryset)
            self.message_user(
                request,
                f"Copied the policy of {source} to {count} repositories.",
                messages.SUCCESS,
            )
            return None
        return TemplateResponse(
            request,
            "admin/repos/repository/copy_policy.html",
            {
                **self.admin_site.each_context(request),
                "title": "Copy a repository's policy",
                "form": form,
                "targets": queryset,
                "opts": self.model._meta,
                "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
            },
        )


def _formfield(field: models.Field, **kwargs):
    # A bare host typed as a base URL means https:// (Django 6's default, chosen now).
    if isinstance(field, models.URLField):
        kwargs.setdefault("assume_scheme", "https")
    return field.formfield(**kwargs)


class ReviewerForm(forms.ModelForm):
    """The API key is write-only: never shown again, kept when left blank."""

    api_key = forms.CharField(
        label="API key",
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=(
            "The provider's key for this reviewer, stored encrypted. Leave blank to keep the "
            "saved key; empty and none saved: ANTHROPIC_API_KEY / OPENAI_API_KEY."
        ),
    )
    clear_api_key = forms.BooleanField(label="Remove the saved key", required=False)
    source_token = forms.CharField(
        label="Deploy token",
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=(
            "A token that may read the reviewers repository (a fine-grained token with "
            "Contents: read), stored encrypted and sent as an HTTP header. Leave blank to "
            "keep the saved one; none for a public repository."
        ),
    )
    clear_source_token = forms.BooleanField(label="Remove the saved token", required=False)

    class Meta:
        model = Reviewer
        formfield_callback = _formfield
        fields = (
            "slug",
            "name",
            "enabled",
            "default_for_new_repositories",
            "default_for_passes",
            "engine",
            "model",
            "triage_model",
            "explorer_model",
            "runner",
            "base_url",
            "rules",
            "skills",
            "web_research",
            "connectors",
            "step_limit",
            "cost_cap_usd",
            "context_budget_tokens",
            "max_output_tokens",
            "explorer_limit",
            "source_url",
            "source_path",
            "source_ref",
        )

    def clean(self) -> dict:
        data = super().clean()
        url = data.get("source_url", "")
        if url:
            for problem in source_problems(
                url,
                data.get("source_path", ""),
                data.get("source_ref", ""),
                allow_file=settings.TASUKU_REVIEWER_SOURCE_ALLOW_FILE,
            ):
                self.add_error("source_url", problem)
        connectors = data.get("connectors")
        engine = data.get("engine")
        if connectors and engine in REGISTRY and not REGISTRY[engine].connectors:
            self.add_error(
                "connectors",
                f"Connectors are the model engines' tools: the {engine} engine calls no model "
                "and cannot call them.",
            )
        if connectors and len(connectors) > MAX_CONNECTORS:
            self.add_error("connectors", f"At most {MAX_CONNECTORS} connectors a reviewer.")
        if data.get("default_for_passes"):
            other = (
                Reviewer.objects.filter(default_for_passes=True)
                .exclude(pk=self.instance.pk)
                .first()
            )
            if other is not None:
                self.add_error(
                    "default_for_passes",
                    f"{other.slug} is the default for review passes: untick it there first.",
                )
        return data

    def save(self, commit: bool = True) -> Reviewer:
        reviewer = super().save(commit=False)
        if self.cleaned_data.get("clear_api_key"):
            reviewer.api_key_set("")
        elif self.cleaned_data.get("api_key"):
            reviewer.api_key_set(self.cleaned_data["api_key"])
        if self.cleaned_data.get("clear_source_token"):
            reviewer.source_token_set("")
        elif self.cleaned_data.get("source_token"):
            reviewer.source_token_set(self.cleaned_data["source_token"])
        if commit:
            reviewer.save()
            self.save_m2m()
        return reviewer


class SkillInline(admin.StackedInline):
    """A reviewer's named skills, edited on the reviewer."""

    model = Skill
    extra = 0
    max_num = MAX_SKILLS
    fields = ("name", "description", "body")
    verbose_name = "skill"
    # The inline's heading is the plural (Django would make "…it)s" of a long singular).
    verbose_name_plural = "skills (each loaded by the model when it needs it)"

    # A reviewer synced from a reviewers repository has the file's skills: shown, not
    # edited here (the next sync would undo the edit, and no revision would say so).
    def has_add_permission(self, request: HttpRequest, obj: Reviewer | None = None) -> bool:
        return not (obj and obj.synced) and super().has_add_permission(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Reviewer | None = None) -> bool:
        return not (obj and obj.synced) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Reviewer | None = None) -> bool:
        return not (obj and obj.synced) and super().has_delete_permission(request, obj)


@admin.register(Reviewer)
class ReviewerAdmin(admin.ModelAdmin):
    form = ReviewerForm
    inlines = (SkillInline,)
    filter_horizontal = ("connectors",)
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    list_display = (
        "slug",
        "engine",
        "model",
        "runner",
        "enabled",
        "default_for_new_repositories",
        "default_for_passes",
        "step_limit",
        "cost_cap_usd",
        "has_own_key",
    )
    list_filter = ("engine", "runner", "enabled", "default_for_new_repositories")
    search_fields = ("slug", "name", "model")
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "slug",
                    "name",
                    "enabled",
                    "default_for_new_repositories",
                    "default_for_passes",
                )
            },
        ),
        ("Engine", {"fields": ("engine", "model", "triage_model", "explorer_model", "runner")}),
        ("Provider", {"fields": ("api_key", "clear_api_key", "base_url")}),
        ("Guidance", {"fields": ("rules", "skills")}),
        (
            "Reviewers repository (optional)",
            {
                "fields": (
                    "source_url",
                    "source_path",
                    "source_ref",
                    "source_token",
                    "clear_source_token",
                    "source_commit",
                    "source_synced_at",
                ),
                "description": (
                    "Rules, guidance and skills read from a TOML file in a git repository "
                    "(docs/reviewers.md). Save, then use the action “Sync from repository” "
                    "in the reviewers list."
                ),
            },
        ),
        ("Reach", {"fields": ("web_research", "connectors")}),
        (
            "Limits",
            {
                "fields": (
                    "step_limit",
                    "cost_cap_usd",
                    "context_budget_tokens",
                    "max_output_tokens",
                    "explorer_limit",
                )
            },
        ),
        ("Revisions", {"fields": ("revision_history",)}),
    )

    actions = ("enable_everywhere", "sync_from_repository")

    def get_readonly_fields(self, request: HttpRequest, obj: Reviewer | None = None):
        shown = ("source_commit", "source_synced_at", "revision_history")
        # Synced fields are the reviewers repository's: edited there, then synced.
        return ("rules", "skills", *shown) if obj and obj.synced else shown

    def save_related(self, request: HttpRequest, form, formsets, change: bool) -> None:
        """After the reviewer, its connectors and its skills are saved: its revision, if
        the definition changed (any change to what shapes its reviews makes one)."""
        super().save_related(request, form, formsets, change)
        revision_record(
            reviewer=form.instance,
            source=ReviewerRevision.Source.ADMIN,
            author=request.user.get_username(),
        )

    @admin.display(description="revisions")
    def revision_history(self, reviewer: Reviewer) -> str:
        if reviewer.pk is None:
            return "—"
        rows = reviewer.revisions.all()[:20]
        if not rows:
            return "none yet: the first run or save records one"
        return format_html(
            "<table><thead><tr><th>#</th><th>hash</th><th>by</th><th>when</th></tr></thead>"
            "<tbody>{}</tbody></table>",
            format_html_join(
                "",
                "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                (
                    (r.number, r.digest[:12], r.by, r.created_at.strftime("%Y-%m-%d %H:%M"))
                    for r in rows
                ),
            ),
        )

    @admin.action(description="Sync from repository", permissions=["change"])
    def sync_from_repository(self, request: HttpRequest, queryset: QuerySet) -> None:
        """Each chosen reviewer's rules, guidance and skills read from its reviewers
        repository (a new revision when they changed); one that cannot be read, or
        whose file is not a reviewer, is named with why and left as it was."""
        for reviewer in queryset.order_by("slug"):
            if not reviewer.synced:
                self.message_user(
                    request,
                    f"{reviewer.slug}: names no reviewers repository; nothing to sync.",
                    messages.WARNING,
                )
                continue
            try:
                revision, made = reviewer_sync(reviewer=reviewer)
            except SourceError as exc:
                self.message_user(
                    request, f"{reviewer.slug}: not synced, nothing changed. {exc}", messages.ERROR
                )
                continue
            self.message_user(
                request,
                f"{reviewer.slug}: "
                + (
                    f"revision {revision.number} ({revision.digest[:12]}) from "
                    if made
                    else f"unchanged at revision {revision.number}; "
                )
                + f"commit {reviewer.source_commit[:12]}.",
                messages.SUCCESS,
            )

    @admin.display(boolean=True, description="Own key")
    def has_own_key(self, reviewer: Reviewer) -> bool:
        return bool(reviewer.api_key_sealed)

    @admin.action(description="Enable on every repository", permissions=["change"])
    def enable_everywhere(self, request, queryset) -> None:
        """Add the chosen reviewers to the policy of every repository Tasuku knows (a
        default only reaches repositories learnt of later)."""
        policies = [
            policy_create_default(repository=repository)  # (a missing one with the defaults)
            for repository in Repository.objects.filter(removed_at__isnull=True)
        ]
        added = 0
        for reviewer in queryset:
            for policy in policies:
                if not policy.reviewers.filter(pk=reviewer.pk).exists():
                    policy.reviewers.add(reviewer)
                    added += 1
        names = ", ".join(r.slug for r in queryset)
        self.message_user(
            request,
            ngettext(
                "%(names)s: enabled on %(count)d more repository policy.",
                "%(names)s: enabled on %(count)d more repository policies.",
                added,
            )
            % {"names": names, "count": added},
        )


@admin.register(ReviewSkill)
class ReviewSkillAdmin(admin.ModelAdmin):
    """The review skills a review pass's task may name (`reviewer.skill` in its hand-off):
    the API refuses any other name, so the text here is the only skill text a reviewer
    is ever given for a task."""

    list_display = ("name", "reviewer_list", "created_at")
    search_fields = ("name", "text")
    filter_horizontal = ("reviewers",)
    fields = ("name", "text", "reviewers")

    @admin.display(description="Reviewers")
    def reviewer_list(self, skill: ReviewSkill) -> str:
        return ", ".join(r.slug for r in skill.reviewers.all()) or "every reviewer"

    def get_queryset(self, request: HttpRequest) -> QuerySet[ReviewSkill]:
        return super().get_queryset(request).prefetch_related("reviewers")


class ConnectorForm(forms.ModelForm):
    """The credential is write-only, like a reviewer's key: stored sealed, never shown
    again, kept when left blank."""

    credential = forms.CharField(
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=(
            "The header's whole value, e.g. `Bearer eyJ…` or an API key; stored encrypted and "
            "sent only to the allowed hosts. Never given to the engine, never in a transcript "
            "or a log. Leave blank to keep the saved one."
        ),
    )
    clear_credential = forms.BooleanField(label="Remove the saved credential", required=False)

    class Meta:
        model = Connector
        fields = (
            "name", "kind", "enabled", "description", "input_schema", "method", "url_template",
            "body_template", "credential_header", "allowed_hosts", "timeout_seconds",
            "max_response_bytes",
        )  # fmt: skip
        widgets = {
            "description": forms.Textarea(attrs={"rows": 3}),
            "input_schema": forms.Textarea(attrs={"rows": 8, "class": "vLargeTextField"}),
            "body_template": forms.Textarea(attrs={"rows": 4}),
            "allowed_hosts": forms.Textarea(attrs={"rows": 3}),
        }

    def save(self, commit: bool = True) -> Connector:
        connector = super().save(commit=False)
        if self.cleaned_data.get("clear_credential"):
            connector.credential_set("")
        elif self.cleaned_data.get("credential"):
            connector.credential_set(self.cleaned_data["credential"])
        if commit:
            connector.save()
            self.save_m2m()
        return connector


@admin.register(Connector)
class ConnectorAdmin(admin.ModelAdmin):
    form = ConnectorForm
    list_display = ("name", "kind", "method", "endpoint", "enabled", "has_credential", "used_by")
    list_filter = ("kind", "enabled")
    search_fields = ("name", "description", "url_template")
    fieldsets = (
        (None, {"fields": ("name", "kind", "enabled", "description", "input_schema")}),
        (
            "Endpoint (HTTP connectors)",
            {"fields": ("method", "url_template", "body_template", "allowed_hosts")},
        ),
        ("Credential", {"fields": ("credential_header", "credential", "clear_credential")}),
        ("Bounds", {"fields": ("timeout_seconds", "max_response_bytes")}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).prefetch_related("reviewers")

    @admin.display(description="endpoint")
    def endpoint(self, connector: Connector) -> str:
        return "GitHub, through the App" if connector.built_in else connector.url_template

    @admin.display(boolean=True, description="Credential")
    def has_credential(self, connector: Connector) -> bool:
        return bool(connector.credential_sealed)

    @admin.display(description="reviewers")
    def used_by(self, connector: Connector) -> str:
        return ", ".join(r.slug for r in connector.reviewers.all()) or "—"

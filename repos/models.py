"""Installations, repositories and how each repository is reviewed. (Connectors, which
reviewers may call, are in repos/connectors/models.py.)"""

from __future__ import annotations

import re

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import (
    MaxLengthValidator,
    MaxValueValidator,
    MinValueValidator,
    RegexValidator,
)
from django.db import models

from repos.connectors.models import Connector
from repos.credentials import key_open, key_seal
from repos.policy import (
    CODE_ENGINES,
    COMMENT_LIMIT_RANGE,
    LOCAL_CODE_REFUSED,
    MAX_CHANGED_FILES_RANGE,
    NEVER,
    TESTS_TIMEOUT_RANGE,
    Defaults,
    Engine,
    Runner,
    Strictness,
    glob_errors,
    lines,
)
from sandbox.contract import (
    MAX_OUTPUT_TOKENS,
    MAX_SKILL_BODY,
    MAX_SKILL_DESCRIPTION,
    SKILL_NAME,
    Severity,
)
from sandbox.engines import REGISTRY
from sandbox.prices import price_for, prices_parse

SEVERITY_CHOICES = [(s.value, s.value) for s in Severity]
FAIL_CHECK_CHOICES = [*SEVERITY_CHOICES, (NEVER, "never (findings never fail the check)")]


# The installation command-line reviews are recorded under (`manage.py review`:
# reviews/local/review.py, reviews/local/remote.py); no GitHub installation has this id.
LOCAL_INSTALLATION = 0


class AppRegistration(models.Model):
    """The GitHub App Tasuku created from a manifest (the setup page, repos/setup.py): its
    credentials, sealed with SECRET_KEY. Used when the GITHUB_APP_ID, GITHUB_PRIVATE_KEY*
    and GITHUB_WEBHOOK_SECRET settings are all unset (settings win); the newest row is
    the App."""

    app_id = models.BigIntegerField()
    slug = models.CharField(max_length=100)
    name = models.CharField(max_length=200, blank=True)
    owner = models.CharField(max_length=100, blank=True, help_text="The account that owns it.")
    html_url = models.URLField(max_length=500, blank=True)
    api_url = models.URLField(max_length=500, help_text="GitHub's REST API, where it lives.")
    private_key_sealed = models.TextField()
    webhook_secret_sealed = models.TextField()
    client_id = models.CharField(max_length=100, blank=True)
    client_secret_sealed = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"GitHub App {self.slug} ({self.app_id})"


def _validate_globs(value: str) -> None:
    errors = glob_errors(lines(value))
    if errors:
        raise ValidationError("Not a valid gitignore pattern: " + "; ".join(errors))


class Installation(models.Model):
    """One installation of the GitHub App on a user or organisation account."""

    github_id = models.BigIntegerField(unique=True, help_text="GitHub's installation id.")
    account_login = models.CharField(max_length=100, blank=True)
    account_type = models.CharField(max_length=20, blank=True)
    repository_selection = models.CharField(max_length=20, blank=True)
    permissions = models.JSONField(default=dict, blank=True)
    suspended_at = models.DateTimeField(null=True, blank=True)
    removed_at = models.DateTimeField(
        null=True, blank=True, help_text="When the App was uninstalled; history is kept."
    )
    monthly_budget_usd = models.DecimalField(
        max_digits=10,
        decimal_places=2,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text="Monthly spending cap on model reviews; empty means no cap.",
    )
    degrade_over_budget = models.BooleanField(
        default=Defaults.DEGRADE_OVER_BUDGET,
        help_text="Past the cap, stop after triage and record the review incomplete.",
    )
    excluded_paths = models.TextField(
        blank=True,
        validators=[_validate_globs],
        help_text=(
            "One glob per line, gitignore semantics: not reviewed in any of this "
            "installation's repositories. A repository's own `!pattern` re-includes a path."
        ),
    )
    # GitHub rate-limited a call for this installation: every queue's work for it waits
    # until then (tasuku/durable.py), and the last wait is kept for the status page.
    quiet_until = models.DateTimeField(null=True, blank=True)
    quiet_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["account_login"]

    def __str__(self) -> str:
        return f"{self.account_login or 'installation'} ({self.github_id})"

    @property
    def active(self) -> bool:
        return self.suspended_at is None and self.removed_at is None


class Reviewer(models.Model):
    """A reviewer: an engine (and model) with its rules, skills and limits."""

    slug = models.SlugField(max_length=50, unique=True)
    name = models.CharField(max_length=100, blank=True)
    engine = models.CharField(max_length=20, choices=[(e.value, e.value) for e in Engine])
    runner = models.CharField(
        max_length=20, choices=[(r.value, r.value) for r in Runner], default=Runner.LOCAL.value
    )
    model = models.CharField(
        max_length=100, blank=True, help_text="Model name for model engines; empty for static."
    )
    rules = models.TextField(blank=True, help_text="What this reviewer must and must not raise.")
    skills = models.TextField(
        blank=True,
        verbose_name="guidance",
        help_text=(
            "Guidance always given to the reviewer, whole. For guidance that matters only "
            "to some changes, add named skills below: a model reviewer sees their names "
            "and descriptions and loads one when it needs it."
        ),
    )
    cost_cap_usd = models.DecimalField(
        max_digits=8,
        decimal_places=2,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text="Most one review may cost; empty means no cap.",
    )
    step_limit = models.PositiveIntegerField(
        default=40, validators=[MinValueValidator(1), MaxValueValidator(500)]
    )
    context_budget_tokens = models.PositiveIntegerField(
        default=120_000,
        validators=[MinValueValidator(1_000), MaxValueValidator(2_000_000)],
        help_text=(
            "Most diff tokens shown to the engine; the rest is named so it can read it "
            "itself. The default suits a 200k-token model."
        ),
    )
    triage_model = models.CharField(
        max_length=100,
        blank=True,
        help_text=(
            "A fast, cheap model of the same provider that triages a change before the deep "
            "review (trivial changes are then not reviewed in depth). Empty: the rule-based "
            "triage only."
        ),
    )
    max_output_tokens = models.PositiveIntegerField(
        default=16_000,
        validators=[
            MinValueValidator(MAX_OUTPUT_TOKENS[0]),
            MaxValueValidator(MAX_OUTPUT_TOKENS[1]),
        ],
        help_text=(
            "Most tokens the model may write in one turn (anthropic and openai engines). "
            "With a cost cap it bounds what the next call can cost: a call that could pass "
            "the cap is not made."
        ),
    )
    explorer_model = models.CharField(
        max_length=100,
        blank=True,
        help_text=(
            "A fast model of the same provider the reviewer may send to explore the "
            "repository and report back (anthropic and openai engines). Empty: no explorers."
        ),
    )
    explorer_limit = models.PositiveSmallIntegerField(
        default=6,
        validators=[MinValueValidator(1), MaxValueValidator(32)],
        help_text="Most explorers one review may send (at most four at once).",
    )
    web_research = models.BooleanField(
        default=False,
        help_text=(
            "Let the reviewer fetch public web pages (and search, with "
            "TASUKU_WEB_SEARCH_URL) during a review. Needs the local or actions runner: "
            "the docker runner's engine reaches nothing but the model API."
        ),
    )
    connectors = models.ManyToManyField(
        Connector,
        blank=True,
        related_name="reviewers",
        help_text=(
            "Connectors this reviewer may call (the model engines): tools that ask "
            "the team's systems, with Tasuku making each call and holding the credential."
        ),
    )
    api_key_sealed = models.TextField(blank=True, editable=False)
    base_url = models.URLField(
        max_length=300,
        blank=True,
        help_text=(
            "The API's address, when not the provider's own: an OpenAI-compatible server "
            "(vLLM, Ollama, LM Studio: e.g. http://gpu-box:8000/v1) for openai and codex, a "
            "gateway for anthropic. Empty: OPENAI_BASE_URL / ANTHROPIC_BASE_URL, else the "
            "provider."
        ),
    )
    enabled = models.BooleanField(default=True)
    default_for_new_repositories = models.BooleanField(
        default=False,
        help_text="Enabled on the policy of every repository Tasuku learns of from now on. "
        "Repositories it knows already keep their reviewers: to add this one to them, use "
        "the action “Enable on every repository” in the reviewers list.",
    )
    # Optionally, its rules, guidance and skills come from a reviewers repository
    # (repos/reviewer_sources.py; docs/reviewers.md): synced on demand, never from a
    # pull request's checkout.
    source_url = models.CharField(
        "reviewers repository",
        max_length=500,
        blank=True,
        help_text=(
            "An https git URL (e.g. https://github.com/acme/reviewers.git). Set, the rules, "
            "guidance and skills are read from it by “Sync from repository” (or "
            "`manage.py reviewers_sync`) and are read-only here. Empty: edited here."
        ),
    )
    source_path = models.CharField(
        "file in it",
        max_length=300,
        blank=True,
        help_text="The reviewer's TOML file in that repository, e.g. `reviewers/claude.toml`.",
    )
    source_ref = models.CharField(
        "branch or tag",
        max_length=200,
        blank=True,
        help_text="Empty: the repository's default branch.",
    )
    source_token_sealed = models.TextField(blank=True, editable=False)
    source_commit = models.CharField(
        max_length=40, blank=True, editable=False, help_text="The commit last synced."
    )
    source_synced_at = models.DateTimeField(null=True, blank=True, editable=False)
    default_for_passes = models.BooleanField(
        default=False,
        verbose_name="default for review passes",
        help_text=(
            "The reviewer a review-pass hand-off that names none gets (over the API or on "
            "the dashboard's hand-off form). One reviewer at most."
        ),
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.UniqueConstraint(
                fields=["default_for_passes"],
                condition=models.Q(default_for_passes=True),
                name="reviewer_one_default_for_passes",
                violation_error_message=(
                    "Another reviewer is the default for review passes: untick it there first."
                ),
            )
        ]

    def __str__(self) -> str:
        return self.slug

    @property
    def synced(self) -> bool:
        """Its rules, guidance and skills come from a reviewers repository."""
        return bool(self.source_url)

    def source_token_set(self, token: str) -> None:
        self.source_token_sealed = key_seal(token)

    def source_token(self) -> str:
        """The reviewers repository's deploy token (raises KeyUnreadable if SECRET_KEY
        changed)."""
        return key_open(self.source_token_sealed)

    @property
    def provider(self) -> str:
        """Whose API the engine calls: "anthropic", "openai", or "" (static)."""
        return REGISTRY[Engine(self.engine)].provider_name

    @property
    def models_allowed(self) -> tuple[str, ...]:
        """The models a review pass's task may choose for this reviewer: the one it is
        configured with (the static engine has none)."""
        return (self.model,) if self.model and self.engine != Engine.STATIC else ()

    def api_key_set(self, key: str) -> None:
        self.api_key_sealed = key_seal(key)

    def api_key(self) -> str:
        """The reviewer's own key (raises KeyUnreadable if SECRET_KEY changed)."""
        return key_open(self.api_key_sealed)

    def clean(self) -> None:
        if self.engine != Engine.STATIC and not self.model:
            raise ValidationError({"model": f"The {self.engine} engine needs a model name."})
        if (
            self.engine in CODE_ENGINES
            and self.runner == Runner.LOCAL
            and not settings.TASUKU_ALLOW_CODE_ON_LOCAL_RUNNER
        ):
            raise ValidationError({"runner": LOCAL_CODE_REFUSED.format(engine=self.engine)})
        if self.engine == Engine.STATIC and (self.triage_model or self.base_url):
            raise ValidationError(
                "The static engine uses no model: leave the triage model and base URL empty."
            )
        tools = REGISTRY[Engine(self.engine)].tasuku_tools if self.engine else False
        if not tools and (self.explorer_model or self.web_research):
            raise ValidationError(
                "Explorers and web research are the anthropic and openai engines' tools: "
                f"the {self.engine} engine cannot use them."
            )
        if self.web_research and self.runner == Runner.DOCKER:
            raise ValidationError({"web_research": WEB_ON_DOCKER})
        if self.cost_cap_usd is not None and self.engine != Engine.STATIC:
            overrides = prices_parse(settings.TASUKU_MODEL_PRICES)
            for field, model in (
                ("cost_cap_usd", self.model),
                ("explorer_model", self.explorer_model),
            ):
                if model and price_for(model, overrides) is None:
                    raise ValidationError(
                        {
                            field: (
                                f"No price is known for {model!r}, so a cost cap cannot be "
                                "enforced: add it to TASUKU_MODEL_PRICES, or leave the cap empty."
                            )
                        }
                    )
            price = price_for(self.model, overrides)
            one_turn = (self.max_output_tokens or 0) * price.output_per_mtok / 1e6 if price else 0
            if self.cost_cap_usd < one_turn:
                raise ValidationError(
                    {
                        "cost_cap_usd": (
                            f"One turn of {self.max_output_tokens} output tokens could cost "
                            f"${one_turn:.2f}, more than the cap: no call would ever be made. "
                            "Raise the cap or lower the maximum output tokens."
                        )
                    }
                )


WEB_ON_DOCKER = (
    "The docker runner's engine reaches nothing but the model API, so it cannot research "
    "the web: use the local or actions runner for this reviewer, or leave web research off."
)


class ReviewerRevision(models.Model):
    """One version of a reviewer's definition (repos/revisions.py: what it holds),
    immutable: every change of it makes the next one (`repos.services.revision_record`),
    and every run records the one it was given."""

    class Source(models.TextChoices):
        ADMIN = "admin", "edited in the admin"
        SYNC = "sync", "synced from the reviewers repository"
        MIGRATION = "migration", "as it was when revisions began"
        OUTSIDE = "outside", "made outside the admin (recorded when a run used it)"

    reviewer = models.ForeignKey(Reviewer, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    digest = models.CharField(max_length=64, db_index=True, help_text="sha256 of the definition.")
    definition = models.JSONField()
    source = models.CharField(max_length=10, choices=Source.choices)
    # Who made it: the admin user's name, "sync", or empty (not known).
    author = models.CharField(max_length=150, blank=True)
    commit = models.CharField(
        max_length=40, blank=True, help_text="The reviewers repository's commit it was read at."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["reviewer", "-number"]
        constraints = [
            models.UniqueConstraint(
                fields=["reviewer", "number"], name="reviewer_revision_number_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.reviewer.slug} r{self.number} ({self.digest[:12]})"

    @property
    def by(self) -> str:
        """Who made it, in words."""
        if self.source == self.Source.SYNC:
            return f"sync ({self.commit[:12]})" if self.commit else "sync"
        return self.author or self.get_source_display()


class Skill(models.Model):
    """A named skill of a reviewer: a model reviewer's prompt lists its name and
    description, and the model loads the body when the change touches what it is about
    (`load_skill`); the CLI reviewers are given every body whole."""

    reviewer = models.ForeignKey(Reviewer, on_delete=models.CASCADE, related_name="skill_documents")
    name = models.CharField(
        max_length=64,
        validators=[RegexValidator(SKILL_NAME, "Lower-case letters, digits, - and _.")],
        help_text="What the model asks for, e.g. `django-migrations`.",
    )
    description = models.CharField(
        max_length=MAX_SKILL_DESCRIPTION,
        help_text="One line: when the skill applies. The model decides from this alone.",
    )
    body = models.TextField(
        validators=[MaxLengthValidator(MAX_SKILL_BODY)],
        help_text=f"The skill itself (at most {MAX_SKILL_BODY:,} characters).",
    )

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["reviewer", "name"], name="skill_name_per_reviewer")
        ]

    def __str__(self) -> str:
        return self.name


class ReviewSkillQuerySet(models.QuerySet):
    def for_reviewer(self, reviewer: Reviewer) -> ReviewSkillQuerySet:
        """The skills `reviewer` may use: those naming it, and those naming no reviewer."""
        return self.filter(models.Q(reviewers=None) | models.Q(reviewers=reviewer)).distinct()


class ReviewSkill(models.Model):
    """A review skill a review pass's task may name (docs/review-passes.md): written by an
    operator here, chosen by its name over the API. Its text joins the reviewer's
    guidance for that task's passes; a caller never writes a reviewer's instructions."""

    name = models.CharField(
        max_length=64,
        unique=True,
        validators=[RegexValidator(SKILL_NAME, "Lower-case letters, digits, - and _.")],
        help_text="What a task names, e.g. `3-tier-review`.",
    )
    text = models.TextField(
        validators=[MaxLengthValidator(MAX_SKILL_BODY)],
        help_text=(
            "The skill itself: given to the reviewer, whole, with its guidance on every pass "
            f"of a task that names it (at most {MAX_SKILL_BODY:,} characters)."
        ),
    )
    reviewers = models.ManyToManyField(
        Reviewer,
        blank=True,
        related_name="review_skills",
        help_text="The reviewers a task may name it with; none: every reviewer.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ReviewSkillQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Repository(models.Model):
    installation = models.ForeignKey(
        Installation, on_delete=models.CASCADE, related_name="repositories"
    )
    github_id = models.BigIntegerField(unique=True, help_text="GitHub's repository id.")
    full_name = models.CharField(max_length=200, db_index=True)
    private = models.BooleanField(default=False)
    default_branch = models.CharField(max_length=255, blank=True)
    enabled = models.BooleanField(default=True)
    removed_at = models.DateTimeField(
        null=True, blank=True, help_text="When the installation lost access; history is kept."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["full_name"]
        verbose_name_plural = "repositories"

    def __str__(self) -> str:
        return self.full_name

    @property
    def owner(self) -> str:
        return self.full_name.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.full_name.split("/", 1)[-1]

    @property
    def local(self) -> bool:
        """Reviewed from the command line (`manage.py review`: reviews/local/review.py,
        reviews/local/remote.py), never by the App: such a repository's id is negative, no
        GitHub repository's; it has no check runs, no webhook and no Review now."""
        return self.github_id < 0


def _validate_logins(value: str) -> None:
    bad = [line for line in lines(value) if not all(c.isalnum() or c in "-_[]*?." for c in line)]
    if bad:
        raise ValidationError(
            "Not a GitHub login or login pattern: " + ", ".join(repr(b) for b in bad)
        )


class RepositoryPolicy(models.Model):
    """How one repository is reviewed. New repositories get the site defaults."""

    repository = models.OneToOneField(Repository, on_delete=models.CASCADE, related_name="policy")

    trigger_opened = models.BooleanField("review when opened", default=True)
    trigger_reopened = models.BooleanField("review when reopened", default=True)
    trigger_ready_for_review = models.BooleanField("review when marked ready", default=True)
    trigger_synchronize = models.BooleanField("review every push", default=True)
    review_drafts = models.BooleanField(default=Defaults.REVIEW_DRAFTS)
    strictness = models.CharField(
        max_length=10,
        choices=[(s.value, s.value) for s in Strictness],
        default=Defaults.STRICTNESS.value,
        help_text="What is worth raising; never what is published.",
    )
    max_changed_files = models.PositiveIntegerField(
        default=Defaults.MAX_CHANGED_FILES,
        validators=[
            MinValueValidator(MAX_CHANGED_FILES_RANGE[0]),
            MaxValueValidator(MAX_CHANGED_FILES_RANGE[1]),
        ],
        help_text="Pull requests changing more files are not reviewed (the check says so).",
    )
    comment_limit = models.PositiveIntegerField(
        default=Defaults.COMMENT_LIMIT,
        validators=[
            MinValueValidator(COMMENT_LIMIT_RANGE[0]),
            MaxValueValidator(COMMENT_LIMIT_RANGE[1]),
        ],
        help_text="Most inline comments one review posts; the rest stay on the dashboard.",
    )
    excluded_paths = models.TextField(
        blank=True,
        validators=[_validate_globs],
        help_text="One glob per line, gitignore semantics; added to the default exclusions.",
    )
    excluded_authors = models.TextField(
        blank=True,
        validators=[_validate_logins],
        help_text="One GitHub login per line; `*` matches anything (e.g. `renovate*`).",
    )
    min_severity = models.CharField(
        max_length=10, choices=SEVERITY_CHOICES, default=Defaults.MIN_SEVERITY.value
    )
    fail_check_on = models.CharField(
        max_length=10,
        choices=FAIL_CHECK_CHOICES,
        default=Defaults.FAIL_CHECK_ON,
        help_text="The check run fails while an open finding reaches this severity.",
    )
    auto_approve = models.BooleanField(
        default=Defaults.AUTO_APPROVE,
        help_text="Approve when no Tasuku finding is open on the current head. Tasuku "
        "never merges.",
    )
    approve_with_nits = models.BooleanField(
        default=Defaults.APPROVE_WITH_NITS,
        help_text="With auto-approval: approve even while non-blocking findings (nits) are "
        "open. Off: any open finding withholds the approval.",
    )
    author_may_dismiss = models.BooleanField(
        default=Defaults.AUTHOR_MAY_DISMISS,
        help_text="The pull request's author may dismiss findings on it (resolving the "
        "thread, or `@<app> dismiss <reason>`). People with write access always may.",
    )
    honour_pr_suppressions = models.BooleanField(
        "Honour the pull request's own suppressions",
        default=Defaults.HONOUR_PR_SUPPRESSIONS,
        help_text="Off: a suppression comment the pull request adds itself (# noqa, "
        "# pragma: allowlist secret, # shellcheck disable=) keeps its finding open, shown "
        "as suppressed in this pull request, until someone with write access dismisses it. "
        "On: such a comment silences the finding. Suppressions the base branch already "
        "has are honoured either way. Review passes never honour them on blocking findings.",
    )
    static_rules = models.TextField(
        "Static reviewer's rules",
        blank=True,
        help_text="Rules the static reviewer adds to its defaults, or turns off: rule codes "
        "or prefixes, separated by commas or lines; a minus turns one off (e.g. `B904, "
        "S113, -F401`, `SC2016`, `DL3008`, `oxlint:eslint/no-console`, "
        "`-zizmor:unpinned-uses`). The defaults are chosen for precision (see the "
        "reviewers documentation); the repository's own ruff, flake8, shellcheck, "
        "ESLint/oxlint, hadolint and zizmor configuration, as its base branch has it, is "
        "honoured as well.",
    )
    triage_enabled = models.BooleanField(default=Defaults.TRIAGE_ENABLED)
    walkthrough = models.BooleanField(
        default=Defaults.WALKTHROUGH,
        help_text="One comment on each pull request, kept up to date: what changed, risk "
        "areas, what each reviewer reviewed and did not, and how its review ended.",
    )
    fix_pull_requests = models.BooleanField(
        "Propose one-click fixes as a pull request",
        default=Defaults.FIX_PULL_REQUESTS,
        help_text="After each review, the one-click suggestions still open are committed on "
        "a branch of Tasuku's (tasuku/fix/pr-<N>) and proposed as a pull request into the "
        "pull request's head branch, updated by later reviews and closed once nothing is "
        "left to fix. Never pushed to the author's branch, never for a fork. Needs the "
        "App's Contents: Read and write permission.",
    )
    runner = models.CharField(
        max_length=20,
        blank=True,
        choices=[("", "each reviewer's own")] + [(r.value, r.value) for r in Runner],
        help_text=(
            "Where this repository's reviews run, over each reviewer's runner: `actions` "
            "dispatches them to GitHub Actions runners in the repository."
        ),
    )
    reviewers = models.ManyToManyField(Reviewer, blank=True, related_name="policies")
    # The pull request's own tests after a review (docs/configuration.md, *The pull
    # request's own tests*): opt-in, on a runner that isolates them.
    tests_enabled = models.BooleanField(
        "Run the pull request's tests",
        default=False,
        help_text="After each review, run the pull request's own tests at its head in the "
        "sandbox and report them in a check run of their own (`Tasuku / tests`). The "
        "command is the one below, else the base branch's `.tasuku.toml` (`[tests] "
        "command`); a pull request's own changes to that file are ignored.",
    )
    tests_command = models.TextField(
        "Tests command",
        blank=True,
        help_text="Run with `sh -c` at the root of the checkout, e.g. `pytest -q "
        "--junitxml=$TASUKU_JUNIT`: a JUnit XML file written to `$TASUKU_JUNIT` names the "
        "failing tests. Empty: the base branch's `.tasuku.toml` gives it.",
    )
    tests_runner = models.CharField(
        "Tests runner",
        max_length=20,
        choices=[(r.value, r.value) for r in Runner],
        default=Runner.DOCKER.value,
        help_text="Only `docker` runs them: the `local` runner would run the pull request's "
        "code beside the worker's secrets, and is refused (the check says so).",
    )
    tests_image = models.CharField(
        "Tests image",
        max_length=255,
        blank=True,
        help_text="The Docker image the tests run in (it holds the project's toolchain); "
        "empty: TASUKU_TESTS_IMAGE.",
    )
    tests_timeout_seconds = models.PositiveIntegerField(
        "Tests time limit (seconds)",
        default=600,
        validators=[
            MinValueValidator(TESTS_TIMEOUT_RANGE[0]),
            MaxValueValidator(TESTS_TIMEOUT_RANGE[1]),
        ],
    )
    tests_network = models.BooleanField(
        "Tests may use the network",
        default=False,
        help_text="Off: the tests' container has no network at all. On: it joins "
        "TASUKU_TESTS_NETWORK (Docker's `bridge` unless set).",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "repository policies"

    def __str__(self) -> str:
        return f"policy of {self.repository}"

    def clean(self) -> None:
        known = {s.value for s in Severity}
        if (
            self.fail_check_on in known
            and self.min_severity in known
            and not Severity(self.fail_check_on).at_least(Severity(self.min_severity))
        ):
            raise ValidationError(
                {
                    "min_severity": (
                        f"A {self.fail_check_on} finding fails the check, but findings below "
                        f"{self.min_severity} are not published: the check would fail on a "
                        f"finding nobody can see. Set min severity to {self.fail_check_on} "
                        "or lower, or raise fail check on."
                    )
                }
            )
        wrong = [
            word
            for word in re.split(r"[\s,]+", self.static_rules or "")
            if word and not STATIC_RULE.fullmatch(word)
        ]
        if wrong:
            raise ValidationError(
                {
                    "static_rules": f"Not a rule code or prefix: {', '.join(wrong[:5])}. Use "
                    "ruff's, ShellCheck's and hadolint's codes (`B904`, `S1`, `SC2016`, "
                    "`DL3008`), or `oxlint:<rule>` and `zizmor:<audit>`, a minus before "
                    "one to turn it off."
                }
            )


# A rule code or prefix of the static reviewer's checkers (ruff's `B904`, `S1`, `F`;
# ShellCheck's `SC2016`), `-` before one to turn it off.
# ruff's, ShellCheck's (SC…) and hadolint's (DL…) codes, or an oxlint rule or a zizmor
# audit by name (`oxlint:eslint/no-console`, `zizmor:artipacked`).
STATIC_RULE = re.compile(r"-?(?:[A-Z]{1,4}[0-9]{0,4}|(?:oxlint|zizmor):[a-z0-9][a-z0-9/-]{0,80})")


class SecondaryRepository(models.Model):
    """Another repository mounted read-only beside the checkout, at a pinned commit."""

    repository = models.ForeignKey(
        Repository, on_delete=models.CASCADE, related_name="secondary_repositories"
    )
    full_name = models.CharField(
        max_length=200,
        validators=[
            RegexValidator(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$", "Use the form owner/name.")
        ],
    )
    pinned_commit = models.CharField(
        max_length=40,
        validators=[RegexValidator(r"^[0-9a-f]{40}$", "A full 40-character commit SHA.")],
    )
    approved = models.BooleanField(
        default=False, help_text="Only approved secondary repositories are mounted."
    )

    class Meta:
        verbose_name_plural = "secondary repositories"
        constraints = [
            models.UniqueConstraint(
                fields=["repository", "full_name"], name="secondary_repository_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.full_name}@{self.pinned_commit[:7]}"


class RepoMemory(models.Model):
    """What a repository's team does with findings, in a few lines given to later reviews
    (as data, fenced with the pull request's text). Written by the reviewer's fast model
    after each review (reviews/memory/folds.py), by the tally of outcomes where no model is
    configured, or by an operator in the admin; each writer starts from what is there."""

    class Source(models.TextChoices):
        TALLY = "tally", "the tally of outcomes"
        MODEL = "model", "folded by a model"
        PERSON = "person", "edited by an operator"

    repository = models.OneToOneField(Repository, on_delete=models.CASCADE, related_name="memory")
    text = models.TextField(blank=True)
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.TALLY)
    # Bumped by every write: a fold that read an older version writes nothing (it folds
    # again from what is there), so an operator's edit is never lost to a fold in flight.
    version = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "repository memories"

    def __str__(self) -> str:
        return f"memory of {self.repository}"


class GitHubApiUsage(models.Model):
    """What the gateway's calls to GitHub cost, per App and installation: a running count
    of calls and the rate limit GitHub reported on its latest answer. Processes count in
    memory and add their counts here (repos/github/usage.py, `github_usage_flush`), so
    every web and worker process, on any host, adds to the same figures (/metrics)."""

    app_id = models.CharField(max_length=40)
    # GitHub's installation id; 0 for the App's own calls (App JWT: tokens, permissions).
    installation_id = models.BigIntegerField()
    calls = models.BigIntegerField(default=0)
    errors = models.BigIntegerField(default=0)
    rate_limit_remaining = models.IntegerField(null=True, blank=True)
    rate_limit_limit = models.IntegerField(null=True, blank=True)
    rate_limit_reset = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        verbose_name = "GitHub API usage"
        verbose_name_plural = "GitHub API usage"
        constraints = [
            models.UniqueConstraint(
                fields=["app_id", "installation_id"], name="github_usage_unique"
            )
        ]

    def __str__(self) -> str:
        return f"App {self.app_id}, installation {self.installation_id}: {self.calls} calls"


class WriteBudget(models.Model):
    """One installation's writes to GitHub, shared by every process and host: its
    places under GitHub's per-minute and per-hour content-creation limits, the writes in
    flight, and any wait GitHub asked for (repos/github/budget.py holds its one update,
    under a row lock). Counts and waits are kept for the run page and /metrics."""

    app_id = models.CharField(max_length=40)
    # GitHub's installation id (the App's own calls are never paced: no row for them).
    installation_id = models.BigIntegerField()
    # The minute's bucket: its theoretical arrival time (epoch seconds; 0: full), when it
    # would be full again; the hour: when each write of the last hour went (epoch
    # seconds, places taken ahead among them) (repos/github/pacing.py, `place_find`).
    minute_tat = models.FloatField(default=0.0)
    hour_log = models.JSONField(default=list, blank=True)
    # Writes going now: holder -> epoch seconds its hold ends (a process that died while
    # writing frees its place then).
    in_flight = models.JSONField(default=dict, blank=True)
    # GitHub answered a rate limit (a Retry-After, a spent quota, a secondary limit):
    # no process writes for the installation before then.
    paused_until = models.DateTimeField(null=True, blank=True)
    pause_reason = models.TextField(blank=True)
    # The counts of the current minute and hour (fixed windows, for people to read).
    minute_started = models.DateTimeField(null=True, blank=True)
    minute_writes = models.IntegerField(default=0)
    hour_started = models.DateTimeField(null=True, blank=True)
    hour_writes = models.IntegerField(default=0)
    # Since the row was made: writes let through, those that waited, and how long.
    writes = models.BigIntegerField(default=0)
    waits = models.BigIntegerField(default=0)
    waited_seconds = models.FloatField(default=0.0)
    pauses = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["app_id", "installation_id"], name="write_budget_unique"
            )
        ]

    def __str__(self) -> str:
        return f"App {self.app_id}, installation {self.installation_id}: write budget"

"""Repository policy as plain data: the fixed scales, the site defaults, and the
effective configuration a review run receives.

Pure: no Django database access. `repos/selectors.py` loads the rows and calls
`config_merge`; every later stage receives the resulting `EffectiveConfig`, which is also
recorded on the run, so what a run did can always be explained by what it was given.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from enum import StrEnum

import pathspec
from pydantic import BaseModel, ConfigDict, Field, model_validator

from sandbox.contract import (
    MAX_OUTPUT_TOKENS,
    ConnectorTool,
    Severity,
    SkillDocument,
    Strictness,
)

MAX_CHANGED_FILES_RANGE = (1, 5000)
COMMENT_LIMIT_RANGE = (1, 100)


class Trigger(StrEnum):
    """Why a run exists. The first four are `pull_request` actions a policy can toggle."""

    OPENED = "opened"
    REOPENED = "reopened"
    READY_FOR_REVIEW = "ready_for_review"
    SYNCHRONIZE = "synchronize"
    COMMAND = "command"
    FULL_REVIEW_COMMAND = "full_review_command"
    REVIEW_REQUESTED = (
        "review_requested"  # no longer made (GitHub refuses Apps as reviewers); kept for old runs
    )
    RERUN = "rerun"
    MANUAL = "manual"
    LOCAL = "local"  # `manage.py review` on a local repository
    RETARGET = "retarget"  # the pull request's base branch changed (pull_request.edited)
    REVIEW_PASS = "review_pass"  # noqa: S105 - a pass of a handed-off task (reviews/passes)


POLICY_TRIGGERS = (Trigger.OPENED, Trigger.REOPENED, Trigger.READY_FOR_REVIEW, Trigger.SYNCHRONIZE)

# Runs that report somewhere other than a check run on the head: a pass of a handed-off
# task reports through its task, a local review to the terminal that asked for it.
CHECKLESS_TRIGGERS = frozenset({Trigger.REVIEW_PASS, Trigger.LOCAL})


class Engine(StrEnum):
    STATIC = "static"
    ANTHROPIC = "anthropic"
    OPENAI = "openai"
    CLAUDE_CODE = "claude-code"
    CODEX = "codex"


# Engines that execute commands (a coding agent's shell): never beside the worker's secrets.
CODE_ENGINES = frozenset({Engine.CLAUDE_CODE, Engine.CODEX})
LOCAL_CODE_REFUSED = (
    "The {engine} engine runs a coding agent that executes commands, and the local runner "
    "does not isolate it from the worker's secrets (the App's private key, the database, "
    "model keys): use the docker runner, or set TASUKU_ALLOW_CODE_ON_LOCAL_RUNNER=true to "
    "accept that risk."
)


class Runner(StrEnum):
    LOCAL = "local"
    DOCKER = "docker"
    ACTIONS = "actions"


NEVER = "never"  # `fail_check_on` value: the check run never fails on findings


class Defaults:
    """Site defaults: what a repository gets until an operator changes its policy.

    The policy model uses these as its field defaults, so the admin form of a new
    repository shows exactly what an unconfigured repository is reviewed with.
    """

    REVIEW_DRAFTS = False
    STRICTNESS = Strictness.MEDIUM
    MAX_CHANGED_FILES = 1000
    COMMENT_LIMIT = 25
    MIN_SEVERITY = Severity.LOW
    FAIL_CHECK_ON = Severity.HIGH.value
    AUTO_APPROVE = False
    APPROVE_WITH_NITS = False
    AUTHOR_MAY_DISMISS = False
    # A pull request's own noqa comment, `pragma: allowlist secret` or `shellcheck
    # disable=` silences nothing: only a person with write access does, by an explicit act.
    HONOUR_PR_SUPPRESSIONS = False
    TRIAGE_ENABLED = True
    # One summary comment per pull request, kept up to date (reviews/publication/walkthrough.py): on,
    # because it is where a person sees that a review is under way and what it did and
    # did not look at; a repository that finds it noise turns it off.
    WALKTHROUGH = True
    MIN_CONFIDENCE = 0.5
    # Opt-in: a branch and a pull request of Tasuku's in the repository (reviews/publication/fixes.py).
    FIX_PULL_REQUESTS = False
    DEGRADE_OVER_BUDGET = True


class ReviewerConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    slug: str
    engine: Engine
    runner: Runner = Runner.LOCAL
    model: str = ""
    triage_model: str = ""
    base_url: str = ""
    rules: str = ""
    skills: str = ""  # guidance, always in the prompt
    skill_documents: tuple[SkillDocument, ...] = ()  # named skills, loaded on demand
    cost_cap_usd: Decimal | None = None
    step_limit: int = Field(default=40, ge=1)
    context_budget_tokens: int = Field(default=120_000, ge=1_000)
    max_output_tokens: int = Field(default=16_000, ge=MAX_OUTPUT_TOKENS[0], le=MAX_OUTPUT_TOKENS[1])
    explorer_model: str = ""  # empty: no explorers
    explorer_limit: int = Field(default=6, ge=1, le=32)
    web_research: bool = False
    # The connectors the reviewer may call, as a job offers them (no endpoint, no
    # credential: those stay in Tasuku's database).
    connectors: tuple[ConnectorTool, ...] = ()
    # The content hash of the reviewer's definition this config was made from (its
    # revision: repos/revisions.py); empty in a config recorded before revisions.
    revision: str = ""


TESTS_TIMEOUT_RANGE = (10, 1800)  # seconds; run capped by TASUKU_SANDBOX_TIMEOUT too


class TestsConfig(BaseModel):
    """The pull request's own tests, run after a review when the repository opts in.

    `command` is the policy's (the admin); empty, the base branch's `.tasuku.toml`
    (`[tests] command`) gives it, never the pull request's own copy."""

    __test__ = False  # not a pytest test class, whatever its name
    model_config = ConfigDict(frozen=True)

    enabled: bool = False
    command: str = ""
    runner: Runner = Runner.DOCKER
    image: str = ""  # empty: TASUKU_TESTS_IMAGE
    timeout_seconds: int = Field(default=600, ge=TESTS_TIMEOUT_RANGE[0], le=TESTS_TIMEOUT_RANGE[1])
    network: bool = False


class SecondaryRepositoryConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    full_name: str
    commit: str


class EffectiveConfig(BaseModel):
    """Site defaults overlaid with one repository's policy; what a run is given."""

    model_config = ConfigDict(frozen=True)

    triggers: frozenset[Trigger] = frozenset(POLICY_TRIGGERS)
    review_drafts: bool = Defaults.REVIEW_DRAFTS
    strictness: Strictness = Defaults.STRICTNESS
    max_changed_files: int = Field(
        default=Defaults.MAX_CHANGED_FILES,
        ge=MAX_CHANGED_FILES_RANGE[0],
        le=MAX_CHANGED_FILES_RANGE[1],
    )
    comment_limit: int = Field(
        default=Defaults.COMMENT_LIMIT, ge=COMMENT_LIMIT_RANGE[0], le=COMMENT_LIMIT_RANGE[1]
    )
    excluded_paths: tuple[str, ...] = ()
    excluded_authors: tuple[str, ...] = ()
    min_severity: Severity = Defaults.MIN_SEVERITY
    fail_check_on: Severity | None = Severity(Defaults.FAIL_CHECK_ON)
    auto_approve: bool = Defaults.AUTO_APPROVE
    approve_with_nits: bool = Defaults.APPROVE_WITH_NITS
    author_may_dismiss: bool = Defaults.AUTHOR_MAY_DISMISS
    honour_pr_suppressions: bool = Defaults.HONOUR_PR_SUPPRESSIONS
    # The static reviewer's rules added to (or, with a leading `-`, taken from) its defaults.
    static_rules: tuple[str, ...] = ()
    triage_enabled: bool = Defaults.TRIAGE_ENABLED
    walkthrough: bool = Defaults.WALKTHROUGH
    fix_pull_requests: bool = Defaults.FIX_PULL_REQUESTS
    min_confidence: float = Field(default=Defaults.MIN_CONFIDENCE, ge=0, le=1)
    monthly_budget_usd: Decimal | None = None
    # The installation's exclusion globs, before the repository's (reviews/scope/filters.py).
    installation_excluded_paths: tuple[str, ...] = ()
    degrade_over_budget: bool = Defaults.DEGRADE_OVER_BUDGET
    reviewers: tuple[ReviewerConfig, ...] = ()
    secondary_repositories: tuple[SecondaryRepositoryConfig, ...] = ()
    # The pull request's own tests after a review (reviews/pr_tests/suite.py): off unless
    # the repository's policy turns them on.
    tests: TestsConfig = TestsConfig()

    @model_validator(mode="after")
    def _failing_findings_are_published(self) -> EffectiveConfig:
        """A finding that fails the check is never kept off the pull request: a
        `min_severity` above `fail_check_on` (the admin refuses it; a policy saved
        before that rule may have it) is lowered to it."""
        if self.fail_check_on is not None and not self.fail_check_on.at_least(self.min_severity):
            object.__setattr__(self, "min_severity", self.fail_check_on)
        return self

    def author_excluded(self, login: str) -> bool:
        """Whether `login` matches one of the excluded-author patterns (`*` wildcards,
        case-insensitive, as GitHub logins are)."""
        return any(_login_matches(pattern, login) for pattern in self.excluded_authors)


def _login_matches(pattern: str, login: str) -> bool:
    from fnmatch import fnmatchcase

    return fnmatchcase(login.lower(), pattern.strip().lower())


def lines(text: str) -> tuple[str, ...]:
    """The non-empty, non-comment lines of a one-per-line admin text field."""
    return tuple(
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.strip().startswith("#")
    )


def glob_errors(patterns: Iterable[str]) -> list[str]:
    """Messages for every pattern that gitignore semantics cannot parse."""
    errors = []
    for pattern in patterns:
        try:
            pathspec.GitIgnoreSpec.from_lines([pattern])
        except (ValueError, TypeError) as exc:
            errors.append(f"{pattern!r}: {exc}")
    return errors


def config_merge(
    *,
    policy: dict[str, object] | None,
    reviewers: Iterable[ReviewerConfig],
    secondary_repositories: Iterable[SecondaryRepositoryConfig] = (),
    installation: dict[str, object] | None = None,
) -> EffectiveConfig:
    """Overlay a repository's policy values (and its installation's budget) on the site
    defaults. `policy` holds only the keys the policy sets; a missing policy means the
    repository is reviewed with the site defaults."""
    values: dict[str, object] = {}
    values.update(policy or {})
    values.update(installation or {})
    values["reviewers"] = tuple(reviewers)
    values["secondary_repositories"] = tuple(secondary_repositories)
    return EffectiveConfig.model_validate(values)

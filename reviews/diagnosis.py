"""What a failed run's error most likely means, and what the operator can do about it.

Pure: a stage and an error text in, an `Advice` out. The table names the common causes
of each failure stage (docs/reviews.md, *What a review does*) by the words Tasuku's own errors use (the gateway's
`classify`, the workspace's `_clone_error`, the runners, the provider errors), so the
workflow diagnostics page can group failures by cause and say what to do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

STAGES = ("admission", "clone", "sandbox", "provider", "validation", "publication")

STAGE_MEANING = {
    "admission": "before the review started: reading the pull request, the guards, the check run",
    "clone": "checking out the pull request's head in a workspace",
    "sandbox": "running the reviewer's engine in the sandbox",
    "provider": "the model provider's API",
    "validation": "checking what the engine returned",
    "publication": "posting the review, replies and the check run on GitHub",
    "": "the worker stopped or the run ran out of time before a stage was recorded",
}


@dataclass(frozen=True)
class Advice:
    key: str
    cause: str
    action: str


@dataclass(frozen=True)
class _Rule:
    stages: tuple[str, ...]  # empty: any stage
    pattern: re.Pattern[str]
    advice: Advice


def _rule(stages: str, pattern: str, key: str, cause: str, action: str) -> _Rule:
    return _Rule(
        tuple(stages.split()), re.compile(pattern, re.IGNORECASE), Advice(key, cause, action)
    )


# First match wins: the specific before the general.
RULES: tuple[_Rule, ...] = (
    _rule("", r"worker stopped|No heartbeat",
          "worker-lost", "The worker stopped while it held the run (killed, restarted, or out "
          "of memory).",
          "Check the worker host's logs around the attempt's time; then retry."),
    _rule("", r"did not finish within .* minutes of starting",
          "run-deadline", "The run did not finish within its 45-minute deadline.",
          "Look at the attempts for the stage it was stuck in; then retry."),
    # The actions runner (reviews/actions.py): before the generic timeouts and permissions.
    _rule("sandbox", r"may not run workflows|the Actions permission",
          "actions-permission", "The App may not start workflows in this repository.",
          "Grant the GitHub App the repository permission Actions: Read and write, accept it "
          "on the installation, then retry."),
    _rule("sandbox", r"no such workflow|workflow_dispatch. trigger|does not declare every input|"
          r"requires an input Tasuku does not send|workflow is disabled",
          "actions-workflow", "The repository's Tasuku workflow is missing, disabled or does not "
          "match what Tasuku sends.",
          "Copy docs/actions/tasuku.yml to .github/workflows/tasuku.yml on the default branch "
          "(enabled in the Actions tab), then retry."),
    _rule("sandbox", r"GitHub Actions run ended .* without posting a result|"
          r"dispatched to GitHub Actions .* no result",
          "actions-no-result", "The GitHub Actions run never posted its result.",
          "Open the Actions run (linked on the run page): check the workflow's TASUKU_URL "
          "variable (Tasuku must be reachable from the runners), `id-token: write`, and the "
          "install step; then retry."),
    _rule("sandbox", r"GitHub Actions runner failed",
          "actions-runner-failed", "tasuku-runner could not review on the Actions runner.",
          "Read its reason on the run page: most often the model key secret "
          "(ANTHROPIC_API_KEY / OPENAI_API_KEY) is missing from the repository's Actions secrets."),
    _rule("clone", r"access denied|authentication failed|could not read username|Contents: read",
          "clone-access", "The App may not read this repository.",
          "Grant the GitHub App the repository permission Contents: read (the App's settings, "
          "then accept the new permissions on the installation), then retry."),
    _rule("clone", r"commit is not on GitHub|not our ref|remote ref",
          "clone-commit-gone", "The commit is no longer on GitHub (a force push).",
          "Nothing to fix: the next push is reviewed. Use Review now on the pull request for "
          "its current head."),
    _rule("clone", r"repository not found",
          "clone-not-found", "The repository is gone or the App lost access to it.",
          "Check that the App is still installed on the repository (Settings → GitHub Apps)."),
    _rule("clone", r"timed out",
          "clone-timeout", "git timed out fetching the repository.",
          "A very large repository or a slow network: retry; if it keeps failing, check the "
          "worker's network to GitHub."),
    _rule("", r"rate limit",
          "github-rate-limit", "GitHub rate limited the App.",
          "Wait for the limit to reset (/metrics: tasuku_github_rate_limit_remaining), then "
          "retry. Many repositories on one installation share its limit."),
    _rule("", r"GITHUB_APP_ID|private key|GitHub App is not configured|answered 401",
          "github-credentials", "GitHub refused the App's credentials.",
          "Check GITHUB_APP_ID and GITHUB_PRIVATE_KEY (or GITHUB_PRIVATE_KEY_PATH) against the "
          "App's settings page; a regenerated key must be installed here too."),
    _rule("publication admission", r"Resource not accessible by integration|answered 403|lack a permission",
          "github-permission", "The App lacks a permission this call needs.",
          "Grant the App Pull requests: write and Checks: write (and Contents: read), accept "
          "the new permissions on the installation, then retry."),
    _rule("publication", r"answered 422",
          "github-422", "GitHub rejected what Tasuku posted (often a comment anchor on a line "
          "the pull request no longer changes).",
          "Retry: a retry reviews the current head. If it repeats, the run's attempts show "
          "GitHub's message."),
    _rule("admission", r"answered 404|not found, or the App cannot see it",
          "github-not-found", "The pull request or repository is not visible to the App.",
          "Check the App is installed on the repository; a deleted or transferred repository "
          "cannot be reviewed."),
    _rule("", r"answered 5\d\d|network error|Could not reach|connection",
          "transient", "GitHub or the model API was unreachable or failing.",
          "Usually passing: retry. If many runs fail this way, check the worker host's network."),
    _rule("provider", r"refused the API key|API key|HTTP 401|HTTP 403",
          "provider-key", "The model provider refused the API key.",
          "Set a valid key on the reviewer in the admin (or ANTHROPIC_API_KEY / OPENAI_API_KEY), "
          "then retry."),
    _rule("provider", r"does not know the model|HTTP 404",
          "provider-model", "The provider does not know the reviewer's model name.",
          "Correct the reviewer's model in the admin (or its base URL for a self-hosted model)."),
    _rule("provider", r"bill|HTTP 402|credit|quota",
          "provider-billing", "The provider refused to bill the request.",
          "Add credit or raise the quota with the provider, then retry."),
    _rule("provider", r"needs .*none was given",
          "provider-missing-key", "No API key reached the engine.",
          "Set the reviewer's key in the admin or the site-wide key in the environment."),
    _rule("sandbox", r"Docker daemon is unreachable|Docker could not",
          "docker-unreachable", "The worker could not use Docker.",
          "Check DOCKER_HOST and that the worker's user may use the Docker daemon."),
    _rule("sandbox", r"engine image .* is not on the Docker host",
          "docker-image", "The engine image is missing on the Docker host.",
          "Build it: docker build -f sandbox/images/Dockerfile -t tasuku-engine:latest ."),
    _rule("sandbox", r"ran out of memory|memory or CPU limit",
          "sandbox-memory", "The engine hit its memory or CPU limit.",
          "Raise TASUKU_DOCKER_MEMORY / TASUKU_DOCKER_CPUS, or exclude generated or vendored "
          "paths in the repository's policy."),
    _rule("sandbox", r"did not finish within|timed out|deadline",
          "sandbox-timeout", "The engine ran out of time.",
          "Raise TASUKU_SANDBOX_TIMEOUT (it must stay below Q_TIMEOUT), lower the reviewer's "
          "step limit, or exclude paths that need no review."),
    _rule("sandbox validation", r"not a ReviewResult|wrote more than|output",
          "engine-output", "The engine returned something that is not a valid review.",
          "A model that does not follow the output schema: retry, or choose a stronger "
          "model for the reviewer."),
)  # fmt: skip

UNKNOWN = Advice(
    "unknown",
    "An error without a known cause.",
    "Read the attempt's error on the run page; retry when the cause is fixed.",
)


def diagnose(stage: str, error: str) -> Advice:
    """The most likely cause of a failure at `stage` with this error text."""
    for rule in RULES:
        if rule.stages and stage not in rule.stages:
            continue
        if rule.pattern.search(error or ""):
            return rule.advice
    return UNKNOWN


def known_causes(stage: str) -> list[Advice]:
    """Every cause the table knows for `stage` (for the page's "common causes" list)."""
    return [rule.advice for rule in RULES if not rule.stages or stage in rule.stages]

"""Tasuku's errors by identity: every error a review can fail with carries a short,
stable code (`StageError.code` in sandbox/errors.py, `GitHubError.code` in
repos/github/errors.py), and this table says, per code, at which stages it happens, what
it means and what the operator can do about it.

The code is recorded with the failed attempt and the failed run (`RunAttempt.error_code`,
`ReviewRun.error_code`), and the workflow diagnostics page groups failures by it: an
error's wording can change without changing what the page advises. A code, once
recorded, keeps its meaning; a new cause gets a new code.

Each code also has a namespaced id, `area:blame:name` (`Advice.id`: `github:yours:permission`
for `github-permission`), as Read the Docs names its errors (`build:user:…`, `build:app:…`):
where it happened and whose fix it is, for a log store or a person to filter on (the run
page and the diagnostics page show it, a failure's log line carries it as `error_id`).
It is a mapping from the stored code, never stored itself: the rows keep the short code,
and `advice_for` takes either.

Pure Python and the bottom layer: repos and reviews import it. The sandbox does not (the
engine image holds the sandbox package alone): it raises its codes as plain strings, and
the tests check that every code raised anywhere is in this table.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

# Whose the fix is (Read the Docs splits its errors the same way: the user's doing or
# the application's), shown beside the cause.
YOURS = "yours"  # the operator's setup or the repository: a key, a permission, a file
OUTSIDE = "outside"  # a service Tasuku depends on: GitHub, the model provider, a registry
HOST = "host"  # the machine or process Tasuku runs on: a full disk, a killed worker
TASUKU = "tasuku"  # Tasuku itself: a bug, or a limit of its own
BLAME_TEXT = {
    YOURS: "yours to fix: configuration, a key, a permission or the repository",
    OUTSIDE: "a service's: GitHub, the model provider or Docker; retried where that helps",
    HOST: "the host's: the machine or process Tasuku runs on",
    TASUKU: "Tasuku's own: report it if it repeats",
}


@dataclass(frozen=True)
class Advice:
    key: str  # the error's code
    cause: str
    action: str
    blame: str = ""  # YOURS, OUTSIDE, HOST or TASUKU (BLAME below)
    area: str = ""  # where it happens (AREA below)

    @property
    def blame_text(self) -> str:
        return BLAME_TEXT.get(self.blame, "")

    @property
    def id(self) -> str:
        """`area:blame:name`, the name being the code less its area's prefix; the code
        alone for a code the table does not know."""
        if not (self.area and self.blame):
            return self.key
        return f"{self.area}:{self.blame}:{self.key.removeprefix(self.area + '-')}"


@dataclass(frozen=True)
class Cause:
    stages: tuple[str, ...]  # where it happens (the page's "common causes"); empty: anywhere
    advice: Advice


def _cause(code: str, stages: str, cause: str, action: str) -> tuple[str, Cause]:
    return code, Cause(tuple(stages.split()), Advice(code, cause, action))


# An exception that carries no code of this table: a bug.
INTERNAL = "internal-error"

CODES: dict[str, Cause] = dict((
    # --- The run itself (reviews/queue/runs.py) -------------------------------------------------
    _cause("worker-lost", "",
           "The worker stopped while it held the run (killed, restarted, or out of memory).",
           "Check the worker host's logs around the attempt's time; then retry."),
    _cause("worker-stopped", "",
           "The worker was stopped (SIGTERM or SIGINT: a deploy, a restart) and handed the "
           "run back; another worker took it over. Not a failure: the attempt is not counted.",
           "Nothing: the run goes on elsewhere. Stop workers with `manage.py worker` so "
           "this is how a stop ends."),
    _cause("run-deadline", "",
           "The run did not finish within its 45-minute deadline.",
           "Look at the attempts for the stage it was stuck in; then retry."),
    _cause(INTERNAL, "",
           "An error Tasuku does not expect: a bug (the attempt's error ends with its "
           "traceback).",
           "Read the traceback in the run's attempts; retry, and report it if it repeats."),
    _cause("stage-error", "",
           "A stage failed without naming its cause.",
           "Read the attempt's error on the run page; retry when the cause is fixed."),
    # --- The actions runner (reviews/actions/workflow.py) ---------------------------------
    _cause("actions-permission", "sandbox",
           "The App may not start workflows in this repository.",
           "Grant the GitHub App the repository permission Actions: Read and write, accept it "
           "on the installation, then retry."),
    _cause("actions-workflow", "sandbox",
           "The repository's Tasuku workflow is missing, disabled or does not match what "
           "Tasuku sends.",
           "Copy docs/actions/tasuku.yml to .github/workflows/tasuku.yml on the default branch "
           "(enabled in the Actions tab), then retry."),
    _cause("actions-fork", "sandbox",
           "The pull request comes from a fork: its code is never run in this repository's "
           "GitHub Actions, where the workflow holds the repository's secrets.",
           "Review fork pull requests with a reviewer on the local or Docker runner (the "
           "reviewer's runner, or a repository policy's reviewer)."),
    _cause("actions-no-result", "sandbox",
           "The GitHub Actions run never posted its result.",
           "Open the Actions run (linked on the run page): check the workflow's TASUKU_URL "
           "variable (Tasuku must be reachable from the runners), `id-token: write`, and the "
           "install step; then retry."),
    _cause("actions-run-not-listed", "sandbox",
           "GitHub never listed the workflow run Tasuku dispatched, so no runner took the job.",
           "Check that the workflow's `run-name` is the one in docs/actions/tasuku.yml and "
           "that the workflow's runs appear in the Actions tab; then retry."),
    _cause("actions-runner-failed", "sandbox",
           "tasuku-runner could not review on the Actions runner.",
           "Read its reason on the run page: most often the model key secret "
           "(ANTHROPIC_API_KEY / OPENAI_API_KEY) is missing from the repository's Actions "
           "secrets."),
    # --- The workspace (sandbox/workspace.py) ---------------------------------------------
    _cause("clone-access", "clone",
           "The App may not read this repository.",
           "Grant the GitHub App the repository permission Contents: read (the App's settings, "
           "then accept the new permissions on the installation), then retry."),
    _cause("clone-commit-gone", "clone",
           "The commit is no longer on GitHub (a force push).",
           "Nothing to fix: the next push is reviewed. Use Review now on the pull request for "
           "its current head."),
    _cause("clone-not-found", "clone",
           "The repository is gone or the App lost access to it.",
           "Check that the App is still installed on the repository (Settings → GitHub Apps)."),
    _cause("clone-timeout", "clone",
           "git timed out fetching the repository.",
           "A very large repository or a slow network: retry; if it keeps failing, check the "
           "worker's network to GitHub."),
    _cause("clone-bad-commit", "clone",
           "The run names something that is not a full commit id.",
           "Nothing the repository can fix: a later push is reviewed as usual. If it repeats, "
           "read the run's head on the run page and report it."),
    _cause("clone-failed", "clone",
           "git could not fetch or check out the pull request.",
           "Read git's message in the run's attempts: usually passing (retry); if it repeats, "
           "check the worker's disk space and its network to GitHub."),
    _cause("workspace-write", "clone",
           "The checkout could not be written whole (a full disk, a quota or a file-size "
           "limit): the work tree did not match the commit, so nothing was reviewed.",
           "Free space on the disk of TASUKU_WORKSPACE_ROOT and of the checkout cache "
           "(`manage.py check` and /healthz say how much is left), then retry."),
    _cause("workspace-root", "clone",
           "The worker could not make a workspace: TASUKU_WORKSPACE_ROOT does not exist, is not "
           "writable or is full.",
           "Create the folder and give the worker's user write access to it (the systemd "
           "units make /var/lib/tasuku/workspaces; `manage.py check` and /healthz say what is "
           "wrong), then retry."),
    # --- GitHub (repos/github/errors.py) --------------------------------------------------
    _cause("github-stale-head", "admission",
           "GitHub's API still named an older commit as the pull request's head than the push "
           "that made this run (its answer lags behind the push for a few seconds).",
           "Nothing: the run waits and asks again (30 s, then longer)."),
    _cause("github-rate-limit", "",
           "GitHub rate limited the App.",
           "Wait for the limit to reset (/metrics: tasuku_github_rate_limit_remaining), then "
           "retry. Many repositories on one installation share its limit."),
    _cause("github-write-budget", "",
           "The installation's writes to GitHub were waiting for their place in its write "
           "budget, which every Tasuku process shares (GitHub's limits: 80 content-creating "
           "requests a minute, 500 an hour).",
           "Nothing: the work waits its turn and goes on (/metrics: "
           "tasuku_github_write_wait_seconds). Many busy repositories on one installation "
           "share its budget."),
    _cause("github-credentials", "",
           "GitHub refused the App's credentials.",
           "Check GITHUB_APP_ID and GITHUB_PRIVATE_KEY (or GITHUB_PRIVATE_KEY_PATH) against the "
           "App's settings page; a regenerated key must be installed here too."),
    _cause("author-app-credentials", "",
           "The author's App (the identity a coding agent's answers are posted as) is not "
           "configured, or its key cannot be read.",
           "Set TASUKU_AUTHOR_APP_ID and TASUKU_AUTHOR_APP_PRIVATE_KEY (or "
           "TASUKU_AUTHOR_APP_PRIVATE_KEY_PATH) from the author App's settings page; then "
           "retry the answer."),
    _cause("author-app-not-installed", "",
           "The author's App is not installed on the pull request's repository.",
           "Install the author's App on the repository (with Pull requests: write), then "
           "retry the answer."),
    _cause("github-permission", "publication admission",
           "The App lacks a permission this call needs.",
           "Grant the App Pull requests: write and Checks: write (and Contents: read), accept "
           "the new permissions on the installation, then retry."),
    _cause("github-422", "publication",
           "GitHub rejected what Tasuku posted (often a comment anchor on a line the pull "
           "request no longer changes).",
           "Retry: a retry reviews the current head. If it repeats, the run's attempts show "
           "GitHub's message."),
    _cause("github-not-found", "admission",
           "The pull request or repository is not visible to the App.",
           "Check the App is installed on the repository; a deleted or transferred repository "
           "cannot be reviewed."),
    _cause("github-unavailable", "",
           "GitHub was unreachable or failing.",
           "Usually passing: retry. If many runs fail this way, check the worker host's network."),
    _cause("github-error", "",
           "GitHub refused a call for a reason Tasuku does not single out.",
           "Read GitHub's answer in the run's attempts; retry when the cause is fixed."),
    _cause("check-refused", "publication",
           "GitHub refused the run's check run conclusion.",
           "Read GitHub's answer in the run's attempts: a missing Checks: write permission is "
           "granted in the App's settings and accepted on the installation; then retry."),
    # --- The model provider (sandbox/agent/errors.py, sandbox/engines/cli/common.py) -------
    _cause("provider-key", "provider",
           "The model provider refused the API key.",
           "Set a valid key on the reviewer in the admin (or ANTHROPIC_API_KEY / "
           "OPENAI_API_KEY), then retry."),
    _cause("provider-model", "provider",
           "The provider does not know the reviewer's model name.",
           "Correct the reviewer's model in the admin (or its base URL for a self-hosted model)."),
    _cause("provider-billing", "provider",
           "The provider refused to bill the request.",
           "Add credit or raise the quota with the provider, then retry."),
    _cause("provider-missing-key", "provider",
           "No API key reached the engine.",
           "Set the reviewer's key in the admin or the site-wide key in the environment."),
    _cause("provider-ca-bundle", "provider",
           "The CA bundle the engine's environment names (SSL_CERT_FILE or SSL_CERT_DIR) "
           "cannot be read, so no connection to the model API can be trusted.",
           "Point SSL_CERT_FILE or SSL_CERT_DIR in the engine's image at a readable PEM "
           "bundle, or unset them to use the system's; then retry."),
    _cause("provider-key-unreadable", "provider",
           "The reviewer's stored API key cannot be read (the SECRET_KEY it was sealed under "
           "is gone).",
           "Enter the key again on the reviewer in the admin, or put the old key in "
           "SECRET_KEY_FALLBACKS and run manage.py reseal_keys; then retry."),
    _cause("provider-rejected", "provider",
           "The provider rejected the request (malformed, or too large for the model).",
           "Read the provider's message in the run's attempts: a request too large needs "
           "paths excluded in the repository's policy or a model with a larger context."),
    _cause("provider-unavailable", "provider",
           "The model API was unreachable, rate limited or failing.",
           "Usually passing: retry. If many runs fail this way, check the worker host's "
           "network and the provider's rate limits."),
    _cause("provider-bad-response", "provider",
           "The model API answered with something that is not a valid response.",
           "Usually passing: retry. A self-hosted server must speak the provider's API (the "
           "reviewer's base URL)."),
    _cause("provider-error", "provider",
           "The model provider's API call failed for a reason Tasuku does not single out.",
           "Read the provider's message in the run's attempts; retry when the cause is fixed."),
    # --- The sandbox: runners and engines (sandbox/runners/, sandbox/engines/) -------------
    _cause("docker-unreachable", "sandbox",
           "The worker could not use Docker.",
           "Check DOCKER_HOST and that the worker's user may use the Docker daemon."),
    _cause("docker-image", "sandbox",
           "The engine image is missing on the Docker host.",
           "Build it: docker build -f sandbox/images/Dockerfile -t tasuku-engine:latest ."),
    _cause("docker-refused", "sandbox",
           "Docker refused what the runner asked of it (a missing network, a bad mount).",
           "Read Docker's answer in the run's attempts; check that TASUKU_DOCKER_NETWORK "
           "exists on the Docker host."),
    _cause("docker-network", "sandbox",
           "The engine's Docker network settings are refused: a proxy needs a network, and "
           "the engine may not share the host's or a container's network.",
           "Set TASUKU_DOCKER_NETWORK to an internal Docker network that reaches "
           "TASUKU_DOCKER_PROXY (never host or container:…), then retry."),
    _cause("sandbox-credential", "sandbox",
           "An engine was to be given a GitHub credential; an engine never gets one.",
           "The reviewer's API key looks like a GitHub token: set the model provider's key "
           "on the reviewer in the admin, then retry."),
    _cause("sandbox-memory", "sandbox",
           "The engine hit its memory or CPU limit.",
           "Raise TASUKU_DOCKER_MEMORY / TASUKU_DOCKER_CPUS, or exclude generated or vendored "
           "paths in the repository's policy."),
    _cause("sandbox-timeout", "sandbox",
           "The engine ran out of time.",
           "Raise TASUKU_SANDBOX_TIMEOUT (it must stay below Q_TIMEOUT), lower the reviewer's "
           "step limit, or exclude paths that need no review."),
    _cause("runner-refused", "sandbox",
           "The local runner may not run an engine that executes commands.",
           "Use the docker runner for this reviewer (or in the repository's policy), or set "
           "TASUKU_ALLOW_CODE_ON_LOCAL_RUNNER=true to accept the risk."),
    _cause("runner-unavailable", "sandbox",
           "The reviewer's runner cannot run the engine here.",
           "Check the reviewer's runner in the admin (local, docker or actions) and the "
           "repository's policy; then retry."),
    _cause("engine-cli-missing", "sandbox",
           "The engine's command-line tool is not installed where the engine runs.",
           "Rebuild the engine image (docker build -f sandbox/images/Dockerfile -t "
           "tasuku-engine:latest .), which installs the claude-code and codex CLIs."),
    _cause("engine-start", "sandbox",
           "The engine's process could not be started.",
           "Usually the worker's resources (processes, memory, disk): retry; if it repeats, "
           "read the attempt's error."),
    _cause("engine-failed", "sandbox",
           "The engine stopped with an error.",
           "Read the engine's last words in the run's attempts; retry, and if it repeats "
           "check the reviewer's engine settings in the admin."),
    _cause("engine-output", "sandbox validation",
           "The engine returned something that is not a valid review.",
           "A model that does not follow the output schema: retry, or choose a stronger "
           "model for the reviewer."),
    _cause("sandbox-error", "sandbox",
           "The sandbox failed without naming its cause.",
           "Read the attempt's error on the run page; retry when the cause is fixed."),
))  # fmt: skip

# Whose each code's fix is (a test holds every code to one).
BLAME: dict[str, str] = {
    "worker-lost": HOST, "worker-stopped": HOST, "run-deadline": TASUKU,
    INTERNAL: TASUKU, "stage-error": TASUKU,
    "actions-permission": YOURS, "actions-workflow": YOURS, "actions-no-result": OUTSIDE,
    "actions-fork": YOURS,
    "actions-run-not-listed": OUTSIDE, "actions-runner-failed": YOURS,
    "clone-access": YOURS, "clone-commit-gone": YOURS, "clone-not-found": YOURS,
    "clone-timeout": OUTSIDE, "clone-bad-commit": TASUKU, "clone-failed": OUTSIDE,
    "workspace-write": HOST, "workspace-root": HOST,
    "github-stale-head": OUTSIDE, "github-rate-limit": OUTSIDE, "github-write-budget": OUTSIDE,
    "github-credentials": YOURS,
    "author-app-credentials": YOURS, "author-app-not-installed": YOURS,
    "github-permission": YOURS, "github-422": TASUKU, "github-not-found": YOURS,
    "github-unavailable": OUTSIDE, "github-error": OUTSIDE, "check-refused": OUTSIDE,
    "provider-key": YOURS, "provider-model": YOURS, "provider-billing": YOURS,
    "provider-missing-key": YOURS, "provider-key-unreadable": YOURS,
    "provider-ca-bundle": YOURS,
    "provider-rejected": TASUKU, "provider-unavailable": OUTSIDE,
    "provider-bad-response": OUTSIDE, "provider-error": OUTSIDE,
    "docker-unreachable": HOST, "docker-image": YOURS, "docker-refused": YOURS,
    "docker-network": YOURS, "sandbox-credential": TASUKU, "sandbox-memory": YOURS,
    "sandbox-timeout": YOURS, "runner-refused": YOURS, "runner-unavailable": YOURS,
    "engine-cli-missing": YOURS, "engine-start": HOST, "engine-failed": TASUKU,
    "engine-output": TASUKU, "sandbox-error": TASUKU,
}  # fmt: skip
# Where each code happens: its namespace (a test holds every code to one).
# (WORKER: the work itself, a run's or a delivery's, whatever stage it was at.)
WORKER, ACTIONS, CLONE, GITHUB, PROVIDER, SANDBOX = (
    "worker", "actions", "clone", "github", "provider", "sandbox"
)  # fmt: skip
AREA: dict[str, str] = {
    "worker-lost": WORKER, "worker-stopped": WORKER, "run-deadline": WORKER,
    INTERNAL: WORKER, "stage-error": WORKER,
    "actions-permission": ACTIONS, "actions-workflow": ACTIONS, "actions-no-result": ACTIONS,
    "actions-fork": ACTIONS, "actions-run-not-listed": ACTIONS,
    "actions-runner-failed": ACTIONS,
    "clone-access": CLONE, "clone-commit-gone": CLONE, "clone-not-found": CLONE,
    "clone-timeout": CLONE, "clone-bad-commit": CLONE, "clone-failed": CLONE,
    "workspace-write": CLONE, "workspace-root": CLONE,
    "github-stale-head": GITHUB, "github-rate-limit": GITHUB, "github-write-budget": GITHUB,
    "github-credentials": GITHUB, "author-app-credentials": GITHUB,
    "author-app-not-installed": GITHUB, "github-permission": GITHUB, "github-422": GITHUB,
    "github-not-found": GITHUB, "github-unavailable": GITHUB, "github-error": GITHUB,
    "check-refused": GITHUB,
    "provider-key": PROVIDER, "provider-model": PROVIDER, "provider-billing": PROVIDER,
    "provider-missing-key": PROVIDER, "provider-key-unreadable": PROVIDER,
    "provider-ca-bundle": PROVIDER,
    "provider-rejected": PROVIDER, "provider-unavailable": PROVIDER,
    "provider-bad-response": PROVIDER, "provider-error": PROVIDER,
    "docker-unreachable": SANDBOX, "docker-image": SANDBOX, "docker-refused": SANDBOX,
    "docker-network": SANDBOX, "sandbox-credential": SANDBOX, "sandbox-memory": SANDBOX,
    "sandbox-timeout": SANDBOX, "runner-refused": SANDBOX, "runner-unavailable": SANDBOX,
    "engine-cli-missing": SANDBOX, "engine-start": SANDBOX, "engine-failed": SANDBOX,
    "engine-output": SANDBOX, "sandbox-error": SANDBOX,
}  # fmt: skip
for _code, _cause_of in CODES.items():
    CODES[_code] = dataclasses.replace(
        _cause_of,
        advice=dataclasses.replace(
            _cause_of.advice, blame=BLAME.get(_code, ""), area=AREA.get(_code, "")
        ),
    )
# The namespaced ids, back to the stored codes.
BY_ID: dict[str, str] = {cause.advice.id: code for code, cause in CODES.items()}

UNKNOWN = Advice(
    "unknown",
    "An error without a known cause.",
    "Read the attempt's error on the run page; retry when the cause is fixed.",
)


def known(code: object) -> bool:
    return isinstance(code, str) and code in CODES


def advice_for(code: str) -> Advice:
    """What `code` — a stored code, or its namespaced id — means and what to do;
    `UNKNOWN` for an empty or unknown one."""
    found = CODES.get(code or "") or CODES.get(BY_ID.get(code or "", ""))
    return found.advice if found else UNKNOWN


def error_id(code: str) -> str:
    """The namespaced id of a stored code (`Advice.id`); the code itself when the table
    does not know it."""
    return advice_for(code).id if known(code) else code


def code_of(exc: BaseException) -> str:
    """The code `exc` carries; `INTERNAL` for an exception without one of this table's
    (a KeyError, say: a bug)."""
    code = getattr(exc, "code", None)
    return code if known(code) else INTERNAL

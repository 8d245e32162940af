"""Errors by identity: every error a review fails with carries a code of the table in
tasuku/errors.py, the code is recorded with the failed attempt and run, and the advice
follows the code — never the error's words. Old rows get their code once, from their
words, by the migration that added the codes."""

from __future__ import annotations

import ast
import importlib
from datetime import timedelta
from pathlib import Path

import pytest
from django.apps import apps
from django.utils import timezone
from github import GithubException

from repos.github.errors import GitHubError, GitHubNotConfigured, classify
from reviews.actions.workflow import _dispatch_code
from reviews.checks.diagnosis import STAGES, UNKNOWN, diagnose, known_causes
from reviews.models import AttemptOutcome, ReviewRun, RunAttempt, RunStatus
from reviews.queue import runs
from sandbox.agent.errors import provider_error
from sandbox.errors import CloneError, ProviderError, SandboxError, StageError
from sandbox.git import clone_error as _clone_error
from sandbox.git import commit_ids as _commit_ids
from tasuku.errors import CODES, HOST, INTERNAL, OUTSIDE, TASUKU, YOURS, code_of
from tests.factories import ReviewRunFactory

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("tasuku", "webhooks", "repos", "reviews", "sandbox")
# Where `code` means something else: the static checkers' rule ids.
OTHER_CODES = ("sandbox/engines/static/",)


# --- The table ------------------------------------------------------------------------


def _raised_codes() -> dict[str, list[str]]:
    """Every code the product's source names: `code=`/`error_code=` arguments, `code`/`default_code`
    assignments, `"code":` entries, tables named …CODES and what `…_code` functions
    return. Each with where it is named."""
    found: dict[str, list[str]] = {}

    def take(node: ast.AST, where: str) -> None:
        for leaf in ast.walk(node):
            if isinstance(leaf, ast.Constant) and isinstance(leaf.value, str):
                found.setdefault(leaf.value, []).append(where)

    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts or str(path.relative_to(ROOT)).startswith(OTHER_CODES):
                continue
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"
                if isinstance(node, ast.keyword) and node.arg in ("code", "error_code"):
                    take(node.value, where)
                elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    names = {getattr(t, "id", getattr(t, "attr", "")) for t in targets}
                    if names & {"code", "default_code"} and node.value is not None:
                        take(node.value, where)
                    elif any(name.endswith("CODES") for name in names) and isinstance(
                        node.value, ast.Dict
                    ):
                        for value in node.value.values:
                            take(value, where)
                elif isinstance(node, ast.Dict):
                    for key, value in zip(node.keys, node.values, strict=True):
                        if isinstance(key, ast.Constant) and key.value == "code":
                            take(value, where)
                elif (
                    isinstance(node, ast.FunctionDef)
                    and node.name.endswith("_code")
                    and (
                        node.name != "_code"  # reviews/text/escaping.py: text inside code spans
                    )
                ):
                    for inner in ast.walk(node):
                        if isinstance(inner, ast.Return) and inner.value is not None:
                            take(inner.value, where)
    return found


def test_every_code_the_product_raises_is_in_the_table():
    from sandbox.engines.cli.common import _PERMANENT_CAUSES

    raised = _raised_codes()
    raised.update({code: ["sandbox/engines/cli/common.py"] for code, _ in _PERMANENT_CAUSES})
    # `code_of` and friends name none of their own: the table's keys are what is left.
    raised = {code: where for code, where in raised.items() if code and "-" in code}
    assert len(raised) >= 40, sorted(raised)  # the scan finds the raise sites
    unknown = {code: where for code, where in raised.items() if code not in CODES}
    assert unknown == {}
    assert set(CODES) <= set(raised)  # and nothing in the table that nothing raises


def test_every_code_says_where_it_happens_what_it_means_and_what_to_do():
    for code, cause in CODES.items():
        assert cause.advice.key == code
        assert set(cause.stages) <= set(STAGES), code
        assert cause.advice.cause and cause.advice.action, code
        # and whose the fix is: the operator's setup, a service's, the host's or Tasuku's
        assert cause.advice.blame in (YOURS, OUTSIDE, HOST, TASUKU), code
    assert CODES[INTERNAL].advice.blame_text == "Tasuku's own: report it if it repeats"


def test_every_code_has_a_namespaced_id_naming_its_area_and_whose_fix_it_is():
    """`area:blame:name`, as Read the Docs names its errors: a mapping from the stored
    code, which stays what the rows hold."""
    from tasuku.errors import AREA, BY_ID, advice_for, error_id

    assert set(AREA) == set(CODES)
    ids = {code: cause.advice.id for code, cause in CODES.items()}
    assert len(set(ids.values())) == len(ids)  # one id a code
    for code, namespaced in ids.items():
        area, blame, name = namespaced.split(":")
        assert (area, blame) == (AREA[code], CODES[code].advice.blame), code
        assert name and code.endswith(name), code
        assert BY_ID[namespaced] == code and advice_for(namespaced) is advice_for(code)
    assert ids["github-permission"] == "github:yours:permission"
    assert ids["github-rate-limit"] == "github:outside:rate-limit"
    assert ids[INTERNAL] == "worker:tasuku:internal-error"
    assert ids["workspace-write"] == "clone:host:workspace-write"
    # A code the table does not know (recorded by an older version, say) is itself.
    assert error_id("no-such-code") == "no-such-code" and error_id("") == ""


@pytest.mark.django_db
def test_a_failed_attempt_stores_the_code_and_logs_the_namespaced_id(caplog):
    run = ReviewRunFactory()
    held = runs.run_claim(run.pk, worker="w:1")
    caplog.set_level("WARNING", logger="reviews.queue.runs")
    runs.run_attempt_failed(held, CloneError("no access", permanent=True, code="clone-access"),
                            stage="clone")  # fmt: skip
    assert ReviewRun.objects.get(pk=run.pk).error_code == "clone-access"  # the stored code
    assert RunAttempt.objects.get(run=run).error_code == "clone-access"
    [line] = [r for r in caplog.records if "failed at clone" in r.getMessage()]
    assert line.error_id == "clone:yours:access"


def test_every_stage_has_common_causes_with_something_to_do():
    for stage in STAGES:
        causes = known_causes(stage)
        assert causes and all(advice.action for advice in causes)
    assert "clone-access" in {a.key for a in known_causes("clone")}
    assert "clone-access" not in {a.key for a in known_causes("provider")}


# --- The advice follows the code, not the words ----------------------------------------


def test_the_advice_is_the_codes_whatever_the_message_says():
    # Words that read like another cause, a code that says what it is.
    error = CloneError("the commit is not on GitHub any more (not our ref)", permanent=True,
                       code="clone-access")  # fmt: skip
    assert diagnose(error.code) == CODES["clone-access"].advice
    reworded = SandboxError("Wholly new words for a missing image.", permanent=True,
                            code="docker-image")  # fmt: skip
    assert diagnose(reworded.code).key == "docker-image"
    assert "docker build" in diagnose(reworded.code).action


def test_an_empty_or_unknown_code_is_an_unknown_cause():
    assert diagnose("") is UNKNOWN
    assert diagnose("no-such-code") is UNKNOWN


# --- Codes at the raise sites -----------------------------------------------------------


@pytest.mark.parametrize(
    ("stderr", "code", "permanent"),
    [
        ("fatal: Authentication failed for 'https://github.com/acme/shop/'", "clone-access",
         True),
        ("fatal: remote error: upload-pack: not our ref 1234", "clone-commit-gone", True),
        ("remote: Repository not found.\nfatal: repository not found", "clone-not-found", True),
        # A write that failed is the workspace's disk, not the network: its own code.
        ("fatal: unable to write new index file", "workspace-write", False),
        ("fatal: the remote end hung up unexpectedly", "clone-failed", False),
    ],
)  # fmt: skip
def test_a_git_failure_is_coded_by_what_git_said(stderr, code, permanent):
    error = _clone_error("fetch the head", stderr)
    assert (error.code, error.permanent) == (code, permanent)


def test_a_name_that_is_not_a_commit_id_is_refused_with_its_code():
    with pytest.raises(CloneError) as caught:
        _commit_ids("--upload-pack=evil")
    assert caught.value.code == "clone-bad-commit"


def _github(status: int, message: str = "no", headers: dict | None = None, data=None):
    return GithubException(status, data if data is not None else {"message": message},
                           headers or {})  # fmt: skip


@pytest.mark.parametrize(
    ("exc", "code", "permanent"),
    [
        (_github(401, "Bad credentials"), "github-credentials", True),
        (_github(403, "Resource not accessible by integration"), "github-permission", True),
        (_github(404, "Not Found"), "github-not-found", True),
        (_github(422, "Validation Failed"), "github-422", True),
        (_github(422, "The permissions requested are not granted to this installation."),
         "github-permission", True),
        (_github(400, "Problems parsing JSON"), "github-error", True),
        (_github(502, "Bad Gateway"), "github-unavailable", False),
        (_github(403, "API rate limit exceeded", {"X-RateLimit-Remaining": "0"}),
         "github-rate-limit", False),
        (_github(200, data={"errors": [{"type": "FORBIDDEN", "message": "no"}]}),
         "github-permission", True),
        (_github(200, data={"errors": [{"type": "RATE_LIMITED", "message": "slow down"}]}),
         "github-rate-limit", False),
        # GitHub's content-creation limit, as it answers a review posted too soon: a 422
        # that is weather, never a refused comment
        (_github(422, "was submitted too quickly"), "github-rate-limit", False),
        (_github(422, data={"message": "Validation Failed", "errors": [
            {"resource": "PullRequestReview", "code": "custom", "message": "was submitted too quickly"}]}),
         "github-rate-limit", False),
        (_github(422, data={"message": "Unprocessable Entity", "errors": [
            "Pull request review thread line must be part of the diff"]}), "github-422", True),
    ],
)  # fmt: skip
def test_the_gateways_classify_gives_each_answer_its_code(exc, code, permanent):
    error = classify("post a review on acme/shop#7", exc)
    assert (error.code, error.permanent) == (code, permanent)


def test_a_422_that_is_a_rate_limit_waits_what_github_asks_or_a_minute():
    assert classify("post", _github(422, "was submitted too quickly")).retry_after == 60.0
    asked = _github(422, "was submitted too quickly", {"Retry-After": "90"})
    assert classify("post", asked).retry_after == 90.0


def test_a_github_error_raised_without_a_code_gets_one_from_its_status():
    assert GitHubError("x", permanent=True, status=404).code == "github-not-found"
    assert GitHubError("network error", permanent=False).code == "github-unavailable"
    assert GitHubError("x", permanent=True).code == "github-error"
    assert GitHubError("x", permanent=True, status=403, code="github-422").code == "github-422"
    assert GitHubNotConfigured(["GITHUB_APP_ID"]).code == "github-credentials"


class _StatusError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"status {status}")
        self.status_code = status


@pytest.mark.parametrize(
    ("status", "code"),
    [(401, "provider-key"), (403, "provider-key"), (402, "provider-billing"),
     (404, "provider-model"), (413, "provider-rejected"), (529, "provider-unavailable")],
)  # fmt: skip
def test_a_provider_answer_is_coded_by_its_status(status, code):
    assert provider_error("Anthropic", "claude-x", _StatusError(status)).code == code


def test_an_error_raised_without_a_code_gets_its_classs_or_the_one_it_wraps():
    assert StageError("x", permanent=True).code == "stage-error"
    assert CloneError("x", permanent=True).code == "clone-failed"
    assert SandboxError("x", permanent=True).code == "sandbox-error"
    assert ProviderError("x", permanent=True).code == "provider-error"

    def wrapped(cause: BaseException) -> StageError:
        try:
            raise StageError(str(cause), permanent=True, stage="publication") from cause
        except StageError as exc:
            return exc

    assert wrapped(GitHubError("x", permanent=True, status=403)).code == "github-permission"
    assert wrapped(KeyError("x")).code == "stage-error"

    class Coded(Exception):  # a library's error with a `code` of its own
        code = "invalid"

    assert wrapped(Coded()).code == "stage-error"


def test_an_exception_without_a_code_of_the_table_is_a_bug():
    assert code_of(KeyError("surprise")) == INTERNAL
    assert code_of(type("Coded", (Exception,), {"code": "invalid"})()) == INTERNAL
    assert code_of(SandboxError("x", permanent=True, code="docker-image")) == "docker-image"


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (GitHubError("no Actions", permanent=True, status=403), "actions-permission"),
        (GitHubError("no token", permanent=True, status=422,
                     data={"message": "The permissions requested are not granted"}),
         "actions-permission"),
        (GitHubError("no such workflow", permanent=True, status=404), "actions-workflow"),
        (GitHubError("disabled", permanent=True, status=422), "actions-workflow"),
        (GitHubError("no run-name", permanent=True), "actions-workflow"),
        (GitHubError("bad key", permanent=True, status=401), "github-credentials"),
        (GitHubError("502", permanent=False, status=502), "github-unavailable"),
    ],
)  # fmt: skip
def test_a_refused_dispatch_is_the_apps_permission_or_the_repositorys_workflow(error, code):
    assert _dispatch_code(error) == code


# --- Recorded with the failure ----------------------------------------------------------


@pytest.mark.django_db
def test_a_failed_attempt_and_its_run_record_the_errors_code():
    run = ReviewRunFactory()
    held = runs.run_claim(run.pk)
    error = _clone_error("fetch the head", "fatal: Authentication failed")
    assert runs.run_attempt_failed(held, error, stage="clone") == RunStatus.FAILED
    run.refresh_from_db()
    assert (run.status, run.error_code) == (RunStatus.FAILED, "clone-access")
    assert run.attempt_rows.get().error_code == "clone-access"


@pytest.mark.django_db
def test_a_bug_is_recorded_as_an_internal_error():
    run = ReviewRunFactory()
    held = runs.run_claim(run.pk)
    try:
        {}["missing"]
    except KeyError as exc:
        runs.run_attempt_failed(held, exc, stage="validation", final=True)
    run.refresh_from_db()
    assert run.error_code == INTERNAL == run.attempt_rows.get().error_code
    assert diagnose(run.error_code).key == INTERNAL


@pytest.mark.django_db
def test_each_attempt_keeps_its_own_code_and_the_run_has_its_latest():
    run = ReviewRunFactory()
    held = runs.run_claim(run.pk)
    runs.run_attempt_failed(held, GitHubError("502", permanent=False, status=502),
                            stage="admission")  # fmt: skip
    ReviewRun.objects.filter(pk=run.pk).update(next_attempt_at=None)
    held = runs.run_claim(run.pk)
    runs.run_attempt_failed(held, GitHubError("404", permanent=True, status=404),
                            stage="admission")  # fmt: skip
    run.refresh_from_db()
    assert run.error_code == "github-not-found"
    assert list(run.attempt_rows.values_list("error_code", flat=True)) == [
        "github-unavailable",
        "github-not-found",
    ]
    assert runs.run_retry(run)
    run.refresh_from_db()
    assert run.error_code == ""  # a retried run has no error yet


@pytest.mark.django_db
def test_a_run_that_succeeds_after_a_failed_attempt_keeps_no_error_code():
    run = ReviewRunFactory()
    held = runs.run_claim(run.pk)
    runs.run_attempt_failed(held, CloneError("git hiccup", permanent=False), stage="clone")
    ReviewRun.objects.filter(pk=run.pk).update(next_attempt_at=None)
    held = runs.run_claim(run.pk)
    assert runs.run_finish(held, status=RunStatus.COMPLETED)
    run.refresh_from_db()
    assert run.error_code == ""
    assert run.attempt_rows.first().error_code == "clone-failed"


@pytest.mark.django_db
def test_the_reaper_records_a_lost_worker_and_an_overdue_run_by_code():
    lost = ReviewRunFactory(attempts=2)
    runs.run_claim(lost.pk)
    later = timezone.now() + runs.lease_length() + timedelta(seconds=1)
    runs.runs_reap(now=later)
    lost.refresh_from_db()
    assert (lost.status, lost.error_code) == (RunStatus.FAILED, "worker-lost")
    assert lost.attempt_rows.get().error_code == "worker-lost"

    overdue = ReviewRunFactory()
    runs.run_claim(overdue.pk)
    ReviewRun.objects.filter(pk=overdue.pk).update(
        started_at=timezone.now() - timedelta(minutes=46),
        lease_expires_at=timezone.now() + timedelta(minutes=1),
    )
    runs.runs_reap()
    overdue.refresh_from_db()
    assert (overdue.status, overdue.error_code) == (RunStatus.FAILED, "run-deadline")
    assert overdue.attempt_rows.get().error_code == "run-deadline"


# --- Rows recorded before codes: the migration's backfill ------------------------------

MIGRATION = importlib.import_module("reviews.migrations.0017_error_codes")


@pytest.mark.django_db
def test_old_failures_get_their_code_from_the_words_once():
    def failed(stage: str, reason: str, error: str | None = None) -> ReviewRun:
        run = ReviewRunFactory(status=RunStatus.FAILED, stage=stage, reason=reason)
        RunAttempt.objects.create(run=run, number=1, worker="w:1", started_at=timezone.now(),
                                  outcome=AttemptOutcome.FAILED, stage=stage,
                                  error=error if error is not None else f"X: {reason}")  # fmt: skip
        return run

    access = failed("clone", "Could not fetch: access denied (403). The App may not read this "
                             "repository: grant it Contents: read.")  # fmt: skip
    provider = failed("provider", "Could not reach the anthropic API: Connection error.")
    github = failed("admission", "Could not read pull request: GitHub answered 502 (Bad Gateway)")
    bug = failed("validation", "'missing'",
                 "KeyError: 'missing'\n\nTraceback (most recent call last):\n  ...")  # fmt: skip
    odd = failed("sandbox", "something odd happened")
    kept = failed("clone", "access denied")
    ReviewRun.objects.filter(pk=kept.pk).update(error_code="clone-timeout")  # recorded: kept
    queued = ReviewRunFactory(status=RunStatus.QUEUED, reason="retrying after: access denied")

    MIGRATION.backfill(apps, None)

    def code(run: ReviewRun) -> str:
        return ReviewRun.objects.values_list("error_code", flat=True).get(pk=run.pk)

    assert code(access) == "clone-access"
    assert access.attempt_rows.get().error_code == "clone-access"
    assert code(provider) == "provider-unavailable"  # one cause then, two codes now
    assert code(github) == "github-unavailable"
    assert code(bug) == INTERNAL  # from its attempt's traceback
    assert code(odd) == ""  # no rule knew it: still unknown
    assert code(kept) == "clone-timeout"
    assert code(queued) == ""
    assert {MIGRATION.code_for("", "No heartbeat from w:1 since its lease expired."),
            MIGRATION.code_for("sandbox", "deadline exceeded")} == {"worker-lost", "run-deadline"}  # fmt: skip


def test_the_backfill_gives_only_codes_of_the_table():
    assert {code for _, _, code in MIGRATION.RULES} - {"transient"} <= set(CODES)
    assert {"github-unavailable", "provider-unavailable", INTERNAL} <= set(CODES)


# --- Raise sites in the gateway's configuration and the Actions calls ---------------------


def test_a_misconfigured_app_is_a_credentials_failure(settings):
    from repos.github import config

    settings.GITHUB_APP_ID = "not-a-number"
    settings.GITHUB_PRIVATE_KEY = "x"
    settings.GITHUB_WEBHOOK_SECRET = "s"
    with pytest.raises(GitHubError) as raised:
        config.credentials()
    assert raised.value.code == "github-credentials"
    assert diagnose(raised.value.code).key == "github-credentials"


@pytest.mark.parametrize("code", ["actions-permission", "actions-workflow"])
def test_a_refused_dispatch_keeps_the_code_the_actions_call_gave_it(code):
    assert _dispatch_code(GitHubError("whatever it says", permanent=True, code=code)) == code


# --- Raise sites of the author's App (reviews/passes/author.py) ---------------------------


def test_an_unconfigured_or_unreadable_author_app_is_its_credentials_failure(settings, tmp_path):
    from reviews.passes.author import author_credentials

    settings.TASUKU_AUTHOR_APP_ID = ""
    settings.TASUKU_AUTHOR_APP_PRIVATE_KEY = ""
    settings.TASUKU_AUTHOR_APP_PRIVATE_KEY_PATH = ""
    with pytest.raises(GitHubError) as raised:
        author_credentials()
    assert raised.value.code == "author-app-credentials" and raised.value.permanent
    settings.TASUKU_AUTHOR_APP_ID = "12"
    settings.TASUKU_AUTHOR_APP_PRIVATE_KEY_PATH = str(tmp_path / "missing.pem")
    with pytest.raises(GitHubError) as raised:
        author_credentials()
    assert raised.value.code == "author-app-credentials"
    assert "TASUKU_AUTHOR_APP_PRIVATE_KEY_PATH" in raised.value.message
    assert diagnose(raised.value.code).key == "author-app-credentials"


def test_an_author_app_not_installed_on_the_repository_says_so_by_its_code():
    from reviews.passes.author import AuthorPoster

    class Uninstalled:
        def repository_installation_id(self, full_name):
            return None

        def issue_comment_create(self, repo, **kwargs):
            raise AssertionError("nothing is posted where the App is not installed")

    with pytest.raises(GitHubError) as raised:
        AuthorPoster(Uninstalled()).comment("acme/shop", 7, "Fixed.", "<!-- m -->")
    assert raised.value.code == "author-app-not-installed" and raised.value.permanent
    assert "acme/shop" in raised.value.message

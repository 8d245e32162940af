"""The pull request's own tests after a review (docs/reviews.md, *The pull request's own
tests*): opt-in per repository, on the docker runner, reported in a check run of their
own (`Tasuku / tests`) and a line of the review's summary.

A durable queue (tasuku/durable.py, `TESTS`): a review that completes asks for one run
of the tests at its head (`tests_after_review`; one row per pull request and head: a
second reviewer, or a re-review, asks for nothing more), and a newer head's request
supersedes an older head's that has not started. A worker takes the row
(`tests_run`): a head the pull request has left is superseded; otherwise the check run
is created, the head checked out, the command found — the policy's, else the base
branch's `.tasuku.toml`, never the pull request's — and run in a container without
secrets or network (sandbox/runners/pr_tests.py). The outcome is kept on the row before it is
reported, so an attempt that dies while reporting is not run again: the next one reports
what the first found. Everything is posted on the row's own head and the review of the
run that asked, never on a newer head.

The tests' failures are reported, never turned into findings: the output cannot point
at a changed line, and the merge gate stays the reviewer's.
"""

from __future__ import annotations

import contextvars
import logging
import re
import threading
import tomllib
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from repos import github
from repos.github import CheckRunOutput, RepoRef
from repos.policy import CHECKLESS_TRIGGERS, EffectiveConfig, Runner, TestsConfig
from reviews.models import Review, ReviewRun, RunStatus, SandboxTestRun, TestsStatus
from reviews.pipeline.forges import mirror_for
from reviews.text.escaping import code_span, inline_text
from reviews.text.rendering import fence_for
from sandbox.checks import memory_bytes
from sandbox.errors import SandboxError
from sandbox.runners import docker as docker_runner
from sandbox.runners import pr_tests
from sandbox.runners.docker import DockerLimits
from sandbox.workspace import TASUKU_CONFIG, Workspace
from tasuku import durable, lifecycle

logger = logging.getLogger(__name__)

TASK = "reviews.tasks.sandbox_tests_run"
CHECK_NAME = "Tasuku / tests"
OUTPUT_SHOWN = 20_000  # characters of the tests' output in the check run's text
# GitHub's limit on a check run's summary and text (65535 characters each).
CHECK_TEXT_MAX = 65_000
SECTION_START, SECTION_END = "<!-- tasuku:tests -->", "<!-- /tasuku:tests -->"
LOCAL_REFUSED = (
    "The pull request's tests are not run on the `local` runner: it would run the pull "
    "request's code as Tasuku's worker, beside its secrets. Set the repository's tests "
    "runner to `docker` (Admin → Repositories)."
)


def _lease() -> timedelta:
    # The whole run under one lease: the checkout, the tests (at most the sandbox's
    # limit), the Docker grace and the report.
    seconds = int(settings.TASUKU_SANDBOX_TIMEOUT) + settings.TASUKU_DOCKER_GRACE_SECONDS
    return timedelta(seconds=seconds + 300)


TESTS = durable.Queue(
    model="reviews.SandboxTestRun",
    task=TASK,
    name="sandbox-tests",
    waiting=(TestsStatus.QUEUED,),
    working=TestsStatus.RUNNING,
    failed=TestsStatus.ERRORED,
    installation="pull_request__repository__installation__github_id",
    max_attempts=3,
    lease_for=_lease,
    ring_again=timedelta(minutes=5),
)


@dataclass(frozen=True)
class Outcome:
    """What became of the tests: a final `TestsStatus` and what the report shows."""

    status: str
    reason: str = ""
    command: str = ""
    command_from: str = ""
    exit_code: int | None = None
    seconds: float | None = None
    failed_tests: list[str] = field(default_factory=list)
    output: str = ""


# --- Asking for them ---------------------------------------------------------------------


def tests_after_review(run_pk: int) -> int | None:
    """The run has ended: when it completed a review on GitHub of a repository that runs
    its pull requests' tests, ask for them at its head. Returns the row's id when one was
    made. Never raises: the review stands whatever becomes of this."""
    try:
        return _request(run_pk)
    except Exception:  # noqa: BLE001 - the tests never fail the review
        logger.exception("run %s: could not ask for the pull request's tests", run_pk)
        return None


def _request(run_pk: int) -> int | None:
    # Whether to ask, from four columns: after every review, and most repositories run
    # no tests (the run and its pull request are read only when one does).
    found = (
        ReviewRun.objects.filter(pk=run_pk)
        .values_list(
            "status", "trigger", "config", "pull_request__repository__installation__github_id"
        )
        .first()
    )
    if found is None:
        return None
    status, trigger, config, installation_github_id = found
    if status != RunStatus.COMPLETED or trigger in CHECKLESS_TRIGGERS:
        return None
    if installation_github_id == 0:  # a local review
        return None
    tests = EffectiveConfig.model_validate(config).tests
    if not tests.enabled:
        return None
    run = ReviewRun.objects.select_related("pull_request").get(pk=run_pk)
    pull_request = run.pull_request
    with transaction.atomic():
        # A newer head's request: an older head's tests that have not started never will.
        SandboxTestRun.objects.filter(pull_request=pull_request, status=TestsStatus.QUEUED).exclude(
            head_sha=run.head_sha
        ).update(
            status=TestsStatus.SUPERSEDED,
            reason=f"superseded by a newer push ({run.head_sha[:7]})",
            finished_at=timezone.now(),
            reported=True,  # nothing of it was posted
        )
        try:
            with transaction.atomic():
                row = SandboxTestRun.objects.create(
                    pull_request=pull_request,
                    head_sha=run.head_sha,
                    base_sha=run.base_sha,
                    run=run,
                    config=tests.model_dump(mode="json"),
                )
        except IntegrityError:
            return None  # this head's tests were asked for already
        TESTS.ring(row.pk)
    logger.info("run %s: the pull request's tests asked for (%s)", run_pk, row.pk)
    return row.pk


# --- Running them ------------------------------------------------------------------------


class WorkerStopping(Exception):
    """This worker was told to stop while it held the row: handed back, not failed."""


class Beat:
    """While an attempt holds its row: the lease renewed every
    TASUKU_RUN_HEARTBEAT_SECONDS (a run longer than its lease stays this worker's), and a
    stop of the worker (tasuku/lifecycle.py) kills the attempt's container at once, so
    that the row is handed back (`TESTS.release`) rather than left to its lease."""

    def __init__(self, pk: int, attempt: int) -> None:
        self.pk, self.attempt = pk, attempt
        self.stopping = self.lost = False
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=contextvars.copy_context().run,
            args=(self._loop,),
            name=f"heartbeat-tests-{pk}",
            daemon=True,
        )

    def __enter__(self) -> Beat:
        self._thread.start()
        lifecycle.on_stop(self._interrupt)
        return self

    def __exit__(self, *exc: object) -> None:
        lifecycle.off_stop(self._interrupt)
        self._done.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        from django.db import connection

        try:
            while not self._done.wait(settings.TASUKU_RUN_HEARTBEAT_SECONDS):
                try:
                    if not self.beat():
                        return
                except Exception:  # noqa: BLE001 - the beat outlives a failed renewal
                    logger.exception("sandbox tests %s: could not renew the lease", self.pk)
        finally:
            connection.close()  # this thread's own

    def beat(self) -> bool:
        """Renew the lease; when the attempt no longer holds the row (the sweeper handed
        it on), its container is killed: whatever it finds is no longer its to report."""
        if TESTS.renew(self.pk, self.attempt):
            return True
        self.lost = True
        docker_runner.engine_stop(pr_tests.tests_container_name(self.pk, self.attempt))
        return False

    def _interrupt(self) -> None:
        """The worker is stopping (called on the thread that read the signal)."""
        self.stopping = True
        logger.info("sandbox tests %s: the worker is stopping; killing the tests", self.pk)
        docker_runner.engine_stop(pr_tests.tests_container_name(self.pk, self.attempt))

    def check(self) -> None:
        if self.stopping or self.lost:
            why = "the worker is stopping" if self.stopping else "its lease was lost"
            raise WorkerStopping(f"sandbox tests {self.pk}: {why}")


def sandbox_tests_run(pk: int) -> str:
    """Take the row and run the tests once: claim, then (unless an earlier attempt found
    the outcome) the head's guard, the check run in progress, the checkout, the command
    and the container; the outcome recorded, reported, and the row finished. A failure is
    the queue's verdict: GitHub's weather defers, a transient error is retried, the
    last attempt or a permanent error ends the row `errored` and says so on the check.
    A worker told to stop before the outcome is kept hands the row back at once, its
    attempt not counted (what its killed container printed is never the outcome)."""
    if lifecycle.stopping():
        return "stopping"  # not taken: rung again by the sweeper (`ring_due`)
    return TestsJob.run(pk)


class TestsJob(durable.Job):
    """Every failure of the attempt becomes its verdict, but the worker's stop."""

    queue = TESTS
    related = ("pull_request__repository__installation", "run")
    log_as = "tests"
    beat: Beat | None = None

    def work(self) -> str:
        row, attempt = self.row, self.attempt
        with Beat(self.pk, attempt) as self.beat:
            outcome = _outcome_of(row, attempt, self.beat)
            if outcome.status != TestsStatus.SUPERSEDED or row.check_run_id is not None:
                _report(row, outcome)
            self.finish(outcome.status, **_fields(outcome), reported=True)
            return outcome.status

    def excused(self, exc: BaseException) -> str | None:
        """A stop of the worker (or its kill that made the attempt fail, before the
        outcome was kept) hands the row back: queued, due at once, its attempt not
        counted, rung for another worker; "lost" when this attempt no longer held it."""
        beat = self.beat
        if not isinstance(exc, WorkerStopping) and not (
            (beat is not None and (beat.stopping or beat.lost))
            and not SandboxTestRun.objects.filter(pk=self.pk).exclude(outcome="").exists()
        ):
            return None
        why = (
            f"interrupted: the worker {lifecycle.worker_name()} was stopped; another takes it over"
        )
        with transaction.atomic():
            released = TESTS.release(self.pk, self.attempt, reason=why)
            if released:
                TESTS.ring(self.pk)
        logger.info("sandbox tests %s: %s", self.pk, why if released else "lost while stopping")
        return TestsStatus.QUEUED if released else "lost"

    def failure_fields(self, exc: BaseException, verdict: durable.Verdict) -> dict:
        extra: dict[str, Any] = {"reason": f"{exc}"[:2000]}
        if verdict.kind == durable.FAILED:
            extra["finished_at"] = timezone.now()
        return extra

    def failed(self, exc: BaseException, verdict: durable.Verdict) -> str:
        if verdict.kind == durable.FAILED:
            _report_errored(self.pk)
        return verdict.kind


def _outcome_of(row: SandboxTestRun, attempt: int, beat: Beat) -> Outcome:
    """What an earlier attempt found, or what this one finds."""
    if row.outcome:
        # Recorded before an earlier attempt's report: reported, not run again.
        kept = {k: getattr(row, k) for k in Outcome.__dataclass_fields__ if k != "status"}
        return Outcome(status=row.outcome, **kept)
    pull_request = row.pull_request
    pull_request.refresh_from_db()
    if pull_request.head_sha and pull_request.head_sha != row.head_sha:
        return Outcome(
            TestsStatus.SUPERSEDED,
            reason=f"superseded by a newer push ({pull_request.head_sha[:7]})",
        )
    if pull_request.state != "open":
        return Outcome(TestsStatus.SUPERSEDED, reason="the pull request is no longer open")
    _check_ensure(row, attempt)
    outcome = _tests_outcome(row, attempt, beat)
    beat.check()  # a container the stop killed says nothing of the tests
    # Kept before anything is posted: an attempt that dies reporting is not run again.
    TESTS.held(row.pk, attempt).update(outcome=outcome.status, **_fields(outcome))
    return outcome


def _fields(outcome: Outcome) -> dict[str, Any]:
    values = asdict(outcome)
    values.pop("status")
    values["finished_at"] = timezone.now()
    return values


def _tests_outcome(row: SandboxTestRun, attempt: int, beat: Beat) -> Outcome:
    """Check out the head, find the command and run it in a container."""
    config = TestsConfig.model_validate(row.config)
    if config.runner == Runner.LOCAL:
        return Outcome(TestsStatus.REFUSED, reason=LOCAL_REFUSED)
    if config.runner != Runner.DOCKER:
        return Outcome(
            TestsStatus.REFUSED,
            reason=f"The pull request's tests do not run on the `{config.runner.value}` runner "
            "yet: set the repository's tests runner to `docker`.",
        )
    repository = row.pull_request.repository
    gateway = github.gateway()
    repo = RepoRef.of(repository)
    info = gateway.repository_get(repo)
    token = gateway.contents_token(repo)
    with Workspace(settings.TASUKU_WORKSPACE_ROOT or None) as workspace:
        checkout = workspace.checkout(
            clone_url=info.clone_url,
            token=token,
            head_sha=row.head_sha,
            base_sha=row.base_sha or row.head_sha,
            mirror=mirror_for(repository),
        )
        # Without a base the checkout's "base" is the head: its file is the pull request's.
        base_file = checkout.base_tasuku_config if row.base_sha else ""
        command, source, problem = command_of(config, base_file)
        if problem:
            return Outcome(TestsStatus.REFUSED, reason=problem)
        seconds = min(config.timeout_seconds, int(settings.TASUKU_SANDBOX_TIMEOUT))
        limits = DockerLimits(
            wall_seconds=seconds,
            grace_seconds=settings.TASUKU_DOCKER_GRACE_SECONDS,
            memory_bytes=_memory_bytes(),
            cpus=float(settings.TASUKU_DOCKER_CPUS),
            pids=int(settings.TASUKU_DOCKER_PIDS),
            tmp_bytes=1024**3,
        )
        TESTS.renew(row.pk, attempt)
        beat.check()
        try:
            ran = pr_tests.tests_run(
                command,
                checkout.root,
                image=config.image or settings.TASUKU_TESTS_IMAGE,
                limits=limits,
                name=pr_tests.tests_container_name(row.pk, attempt),
                network=(settings.TASUKU_TESTS_NETWORK or "bridge") if config.network else None,
            )
        except SandboxError as exc:
            beat.check()
            if not exc.permanent:
                raise
            return Outcome(TestsStatus.ERRORED, reason=str(exc), command=command,
                           command_from=source)  # fmt: skip
    status = {pr_tests.PASSED: TestsStatus.PASSED, pr_tests.FAILED: TestsStatus.FAILED,
              pr_tests.TIMED_OUT: TestsStatus.TIMED_OUT}[ran.status]  # fmt: skip
    return Outcome(
        status,
        reason=ran.reason,
        command=command,
        command_from=source,
        exit_code=ran.exit_code,
        seconds=round(ran.seconds, 1),
        failed_tests=list(ran.failed_tests),
        output=ran.output,
    )


def _memory_bytes() -> int:
    return memory_bytes(settings.TASUKU_DOCKER_MEMORY) or 4 * 1024**3


POLICY, BASE_BRANCH = "the repository's policy", f"the base branch's {TASUKU_CONFIG}"


def command_of(config: TestsConfig, base_file: str) -> tuple[str, str, str]:
    """(command, where it came from, why there is none): the policy's command, else the
    base branch's `.tasuku.toml` `[tests] command`. Pure."""
    if config.command.strip():
        return config.command.strip(), POLICY, ""
    if not base_file.strip():
        return (
            "",
            "",
            (
                "No tests command: set one in the repository's policy (Admin → Repositories) "
                f"or as `[tests] command` in {TASUKU_CONFIG} on the base branch."
            ),
        )
    try:
        data = tomllib.loads(base_file)
    except tomllib.TOMLDecodeError as exc:
        return "", "", f"The base branch's {TASUKU_CONFIG} is not valid TOML ({exc}): not run."
    tests = data.get("tests")
    command = tests.get("command") if isinstance(tests, dict) else None
    if not isinstance(command, str) or not command.strip():
        return (
            "",
            "",
            (
                f"The base branch's {TASUKU_CONFIG} has no `[tests] command` (a string), and the "
                "repository's policy sets none: not run."
            ),
        )
    return command.strip(), BASE_BRANCH, ""


# --- Reporting ---------------------------------------------------------------------------


def _repo(row: SandboxTestRun) -> RepoRef:
    return RepoRef.of(row.pull_request.repository)


def _details_url(row: SandboxTestRun) -> str:
    if row.run_id is None:
        return settings.TASUKU_BASE_URL
    from reviews.checks.checkruns import dashboard_url

    return dashboard_url(row.run)


def _check_ensure(row: SandboxTestRun, attempt: int) -> int:
    """The row's check run, created in progress on its head once (keyed by the row: a
    create whose answer was lost is found again, never made twice)."""
    if row.check_run_id:
        return row.check_run_id
    gateway = github.gateway()
    external_id = f"tests-{row.pk}"
    found = None
    if attempt > 1:
        found = gateway.check_run_find(
            _repo(row), head_sha=row.head_sha, name=CHECK_NAME, external_id=external_id
        )
    check = found or gateway.check_run_create(
        _repo(row),
        name=CHECK_NAME,
        head_sha=row.head_sha,
        external_id=external_id,
        details_url=_details_url(row),
        status="in_progress",
        output=CheckRunOutput(
            title="Running the pull request's tests",
            summary="The tests run in the sandbox after the review.",
        ),
    )
    SandboxTestRun.objects.filter(pk=row.pk, check_run_id__isnull=True).update(
        check_run_id=check.id
    )
    row.check_run_id = check.id
    return check.id


# The check run's conclusion for each outcome: success only when the tests passed.
CONCLUSIONS = {
    TestsStatus.PASSED: "success",
    TestsStatus.FAILED: "failure",
    TestsStatus.TIMED_OUT: "failure",
    TestsStatus.REFUSED: "neutral",
    TestsStatus.ERRORED: "neutral",
    TestsStatus.SUPERSEDED: "cancelled",
}


def conclusion_of(status: str) -> str:
    return CONCLUSIONS.get(status, "neutral")  # type: ignore[call-overload]


def _report(row: SandboxTestRun, outcome: Outcome) -> None:
    """Complete the check run, then put the result in the review's summary."""
    check_id = row.check_run_id
    if check_id is not None:
        github.gateway().check_run_update(
            _repo(row),
            check_run_id=check_id,
            status="completed",
            conclusion=conclusion_of(outcome.status),
            output=check_output(outcome),
        )
        SandboxTestRun.objects.filter(pk=row.pk).update(
            check_conclusion=conclusion_of(outcome.status)
        )
    if outcome.status != TestsStatus.SUPERSEDED:
        _summary_update(row, outcome)


def _report_errored(pk: int) -> None:
    """A row that failed for good: its check run, if it has one, says so (never left in
    progress). Best effort: the row keeps the reason either way."""
    row = SandboxTestRun.objects.select_related("pull_request__repository__installation").get(pk=pk)
    if row.check_run_id is None:
        return
    try:
        outcome = Outcome(
            TestsStatus.ERRORED, reason=f"Tasuku could not run the tests: {row.reason}"
        )
        github.gateway().check_run_update(
            _repo(row),
            check_run_id=row.check_run_id,
            status="completed",
            conclusion=conclusion_of(TestsStatus.ERRORED),
            output=check_output(outcome),
        )
        SandboxTestRun.objects.filter(pk=pk).update(
            check_conclusion=conclusion_of(TestsStatus.ERRORED), reported=True
        )
    except Exception:  # noqa: BLE001 - the row records why already
        logger.exception("sandbox tests %s: could not complete its check run", pk)


def headline(outcome: Outcome) -> str:
    """One line: how the tests ended. Pure."""
    took = f" in {outcome.seconds:g}s" if outcome.seconds is not None else ""
    count = len(outcome.failed_tests)
    if outcome.status == TestsStatus.PASSED:
        return f"Tests passed{took}"
    if outcome.status == TestsStatus.FAILED:
        if count >= pr_tests.MAX_FAILED:  # the names kept stop there: more may have failed
            return f"At least {count} tests failed"
        if count:
            return f"{count} test{'s' if count != 1 else ''} failed"
        return "Tests failed"
    if outcome.status == TestsStatus.TIMED_OUT:
        return "Tests timed out"
    if outcome.status == TestsStatus.REFUSED:
        return "Tests not run"
    if outcome.status == TestsStatus.SUPERSEDED:
        return "Tests superseded by a newer push"
    return "Tests could not be run"


def check_output(outcome: Outcome) -> CheckRunOutput:
    """The check run's title, summary and text. Pure."""
    summary = [f"**{headline(outcome)}.**"]
    if outcome.reason and outcome.status != TestsStatus.PASSED:
        summary.append(inline_text(outcome.reason, 1000))
    if outcome.command:
        summary.append(f"Command ({outcome.command_from}): {code_span(outcome.command, 2000)}")
    if outcome.failed_tests:
        summary.append("Failing tests:")
        summary.append("\n".join(f"- {code_span(name, 300)}" for name in outcome.failed_tests))
    summary.append(
        "A failure here is reported, not made into review findings: the tests' output "
        "does not say which changed line is at fault."
        if outcome.status in (TestsStatus.FAILED, TestsStatus.TIMED_OUT)
        else ""
    )
    text = None
    if outcome.output:
        shown = outcome.output[-OUTPUT_SHOWN:]
        fence = fence_for(shown)
        cut = "(the end of the output)\n\n" if len(outcome.output) > OUTPUT_SHOWN else ""
        text = f"{cut}{fence}text\n{shown}\n{fence}"[:CHECK_TEXT_MAX]
    return CheckRunOutput(
        title=headline(outcome)[:255],
        summary="\n\n".join(part for part in summary if part)[:CHECK_TEXT_MAX],
        text=text,
    )


def summary_section(outcome: Outcome) -> str:
    """The review summary's lines about the tests. Pure."""
    line = f"**Tests** ({CHECK_NAME}): {headline(outcome)}."
    if outcome.failed_tests:
        names = ", ".join(code_span(n, 200) for n in outcome.failed_tests[:10])
        more = len(outcome.failed_tests) - 10
        line += f" Failing: {names}" + (f" and {more} more." if more > 0 else ".")
    if outcome.reason and outcome.status != TestsStatus.PASSED:
        line += " " + inline_text(outcome.reason, 500)
    return f"{SECTION_START}\n{line}\n{SECTION_END}"


_SECTION = re.compile(re.escape(SECTION_START) + r".*?" + re.escape(SECTION_END), re.DOTALL)


def _summary_update(row: SandboxTestRun, outcome: Outcome) -> None:
    """The result in the summary of the review that asked (its own head's): its body as
    Tasuku posted it, with the tests' section added or replaced."""
    review = Review.objects.filter(run_id=row.run_id).first() if row.run_id else None
    if review is None or not review.github_review_id or not review.body:
        return
    # A later review with nothing new to say inline brings the same GitHub review's
    # summary up to date (reviews/publication/review.py): that summary is the newer head's now,
    # and this head's result has no place in it.
    if Review.objects.filter(github_review_id=review.github_review_id, pk__gt=review.pk).exists():
        return
    section = summary_section(outcome)
    if _SECTION.search(review.body):
        body = _SECTION.sub(lambda _: section, review.body, count=1)
    else:
        body = f"{review.body}\n\n{section}"
    if body == review.body or len(body) > 65_000:
        return
    github.gateway().review_update(
        _repo(row),
        number=row.pull_request.number,
        review_id=review.github_review_id,
        body=body,
    )
    Review.objects.filter(pk=review.pk).update(body=body)


# --- The sweeper -------------------------------------------------------------------------


def tests_sweep() -> int:
    """Rows whose worker died are tried again (or end `errored`, their check saying so);
    lost doorbells are rung again."""
    lost_last = {"reason": "its worker stopped on its last attempt", "reported": False}
    result = TESTS.sweep(lost_last=lost_last)
    for pk in SandboxTestRun.objects.filter(
        status=TestsStatus.ERRORED, reported=False, check_run_id__isnull=False
    ).values_list("pk", flat=True)[:20]:
        _report_errored(pk)
    return result["requeued"] + result["failed"] + result["rung"]

"""Reviews of a local git repository (`manage.py review`): the same pipeline with no
GitHub at all. The review is recorded under a local repository and shows on the
dashboard; a later review of the same branch is reconciled with the previous one.
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from repos.models import Installation, Repository, Reviewer
from repos.policy import Trigger
from repos.selectors import effective_config, reviewer_config
from repos.services import policy_create_default
from reviews import engines, stages, threads
from reviews.diff import diff_parse
from reviews.models import Finding, PullRequest, Review, ReviewRun, RunStatus, Stage
from reviews.pipeline import previous_head, result_reusable
from reviews.publication import persist
from reviews.reconcile import CURRENT, Decision
from reviews.runs import Heartbeat, run_attempt_failed, run_claim, run_finish, run_stage
from reviews.validation import INVALID, History
from sandbox.workspace import Workspace

LOCAL_INSTALLATION = 0


class LocalReviewError(Exception):
    """A usage or repository problem, said in one line."""


@dataclass
class LocalReview:
    run: ReviewRun
    review: Review
    core: stages.Core
    base_sha: str
    head_sha: str
    incremental_since: str | None
    reconciled: list[Finding]  # earlier findings this review resolved or outdated
    reused_from: int | None = None  # the run whose engine result this review reused


def _git(repo: Path, *args: str) -> str | None:
    completed = subprocess.run(  # noqa: S603
        ["git", "-C", str(repo), *args],  # noqa: S607
        capture_output=True,
        text=True,
        check=False,
    )
    return completed.stdout.strip() if completed.returncode == 0 else None


def _resolve(repo: Path, ref: str) -> str:
    sha = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if not sha:
        raise LocalReviewError(f"unknown ref: {ref}")
    return sha


def _default_branch(repo: Path) -> str | None:
    origin = _git(repo, "symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD")
    if origin:
        return origin
    for name in ("main", "master", "trunk", "develop"):
        if _git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{name}"):
            return name
    return None


def refs_resolve(repo: Path, base: str | None, head: str | None) -> tuple[Path, str, str, str]:
    """(repository root, base SHA, head SHA, branch name); LocalReviewError otherwise."""
    path = repo.expanduser()
    if not path.is_dir():
        raise LocalReviewError(f"not a directory: {repo}")
    top = _git(path, "rev-parse", "--show-toplevel")
    if not top:
        raise LocalReviewError(f"not a git repository: {repo}")
    root = Path(top)
    head_sha = _resolve(root, head or "HEAD")
    if base:
        base_sha = _resolve(root, base)
    else:
        default = _default_branch(root)
        if default is None:
            raise LocalReviewError(
                "no default branch (main or master) to compare with: pass --base"
            )
        merge_base = _git(root, "merge-base", default, head_sha)
        if not merge_base:
            raise LocalReviewError(
                f"{head or 'HEAD'} has no common history with {default}: pass --base"
            )
        base_sha = merge_base
    branch = (
        head if head and head != "HEAD" else _git(root, "rev-parse", "--abbrev-ref", "HEAD")
    ) or "HEAD"
    return root, base_sha, head_sha, "detached" if branch == "HEAD" else branch


def _local_repository(root: Path) -> Repository:
    installation, _ = Installation.objects.get_or_create(
        github_id=LOCAL_INSTALLATION, defaults={"account_login": "local", "account_type": "Local"}
    )
    digest = int(hashlib.sha256(str(root).encode()).hexdigest()[:12], 16)
    github_id = -digest  # never a GitHub id: local repositories are never reviewed on GitHub
    repository = Repository.objects.filter(github_id=github_id).first()
    if repository is None:
        name = f"local/{root.name}"
        if Repository.objects.filter(full_name=name).exists():
            name = f"{name}-{digest % 10**6:06d}"
        repository = Repository.objects.create(
            installation=installation, github_id=github_id, full_name=name, enabled=False
        )
        policy_create_default(repository=repository)
    return repository


def _pull_request(repository: Repository, branch: str, base_sha: str, head_sha: str) -> PullRequest:
    with transaction.atomic():
        pull_request = PullRequest.objects.filter(repository=repository, head_ref=branch).first()
        if pull_request is None:
            number = (
                PullRequest.objects.filter(repository=repository).aggregate(n=Max("number"))["n"]
                or 0
            ) + 1
            pull_request = PullRequest.objects.create(
                repository=repository, number=number, title=f"Local branch {branch}", head_ref=branch,
                author_login="local", author_type="User",
            )  # fmt: skip
        PullRequest.objects.filter(pk=pull_request.pk).update(head_sha=head_sha, base_sha=base_sha)
    pull_request.head_sha, pull_request.base_sha = head_sha, base_sha
    return pull_request


def local_review(
    *, repo: Path, base: str | None, head: str | None, reviewer_slug: str
) -> LocalReview:
    """Review `head` of a local repository against `base` (default: its merge base with
    the default branch) and record the review.

    1. Resolve the refs; find or create the local repository and its "pull request"
       (one per branch).
    2. A run, claimed like any other (the same head reviewed again is re-run).
    3. A shared clone in a workspace; the rest is the GitHub pipeline's core: filters,
       guideline packs, triage, compression, the engine in the local runner, validation.
    4. Persist, then reconcile the previous review of the branch with this one.
    """
    reviewer = Reviewer.objects.filter(slug=reviewer_slug, enabled=True).first()
    if reviewer is None:
        raise LocalReviewError(f"no enabled reviewer named {reviewer_slug!r}")
    root, base_sha, head_sha, branch = refs_resolve(repo, base, head)
    repository = _local_repository(root)
    pull_request = _pull_request(repository, branch, base_sha, head_sha)
    config = effective_config(repository).model_copy(
        update={"reviewers": (reviewer_config(reviewer),)}
    )
    run, created = ReviewRun.objects.get_or_create(
        pull_request=pull_request, reviewer=reviewer, head_sha=head_sha, trigger=Trigger.LOCAL,
        defaults={"base_sha": base_sha, "config": config.model_dump(mode="json")},
    )  # fmt: skip
    if not created:
        ReviewRun.objects.filter(pk=run.pk).update(
            status=RunStatus.QUEUED, attempts=0, base_sha=base_sha, next_attempt_at=None, started_at=None,
            finished_at=None, reason="", stage="", config=config.model_dump(mode="json"),
        )  # fmt: skip
        run.refresh_from_db()
    held = run_claim(run.pk)
    if held is None:
        raise LocalReviewError("this branch is being reviewed right now; try again when it is done")
    with Heartbeat(held) as beat:
        try:
            return _review(run, held, beat, root, config, base_sha, head_sha)
        except Exception as exc:
            # No retries later: the user is waiting for this one.
            stage = getattr(exc, "stage", "") or run.stage or Stage.SANDBOX
            run_attempt_failed(held, exc, stage=stage, final=True)
            raise


def _review(run, held, beat, root: Path, config, base_sha: str, head_sha: str) -> LocalReview:
    previous = previous_head(run)
    run_stage(held, Stage.CLONE)
    with Workspace(settings.TASUKU_WORKSPACE_ROOT) as workspace:
        checkout = workspace.checkout_local(
            repository=root, head_sha=head_sha, base_sha=base_sha, previous_sha=previous
        )
        core = stages.prepare(checkout, config, config.reviewers[0])
        ReviewRun.objects.filter(pk=run.pk).update(
            sanitised=checkout.removed,
            reviewed=core.reviewed,
            filtered=[[f.path, f.reason] for f in core.filtered],
            incremental_since=checkout.incremental_since or "",
        )
        run.refresh_from_db()
        result = None
        reused_from = None
        if not core.stopped:
            run_stage(held, Stage.SANDBOX)
            reviewer = config.reviewers[0]
            earlier = threads.earlier_open(threads.previous_review(run, previous), run.head_sha)
            job = stages.job_build(
                core, checkout=checkout, reviewer=reviewer, config=config, job_id=str(run.pk),
                repository=run.pull_request.repository.full_name, number=run.pull_request.number,
                title=run.pull_request.title, deadline_seconds=int(settings.TASUKU_SANDBOX_TIMEOUT),
                price=engines.model_price(reviewer.model), earlier=engines.earlier_for_job(earlier),
            )  # fmt: skip
            digest = engines.job_digest(job, run.reviewer)
            # The same branch head reviewed again with nothing changed: the engine's
            # earlier result (the validation below is this review's own).
            result, reused_from = result_reusable(run, digest, include_self=True)
            ReviewRun.objects.filter(pk=run.pk).update(
                omitted=[o.model_dump() for o in job.omitted],
                job_digest=digest,
                **({} if result else {"runner_result": None}),
            )
            if result is None:
                result = engines.engine_run(run.reviewer, reviewer, job, checkout.root,
                                            run_name=f"tasuku-run-{run.pk}-{held.attempt}")  # fmt: skip
                ReviewRun.objects.filter(pk=run.pk).update(
                    runner_result=result.model_dump(mode="json"), result_received_at=timezone.now()
                )
            if not result.incomplete:
                run_stage(held, Stage.VALIDATION)
                since = (
                    diff_parse(checkout.previous_diff)
                    if checkout.previous_diff is not None
                    else None
                )
                history = History(
                    earlier=frozenset(f.fingerprint for f in earlier),
                    positions=threads.positions(run, earlier, {}, since, previous),
                )
                stages.validate(core, result, config, history)
        beat.check()
        incomplete = result.incomplete if result else ""
        review = persist(run, core, result=result, incomplete=incomplete)
        rulings = {r.id for r in result.rulings if r.still_open} if result else set()
        reconciled = _reconcile(
            run, review, previous, checkout, rulings, examined=result is not None and not incomplete
        )
    status_reason = (
        "trivial: " + core.verdict.summary if core.stopped == "trivial" and core.verdict else ""
    )
    if incomplete:
        status_reason = f"incomplete: {incomplete}"
    run_finish(held, status=RunStatus.COMPLETED, reason=status_reason)
    run.refresh_from_db()
    return LocalReview(
        run, review, core, base_sha, head_sha, checkout.incremental_since, reconciled, reused_from
    )


def _reconcile(
    run: ReviewRun,
    review: Review,
    previous: str | None,
    checkout,
    still_open: set[str],
    *,
    examined: bool,
) -> list[Finding]:
    """Carry on, resolve or outdate the previous local review's open findings (the same
    decisions as on GitHub, with no threads to answer). A review whose engine did not run
    to the end (`examined` false: triaged trivial, incomplete) decides nothing: every
    earlier open finding is carried, its lines moved to where they are now."""
    earlier = threads.earlier_open(threads.previous_review(run, previous), run.head_sha)
    since_previous = (
        diff_parse(checkout.previous_diff) if checkout.previous_diff is not None else None
    )
    if examined:
        found_again = set(
            review.findings.exclude(category=INVALID).values_list("fingerprint", flat=True)
        ) | (still_open & {f.fingerprint for f in earlier})
        decisions = threads.decide(
            run,
            earlier,
            found_again,
            since_previous=since_previous,
            incremental=bool(checkout.incremental_since),
        )
    else:
        decisions = {f.fingerprint: Decision(CURRENT, "not re-examined") for f in earlier}
    threads.carry(review, earlier, decisions, threads.Conversation(), since_previous=since_previous)
    reconciled = []
    for finding in earlier:
        decision = decisions[finding.fingerprint]
        if decision.state == CURRENT:
            continue
        threads.mark_gone(finding, decision, run.head_sha)
        reconciled.append(finding)
    return reconciled

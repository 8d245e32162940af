"""Reviews of a local git repository (`manage.py review`): the one review pipeline
(reviews/pipeline/flow.py) with a local forge instead of GitHub. The review is recorded under
a local repository and shows on the dashboard; a later review of the same branch is
reconciled with the previous one. The command reports it as text, JSON or SARIF.
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from pathlib import Path

from django.db import transaction
from django.db.models import Max

from repos.models import LOCAL_INSTALLATION, Installation, Repository, Reviewer
from repos.policy import Trigger
from repos.selectors import effective_config, reviewer_config
from repos.services import policy_create_default, revision_for_config
from reviews.core import stages
from reviews.core.context import Context, Published
from reviews.models import Dismissal, Finding, PullRequest, Review, ReviewRun, Stage
from reviews.pipeline.flow import pipeline
from reviews.publication import threads
from reviews.queue.heartbeat import Heartbeat
from reviews.queue.runs import run_attempt_failed, run_claim, run_requeue
from reviews.validation.findings import Validated
from reviews.validation.reconcile import CURRENT, Decision
from sandbox.contract import ReviewResult
from sandbox.workspace import Checkout, Materialise, Workspace


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


def _remote_defaults(repo: Path, default: str) -> list[str]:
    """The remote branches a head on the default branch may be ahead of, most telling
    first: the current branch's upstream, the remote's default branch, and origin's
    branch of the default branch's name."""
    found = []
    upstream = _git(repo, "rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}")
    if upstream:
        found.append(upstream)
    remote_head = _git(repo, "symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD")
    if remote_head:
        found.append(remote_head)
    name = default.removeprefix("origin/")
    if _git(repo, "rev-parse", "--verify", "--quiet", f"refs/remotes/origin/{name}"):
        found.append(f"origin/{name}")
    return list(dict.fromkeys(found))


NOTHING_TO_REVIEW = (
    "pass --base (the last commit: --base HEAD~1; a branch's work: --base main --head <branch>)"
)


def refs_resolve(repo: Path, base: str | None, head: str | None) -> tuple[Path, str, str, str]:
    """(repository root, base SHA, head SHA, branch name); LocalReviewError otherwise.

    Without `base`: the merge base of the head with the default branch; for a head on
    the default branch itself (nothing there to compare with), with the remote's — the
    commits not pushed yet — and when there is none either, an error that says what to
    pass, never an empty review."""
    path = repo.expanduser()
    if not path.is_dir():
        raise LocalReviewError(f"not a directory: {repo}")
    top = _git(path, "rev-parse", "--show-toplevel")
    if not top:
        raise LocalReviewError(f"not a git repository: {repo}")
    root = Path(top)
    head_sha = _resolve(root, head or "HEAD")
    shown = head or "HEAD"
    if base:
        base_sha = _resolve(root, base)
        if base_sha == head_sha:
            raise LocalReviewError(
                f"--base {base} and {shown} are the same commit: nothing to review"
            )
    else:
        default = _default_branch(root)
        if default is None:
            raise LocalReviewError(
                "no default branch (main or master) to compare with: pass --base"
            )
        merge_base = _git(root, "merge-base", default, head_sha)
        if not merge_base:
            raise LocalReviewError(f"{shown} has no common history with {default}: pass --base")
        if merge_base == head_sha:
            # The head is on the default branch (or behind it): what is new there is
            # what the remote does not have yet.
            for remote in _remote_defaults(root, default):
                ahead = _git(root, "merge-base", remote, head_sha)
                if ahead and ahead != head_sha:
                    merge_base = ahead
                    break
            else:
                remotes = _remote_defaults(root, default)
                beyond = f" and nothing beyond {remotes[0]}" if remotes else ""
                raise LocalReviewError(
                    f"{shown} is on {default}{beyond}: no change to review against it; "
                    + NOTHING_TO_REVIEW
                )
        base_sha = merge_base
    branch = (
        head if head and head != "HEAD" else _git(root, "rev-parse", "--abbrev-ref", "HEAD")
    ) or "HEAD"
    return root, base_sha, head_sha, "detached" if branch == "HEAD" else branch


def local_repository(root: Path) -> Repository:
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


def local_pull_request(
    repository: Repository, branch: str, base_sha: str, head_sha: str
) -> PullRequest:
    with transaction.atomic():
        pull_request = PullRequest.objects.filter(repository=repository, head_ref=branch).first()
        if pull_request is None:
            number = (
                PullRequest.objects.filter(repository=repository).aggregate(n=Max("number"))["n"]
                or 0
            ) + 1
            pull_request = PullRequest.objects.create(
                repository=repository,
                number=number,
                title=f"Local branch {branch}",
                head_ref=branch,
                author_login="local",
                author_type="User",
            )
        PullRequest.objects.filter(pk=pull_request.pk).update(head_sha=head_sha, base_sha=base_sha)
    pull_request.head_sha, pull_request.base_sha = head_sha, base_sha
    return pull_request


class Local:
    """A branch of a local git repository as a pull request: no guards (the branch is
    there), a shared clone of the repository, no conversation, and a publication that
    records which earlier findings are gone (the command prints the review)."""

    # The branch head's run is executed again each time it is asked for.
    reexecutes = True
    dispatches = False
    # A local branch is nobody's team's habit: the repository's memory is not taught.
    learns = False

    def __init__(self, root: Path) -> None:
        self.root = root
        self.reconciled: list[Finding] = []  # earlier findings this review resolved or outdated

    def guards(self, ctx: Context) -> str | None:
        return None

    def checkout(
        self,
        ctx: Context,
        workspace: Workspace,
        previous: str | None,
        since: str | None,
        materialise: Materialise | None = None,
        agents: bool = True,
    ) -> Checkout:
        return workspace.checkout_local(
            repository=self.root,
            head_sha=ctx.run.head_sha,
            base_sha=ctx.run.base_sha,
            previous_sha=previous,
            since_sha=since,
            materialise=materialise,
            agents=agents,
        )

    def conversation(self, ctx: Context, earlier: list[Finding]) -> threads.Conversation:
        dismissed = Dismissal.objects.filter(pull_request=ctx.run.pull_request)
        return threads.Conversation(dismissed=dict(dismissed.values_list("fingerprint", "login")))

    def publish(
        self,
        ctx: Context,
        review: Review,
        result: ReviewResult,
        validated: list[Validated],
        *,
        open_now: list[Finding],
        earlier: list[Finding],
        decisions: dict[str, Decision],
        talk: threads.Conversation,
    ) -> Published:
        for finding in earlier:
            decision = decisions[finding.fingerprint]
            if decision.state != CURRENT:
                threads.mark_gone(finding, decision, ctx.run.head_sha)
                self.reconciled.append(finding)
        return Published(approved=False)

    def unauthorised_reopen(
        self,
        ctx: Context,
        earlier: list[Finding],
        decisions: dict[str, Decision],
        talk: threads.Conversation,
    ) -> list[str]:
        return []

    def under_way(self, ctx: Context, checkout: Checkout) -> None:
        return None  # the terminal that asked for the review is watching it

    def ended(self, run: ReviewRun) -> None:
        return None  # the command prints the report


def local_review(
    *, repo: Path, base: str | None, head: str | None, reviewer_slug: str
) -> LocalReview:
    """Review `head` of a local repository against `base` (default: its merge base with
    the default branch) and record the review: resolve the refs, find or create the
    local repository and its "pull request" (one per branch), then `review_execute`."""
    reviewer = reviewer_enabled(reviewer_slug)
    root, base_sha, head_sha, branch = refs_resolve(repo, base, head)
    repository = local_repository(root)
    pull_request = local_pull_request(repository, branch, base_sha, head_sha)
    return review_execute(pull_request, reviewer, base_sha, head_sha, Local(root))


def reviewer_enabled(slug: str) -> Reviewer:
    reviewer = Reviewer.objects.filter(slug=slug, enabled=True).first()
    if reviewer is None:
        raise LocalReviewError(f"no enabled reviewer named {slug!r}")
    return reviewer


def review_execute(
    pull_request: PullRequest, reviewer: Reviewer, base_sha: str, head_sha: str, forge: Local
) -> LocalReview:
    """One review of `head_sha`, in this process, through the one pipeline with `forge`:

    1. A run, claimed like any other (the same head reviewed again is re-run).
    2. The review pipeline with the forge: a checkout in a workspace, filters, guideline
       packs, triage, the budget, the engine in the local runner, validation,
       reconciliation with the pull request's previous review, the forge's publication.
    """
    repository = pull_request.repository
    given = reviewer_config(reviewer)
    config = effective_config(repository).model_copy(update={"reviewers": (given,)})
    recorded = {
        "config": config.model_dump(mode="json"),
        "reviewer_revision": revision_for_config(reviewer=reviewer, config=given),
    }
    run, created = ReviewRun.objects.get_or_create(
        pull_request=pull_request,
        reviewer=reviewer,
        head_sha=head_sha,
        trigger=Trigger.LOCAL,
        defaults={"base_sha": base_sha, **recorded},
    )
    if not created:
        run_requeue(run.pk, base_sha=base_sha, **recorded)
    held = run_claim(run.pk)
    if held is None:
        raise LocalReviewError("this branch is being reviewed right now; try again when it is done")
    run = ReviewRun.objects.select_related(
        "pull_request__repository__installation", "reviewer"
    ).get(pk=run.pk)
    with Heartbeat(held) as beat:
        ctx = Context(run=run, held=held, beat=beat, config=config, gateway=None, forge=forge)
        try:
            pipeline(ctx)
        except Exception as exc:
            # No retries later: the user is waiting for this one.
            stage = getattr(exc, "stage", "") or run.stage or Stage.SANDBOX
            run_attempt_failed(held, exc, stage=stage, final=True)
            raise
    run.refresh_from_db()
    return LocalReview(
        run=run,
        review=Review.objects.get(run=run),
        core=ctx.core,
        base_sha=base_sha,
        head_sha=head_sha,
        incremental_since=run.incremental_since or None,
        reconciled=forge.reconciled,
        reused_from=ctx.reused_from,
    )

"""Where a run's pull request lives, and where its review goes: a `Forge`
(reviews/core/context.py declares what one answers).

The pipeline (reviews/pipeline/flow.py) is the same wherever a change comes from. What
differs is asked of the run's forge: whether the pull request may still be reviewed
(its guards), its checkout, the conversation on it (threads and dismissals), what
publishing a review means, and how a run shows it is under way and how it ended (on
GitHub: the walkthrough comment, reviews/publication/walkthrough.py). GitHub's forge posts one review with inline comments,
answers and resolves threads, approves where allowed; a local git repository's
(`manage.py review`, reviews/local/review.py) records the findings' fates and leaves the
report to the command. The worker's runs are GitHub's; the pipeline imports no other.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from repos.github import GitHubError
from reviews.checks.gate import check_complete
from reviews.core.context import Context, Published
from reviews.intake.pull_requests import head_catch_up
from reviews.models import Finding, Review, ReviewRun, RunStatus
from reviews.publication import threads
from reviews.publication.fixes import fixes_request_after
from reviews.publication.review import (
    approval_decide,
    approval_withheld,
    approvals_dismiss,
    review_publish,
)
from reviews.publication.walkthrough import walkthrough_begin, walkthrough_end
from reviews.queue.runs import run_finish
from reviews.scope.secondaries import mount_all
from reviews.validation.findings import Validated
from reviews.validation.reconcile import Decision
from sandbox.contract import ReviewResult
from sandbox.workspace import Checkout, Materialise, Workspace


class GitHub:
    """A pull request on GitHub, through the gateway (repos/github/)."""

    reexecutes = False
    dispatches = True
    learns = True

    def guards(self, ctx: Context) -> str | None:
        """PR closed → skipped; head moved since the run was queued → cancelled as stale;
        repository disabled meanwhile → skipped. Each ends the run with its check run."""
        run = ctx.run
        if not ctx.repository.enabled:
            return _stop(
                ctx,
                RunStatus.SKIPPED,
                "reviews were disabled for this repository",
                "skipped",
                "Not reviewed: reviews are disabled",
                "Reviews were disabled for this repository after this run was queued.",
            )
        info = ctx.gateway.pull_request_get(ctx.repo, number=run.pull_request.number)
        if info.state != "open":
            return _stop(
                ctx,
                RunStatus.SKIPPED,
                "the pull request is closed",
                "skipped",
                "Not reviewed: the pull request is closed",
                "The pull request was closed before the review started.",
            )
        if info.head_sha != run.head_sha:
            if _answer_lags(ctx, info.head_sha):
                raise GitHubError(
                    f"GitHub still names {info.head_sha[:12]} as the head, an ancestor of "
                    f"{run.head_sha[:12]} that a push made the head: its answer lags behind "
                    "the push; asked again shortly",
                    permanent=False,
                    code="github-stale-head",
                )
            # GitHub's head is the one reviewed, whatever order the deliveries came in:
            # the newer head gets its run (if none exists, this makes it) before this
            # one steps aside for it.
            newer, refused = head_catch_up(ctx.repository, info, run.reviewer)
            then = (
                "the newer commit is reviewed instead."
                if newer is not None
                else f"the newer commit is not reviewed: {refused}."
            )
            return _stop(
                ctx,
                RunStatus.CANCELLED,
                f"stale: the head moved to {info.head_sha[:12]}",
                "cancelled",
                f"Superseded by {info.head_sha[:7]}",
                f"The pull request's head moved from `{run.head_sha[:12]}` to "
                f"`{info.head_sha[:12]}` before this review started; {then}",
                superseded_by=info.head_sha,
            )
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
        info = ctx.gateway.repository_get(ctx.repo)
        ctx.repository_info = info
        token = ctx.gateway.contents_token(ctx.repo)
        checkout = workspace.checkout(
            clone_url=info.clone_url,
            token=token,
            head_sha=ctx.run.head_sha,
            base_sha=ctx.run.base_sha,
            previous_sha=previous,
            since_sha=since,
            materialise=materialise,
            agents=agents,
            mirror=mirror_for(ctx.repository),
        )
        # Beside it, the approved secondary repositories (reviews/scope/secondaries.py).
        checkout.secondaries = mount_all(
            ctx.gateway, workspace.path, ctx.config.secondary_repositories, mirror=mirror_by_id
        )
        return checkout

    def conversation(self, ctx: Context, earlier: list[Finding]) -> threads.Conversation:
        return threads.conversation_read(
            ctx.gateway,
            ctx.repo,
            ctx.run.pull_request.number,
            ctx.run,
            earlier,
            ctx.gateway.app_slug(),
        )

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
        """One GitHub review (an approval where allowed), then the threads of the
        earlier findings answered: gone ones replied to and resolved, those resolved
        without the right reopened; Tasuku's earlier approvals dismissed while findings
        are open."""
        approve, notes = approval_decide(ctx, open_now)
        earlier_ids = {f.fingerprint for f in earlier}
        published = review_publish(
            ctx,
            review,
            result,
            validated,
            approve=approve,
            carried=earlier_ids,
            still_open=sum(1 for f in open_now if f.fingerprint in earlier_ids),
        )
        notes += published.notes
        number = ctx.run.pull_request.number
        notes += threads.close_threads(
            ctx.gateway, ctx.repo, number, ctx.run, earlier, decisions, talk.threads
        )
        notes += threads.suppression_replies(
            ctx.gateway, ctx.repo, number, ctx.run, review, earlier, decisions, talk.threads
        )
        notes += self.unauthorised_reopen(ctx, earlier, decisions, talk)
        if approval_withheld(ctx, open_now):
            notes += approvals_dismiss(ctx)
        return Published(published.approved, notes)

    def unauthorised_reopen(
        self,
        ctx: Context,
        earlier: list[Finding],
        decisions: dict[str, Decision],
        talk: threads.Conversation,
    ) -> list[str]:
        return threads.reopen_unauthorised(
            ctx.gateway, ctx.repo, ctx.run.pull_request.number, ctx.run, earlier, decisions, talk
        )

    def under_way(self, ctx: Context, checkout: Checkout) -> None:
        # The pull request's walkthrough comment says what changed and that the review
        # is under way; its sending is an outbox, never this run's failure or wait.
        walkthrough_begin(ctx, checkout)

    def ended(self, run: ReviewRun) -> None:
        current = walkthrough_end(run)  # the run as it ended, read once for both
        # A repository that opted in: the review's one-click fixes proposed as a pull
        # request of Tasuku's (an outbox too: never this run's failure or wait).
        fixes_request_after(current or run, current=current is not None)


GITHUB = GitHub()


def _answer_lags(ctx: Context, github_head: str) -> bool:
    """Whether GitHub's answer for the pull request's head lags behind this run's head:
    the run's head is a descendant of the one GitHub named (a push's webhook can arrive
    before GitHub's API shows the push). A force push back to an older commit is told
    apart by its own delivery, which supersedes this run before it starts."""
    try:
        comparison = ctx.gateway.compare(ctx.repo, base=github_head, head=ctx.run.head_sha)
    except GitHubError as exc:
        if not exc.permanent:
            raise
        return False  # one of them is gone: no lag to wait out
    return comparison.status == "ahead"


def _stop(
    ctx: Context,
    status: str,
    reason: str,
    conclusion: str,
    title: str,
    summary: str,
    superseded_by: str = "",
) -> str:
    check_complete(ctx, conclusion, title, summary)
    run_finish(ctx.held, status=status, reason=reason, superseded_by=superseded_by)
    return status


def mirror_for(repository) -> Path | None:
    """The repository's mirror in the checkout cache, by its GitHub id (a rename keeps
    it; no two repositories share one), or None with the cache off."""
    return mirror_by_id(repository.github_id)


def mirror_by_id(github_id: int) -> Path | None:
    """A repository's mirror, by its GitHub id: a secondary repository's too."""
    cache = settings.TASUKU_CHECKOUT_CACHE
    if not cache or cache.lower() == "off":
        return None
    return Path(cache) / f"{github_id}.git"

"""What a run carries through the pipeline (reviews/pipeline/flow.py) and its stages: the run,
its lease and heartbeat, its configuration, its mode (what its kind of run adds:
reviews/core/modes.py) and its forge (where its pull request lives: `Forge`, below, and
reviews/pipeline/forges.py), and the gateway to GitHub."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from repos.github import GitHubGateway, RepoRef
from repos.policy import EffectiveConfig
from reviews.core.modes import REVIEW, RunMode
from reviews.models import ReviewRun
from reviews.queue.heartbeat import Heartbeat
from reviews.queue.runs import Held, run_stage

if TYPE_CHECKING:
    from reviews.models import Finding, Review
    from reviews.publication.threads import Conversation
    from reviews.validation.findings import Validated
    from reviews.validation.reconcile import Decision
    from sandbox.contract import ReviewResult
    from sandbox.workspace import Checkout, Materialise, Workspace


@dataclass(frozen=True)
class Published:
    """What a forge's publishing did: whether the review approved the pull request, and
    what the review's notes say of it (what could not be done, and why)."""

    approved: bool
    notes: list[str] = field(default_factory=list)


class Forge(Protocol):
    # The run's row is executed again from its start each time it is asked for (a local
    # branch's head reviewed again): a result stored on it is an earlier execution's,
    # reused only when its job is the same one, never resumed as this attempt's.
    reexecutes: bool
    # A runner elsewhere (GitHub Actions) may be handed the job; else the engine runs here.
    dispatches: bool
    # Its reviews are folded into the repository's memory (reviews/memory/folds.py).
    learns: bool

    def guards(self, ctx: Context) -> str | None:
        """Why the run stops before it starts (it is then ended, its check run with
        it), or None to go on."""
        ...

    def checkout(
        self,
        ctx: Context,
        workspace: Workspace,
        previous: str | None,
        since: str | None,
        materialise: Materialise | None = None,
        agents: bool = True,
    ) -> Checkout: ...

    def conversation(self, ctx: Context, earlier: list[Finding]) -> Conversation:
        """What people said and did about the earlier findings: threads, dismissals."""
        ...

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
        talk: Conversation,
    ) -> Published:
        """Publish the review and settle the earlier findings that are gone (recorded
        resolved or outdated, their threads answered): whether the review approved the
        pull request, and what could not be done and why."""
        ...

    def unauthorised_reopen(
        self,
        ctx: Context,
        earlier: list[Finding],
        decisions: dict[str, Decision],
        talk: Conversation,
    ) -> list[str]:
        """Reopen what someone without the right to dismiss closed; returns notes."""
        ...

    def under_way(self, ctx: Context, checkout: Checkout) -> None:
        """The run has looked at the change (its checkout, filters and triage are in
        `ctx.core`): show where the pull request lives that it is being reviewed. Never
        raises: what the forge refuses here holds no review."""
        ...

    def ended(self, run: ReviewRun) -> None:
        """The run's execution has ended, whatever became of it (completed, failed,
        cancelled, skipped, or waiting to be tried again): show it there. Never raises."""
        ...


@dataclass
class Context:
    run: ReviewRun
    held: Held
    beat: Heartbeat
    config: EffectiveConfig
    gateway: GitHubGateway | None  # None where the forge is not GitHub
    forge: Forge
    mode: RunMode = REVIEW  # what this kind of run adds (reviews/core/modes.py)
    core: Any = None  # what the stages made of the checkout (reviews.core.stages.Core)
    repository_info: Any = None  # the repository as GitHub described it when cloned
    reused_from: int | None = None  # the run whose engine result this run reuses
    # Why this head is not reviewed in full ("" when it is): the ledger's files not
    # reviewed, a partial result. Known before publication: it withholds an approval.
    shortfall: str = ""

    @property
    def repository(self):
        return self.run.pull_request.repository

    @property
    def repo(self) -> RepoRef:
        """The repository as the gateway's calls name it."""
        return RepoRef.of(self.repository)

    def stage(self, stage: str) -> None:
        self.beat.check()
        run_stage(self.held, stage)
        self.run.stage = stage
        self.beat.at(stage)

"""Writes to pull requests and review runs: admission of `pull_request` events."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import ngettext

from repos import github
from repos.github import CheckRunOutput, RepoRef
from repos.github.budget import URGENT, writes_for
from repos.models import Installation, Repository, Reviewer
from repos.policy import POLICY_TRIGGERS, EffectiveConfig, Trigger
from repos.selectors import effective_config, effective_config_reviewers
from repos.services import installation_upsert, repository_upsert, revision_for_config
from reviews.checks.checkruns import run_check_ensure
from reviews.intake.admission import Admission, PullRequestFacts, admission_decide
from reviews.memory.outcomes import outcomes_harvest
from reviews.models import PullRequest, ReviewRun, RunStatus
from reviews.queue.runs import (
    PROCESS_TASK,
    run_cancel_request,
    run_ring_later,
    run_ring_ready,
    run_supersede_waiting,
    run_waiting_asked_again,
)
from webhooks import payloads
from webhooks.routing import Decision, Outcome

logger = logging.getLogger(__name__)


# GitHub's own bound on a description; what Tasuku keeps of it.
BODY_MAX = 65_536
# A requester's note is a sentence or two after the command; longer is cut.
NOTE_MAX = 2_000


def pull_request_record(
    *,
    repository: Repository,
    number: int,
    title: str,
    author_login: str,
    author_type: str,
    state: str,
    draft: bool,
    merged: bool,
    head_sha: str,
    head_ref: str,
    base_sha: str,
    base_ref: str,
    html_url: str,
    changed_files: int | None = None,
    github_id: int | None = None,
    body: str | None = None,
    head_repository: str | None = None,
    row: PullRequest | None = None,
    absent: bool = False,
) -> PullRequest:
    """The one writer of a pull request's row: what Tasuku last learnt of it, from a
    webhook's payload or from GitHub's API. `changed_files`, `github_id` and `body` are
    written when known; None keeps what the row holds. `row`: the row as its caller read
    it a moment ago (written by its id, not read again); `absent`: its caller found no
    row a moment ago (the INSERT is tried first)."""
    known = {
        name: value
        for name, value in (
            ("changed_files", changed_files),
            ("github_id", github_id),
            ("body", body[:BODY_MAX] if body is not None else None),
        )
        if value is not None
    }
    if head_repository is not None:
        # "" is a deleted fork (GitHub's head.repo is null); the base's own name is no fork.
        known["head_repository"] = head_repository
        known["from_fork"] = head_repository.lower() != repository.full_name.lower()
    values = {
        "title": title[:1024],
        "author_login": author_login,
        "author_type": author_type,
        "state": state,
        "draft": draft,
        "merged": merged,
        "head_sha": head_sha,
        "head_ref": head_ref,
        "base_sha": base_sha,
        "base_ref": base_ref,
        "html_url": html_url,
        **known,
    }
    # The row usually exists (every event of a pull request writes it): one UPDATE, then
    # its read — two statements where `update_or_create` took four (a savepoint, a locked
    # read, the write, the release). What is returned holds these values, as that did.
    now = timezone.now()
    if row is not None and PullRequest.objects.filter(pk=row.pk).update(**values, updated_at=now):
        for name, value in {**values, "updated_at": now}.items():
            setattr(row, name, value)
        row.repository = repository
        return row
    rows = PullRequest.objects.filter(repository=repository, number=number)
    if absent or not rows.update(**values, updated_at=now):
        try:
            with transaction.atomic():
                pull_request = PullRequest.objects.create(
                    repository=repository, number=number, **values
                )
            return pull_request
        except IntegrityError:
            # Another delivery created it between our look (or UPDATE) and the INSERT.
            rows.update(**values, updated_at=now)
    pull_request = rows.get()
    for name, value in values.items():
        setattr(pull_request, name, value)
    pull_request.repository = repository  # the row it names, already in hand
    return pull_request


def pull_request_sync(
    *,
    repository: Repository,
    pull: payloads.PullRequest,
    row: PullRequest | None = None,
    absent: bool = False,
) -> PullRequest:
    """Record what a payload says of a pull request (title, state, heads, author); `row`
    and `absent` as `pull_request_record` takes them."""
    user = pull.user or payloads.NO_USER
    return pull_request_record(
        row=row,
        absent=absent,
        repository=repository,
        number=pull.number,
        github_id=pull.id,
        title=pull.title,
        author_login=user.login,
        author_type=user.type,
        state=pull.state or "open",
        draft=pull.draft,
        merged=bool(pull.merged),
        head_sha=pull.head.sha,
        head_ref=pull.head.ref,
        base_sha=pull.base.sha,
        base_ref=pull.base.ref,
        html_url=pull.html_url,
        changed_files=pull.changed_files,
        body=pull.body or "",  # GitHub sends null for an empty description
        head_repository=(pull.head.repo.full_name if pull.head.repo else "")
        if pull.head.repository_known
        else None,
    )


def pull_request_from_info(repository: Repository, info: github.PullRequestInfo) -> PullRequest:
    """Record the pull request as GitHub's API answered for it."""
    return pull_request_record(
        repository=repository,
        number=info.number,
        title=info.title,
        author_login=info.author_login,
        author_type=info.author_type,
        state="closed" if info.merged else info.state,
        draft=info.draft,
        merged=info.merged,
        head_sha=info.head_sha,
        head_ref=info.head_ref,
        base_sha=info.base_sha,
        base_ref=info.base_ref,
        html_url=info.html_url,
        changed_files=info.changed_files,
        body=info.body,
        head_repository=info.head_repository,
    )


def pull_request_refresh(
    installation: Installation, repository: Repository, number: int
) -> PullRequest:
    """The pull request as GitHub has it now (comment events carry no head SHA; a late
    delivery's is out of date)."""
    info = github.gateway().pull_request_get(
        RepoRef.of(repository, installation),
        number=number,
    )
    return pull_request_from_info(repository, info)


# Actions that change a pull request's state at the same head: delivered out of order
# (a `closed` after the `reopened` that followed it), the older one changes nothing —
# told apart by the `updated_at` GitHub stamps on each.
STATE_ACTIONS = ("closed", "reopened")


def _when(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def state_outdated(repository: Repository, payload: payloads.PullRequestEvent) -> bool:
    """Whether a closing or reopening event is older than the one that set the state on
    record (GitHub delivers in no order)."""
    if payload.action not in STATE_ACTIONS:
        return False
    when = _when(payload.pull_request.updated_at)
    known = (
        PullRequest.objects.filter(repository=repository, number=payload.pull_request.number)
        .values_list("state_changed_at", flat=True)
        .first()
    )
    return when is not None and known is not None and when < known


def pull_request_current(
    installation: Installation, repository: Repository, payload: payloads.PullRequestEvent
) -> PullRequest:
    """The pull request as it is now, from a `pull_request` delivery. GitHub does not
    deliver in order (and a redelivered event can be hours old), so the payload's head
    is taken only when it follows from what Tasuku knows: the same head, the first word
    of the pull request, or a `synchronize` whose `before` is the head on record. Any
    other head — an older push delivered late, an event redelivered, a push whose
    delivery is missing — is asked of GitHub, whose answer is the head: a late delivery
    never takes the pull request back to an older commit."""
    pull = payload.pull_request
    # The whole row: written by its id next, when the payload's head follows.
    row = PullRequest.objects.filter(repository=repository, number=pull.number).first()
    known = row.head_sha if row is not None else None
    follows = (
        known is None
        or known == pull.head.sha
        or (payload.action == "synchronize" and payload.before == known)
    )
    if follows:
        pull_request = pull_request_sync(
            repository=repository, pull=pull, row=row, absent=row is None
        )
        when = _when(pull.updated_at)
        if payload.action in STATE_ACTIONS and when is not None:
            PullRequest.objects.filter(pk=pull_request.pk).update(state_changed_at=when)
        return pull_request
    logger.info(
        "%s#%d: the delivery's head %s does not follow %s: asking GitHub",
        repository.full_name,
        pull.number,
        pull.head.sha[:7],
        known[:7],
    )
    return pull_request_refresh(installation, repository, pull.number)


# Triggers a person or GitHub asks for explicitly: each may review a head again. Pull
# request events are idempotent per head: one review of a head is enough.
EXPLICIT_TRIGGERS = (
    Trigger.COMMAND,
    Trigger.RETARGET,  # the same head, another base: a new review
    Trigger.FULL_REVIEW_COMMAND,
    Trigger.REVIEW_REQUESTED,
    Trigger.RERUN,
    Trigger.MANUAL,
)


def run_request(
    *,
    pull_request: PullRequest,
    reviewer: Reviewer,
    trigger: Trigger,
    config: EffectiveConfig,
    delivery_id: int | None = None,
    status: str = RunStatus.QUEUED,
    reason: str = "",
    requested_by: str = "",
    note: str = "",
) -> tuple[ReviewRun, bool]:
    """A run for the pull request's current head, coalesced with what is already there.
    The caller ensures the run's check run and then rings it (`run_ring_ready`).

    - A run of this head already waiting: the trigger joins it (a full-review request
      upgrades it); nothing new.
    - A pull request event for a head that already has a run (running, done or skipped):
      nothing new — redelivered or repeated events review nothing twice.
    - A run waiting for an older head: cancelled, superseded by this head.
    - Otherwise a new run (at most one waiting and one running per PR and reviewer).
    """
    head = pull_request.head_sha
    same_head = ReviewRun.objects.filter(
        pull_request=pull_request, reviewer=reviewer, head_sha=head
    )
    with transaction.atomic():
        # This head's runs that may answer the request, newest first, in one read: the one
        # waiting (at most one: `run_one_queued_per_reviewer`) and the newest that did
        # not fail and was not cancelled.
        answering = [
            _known(run, pull_request, reviewer)
            for run in same_head.exclude(
                status__in=(RunStatus.FAILED, RunStatus.CANCELLED)
            ).order_by("-pk")
        ]
        waiting = next((run for run in answering if run.status == RunStatus.QUEUED), None)
        if waiting is not None and status == RunStatus.QUEUED:
            # A full review asked of it, and the latest request's words, go with the
            # run that will answer it.
            run_waiting_asked_again(
                waiting.pk,
                trigger=trigger
                if trigger == Trigger.FULL_REVIEW_COMMAND and waiting.trigger != trigger
                else "",
                requested_by=requested_by or "",
                note=note[:NOTE_MAX] if requested_by else "",
            )
            return waiting, False
        if answering and (trigger not in EXPLICIT_TRIGGERS or status != RunStatus.QUEUED):
            return answering[0], False
        older = ReviewRun.objects.filter(pull_request=pull_request, reviewer=reviewer).exclude(
            head_sha=head
        )
        going = Q(status=RunStatus.RUNNING, cancel_requested_at__isnull=True)
        under_way = older.filter(going)
        # Older heads' runs waiting, and those under way not yet asked to stop: one read.
        found = list(older.filter(Q(status=RunStatus.QUEUED) | going).values_list("pk", "status"))
        stale = f"stale: superseded by {head[:12]}"
        taken = False  # a waiting run a worker took meanwhile is under way now
        for pk, was in found:
            if was == RunStatus.QUEUED:
                taken |= not run_supersede_waiting(pk, stale, superseded_by=head)
        # A review of an older head under way: it is asked to stop (its worker stops
        # before its next GitHub call), so it posts nothing on a head nobody will merge.
        running = (
            under_way.values_list("pk", flat=True)
            if taken
            else [pk for pk, was in found if was == RunStatus.RUNNING]
        )
        for pk in running:
            run_cancel_request(pk, stale, superseded_by=head)
        try:
            with transaction.atomic():
                run = ReviewRun.objects.create(
                    pull_request=pull_request,
                    reviewer=reviewer,
                    head_sha=head,
                    base_sha=pull_request.base_sha,
                    trigger=trigger.value,
                    status=status,
                    reason=reason,
                    config=config.model_dump(mode="json"),
                    reviewer_revision=revision_for_config(
                        reviewer=reviewer,
                        config=next((r for r in config.reviewers if r.slug == reviewer.slug), None),
                    ),
                    delivery_id=delivery_id,
                    requested_by=requested_by,
                    requester_note=note[:NOTE_MAX],
                    # Rung by the caller once the run's check run exists (run_ring_ready):
                    # a worker that took it before would find no check run and create a
                    # second.
                    **(run_ring_later() if status == RunStatus.QUEUED else {}),
                )
        except IntegrityError:
            # Another trigger for this PR and reviewer queued a run a moment ago: join it.
            return ReviewRun.objects.get(
                pull_request=pull_request, reviewer=reviewer, status=RunStatus.QUEUED
            ), False
    return run, True


def _known(run: ReviewRun, pull_request: PullRequest, reviewer: Reviewer) -> ReviewRun:
    """A run read by its pull request and reviewer, given the rows in hand (its caller
    names its reviewer and looks at its check run: no second read of either)."""
    run.pull_request, run.reviewer = pull_request, reviewer
    return run


def run_check_then_ring(
    run: ReviewRun, *, created: bool, installation: Installation, **check: Any
) -> None:
    """Ensure the run's check run, then ring the run if nobody has: a run is rung only
    once its check run exists, so one without a check run was never rung (its first
    admission died, or GitHub refused the check run) and one with it was. A worker that
    took a run before its check run existed would create a second one."""
    had_check = bool(run.check_run_id)
    # The first write of a review: it comes before the backlog's (repos/github/budget.py).
    with writes_for(URGENT):
        run_check_ensure(run, created=created, installation=installation, **check)
    if not had_check:
        run_ring_ready(run)


def head_catch_up(
    repository: Repository, info: github.PullRequestInfo, reviewer: Reviewer
) -> tuple[ReviewRun | None, str]:
    """A run of `reviewer` found that the pull request's head moved on to a commit that
    may have no run (its delivery late, lost, or superseded by an older one): record
    GitHub's answer and see that the new head has its run, admitted as its push would
    be. Returns that run (None when the policy does not review it) and what was said."""
    pull_request = pull_request_from_info(repository, info)
    if not repository.enabled or pull_request.state != "open":
        return None, "the pull request is not reviewed now"
    config = effective_config(repository)
    if reviewer.slug not in {r.slug for r in config.reviewers}:
        return None, f"{reviewer.slug} no longer reviews this repository"
    admission = admission_for(pull_request, action=Trigger.SYNCHRONIZE.value, config=config)
    if not admission.admitted:
        return None, admission.reason
    run, created = run_request(
        pull_request=pull_request,
        reviewer=reviewer,
        trigger=Trigger.SYNCHRONIZE,
        config=config,
    )
    run_check_then_ring(run, created=created, installation=repository.installation)
    return run, ""


def runs_create(
    *,
    pull_request: PullRequest,
    config: EffectiveConfig,
    trigger: Trigger,
    admission: Admission,
    delivery_id: int | None,
    reviewers: dict[str, Reviewer] | None = None,
) -> list[tuple[ReviewRun, bool]]:
    """One run per reviewer in `config` (see `run_request`). Returns each run with whether
    this call created it. A skipped admission that completes a check run is recorded as
    a `skipped` run, so the check run has a page (`/runs/<id>/`) that says why, and a
    repeated delivery does not post it twice."""
    if reviewers is None:  # `reviewers`: the rows `config` was made of (by slug)
        reviewers = {
            r.slug: r for r in Reviewer.objects.filter(slug__in=[c.slug for c in config.reviewers])
        }
    return [
        run_request(
            pull_request=pull_request,
            reviewer=reviewers[reviewer_config.slug],
            trigger=trigger,
            config=config,
            delivery_id=delivery_id,
            status=RunStatus.QUEUED if admission.admitted else RunStatus.SKIPPED,
            reason="" if admission.admitted else admission.reason,
        )
        for reviewer_config in config.reviewers
    ]


def admission_for(
    pull_request: PullRequest, *, action: str, config: EffectiveConfig, explicit: bool = False
) -> Admission:
    """The one admission decision, for every way a review is asked for: pull request
    events, comment commands, review requests, re-runs and the dashboard's buttons
    (`explicit`: a person asked for this head, so the policy's event toggles and its
    draft rule do not apply; every other rule does, the file limit included)."""
    repository = pull_request.repository
    installation = repository.installation
    changed_files = pull_request.changed_files
    if changed_files is None:
        changed_files = (
            github.gateway()
            .pull_request_get(
                RepoRef.of(repository, installation),
                number=pull_request.number,
            )
            .changed_files
        )

    def accessible() -> bool:
        reachable = github.gateway().repository_installation_id(repository.full_name)
        return reachable == installation.github_id

    return admission_decide(
        facts=PullRequestFacts(
            action=action,
            draft=pull_request.draft,
            author_login=pull_request.author_login,
            author_type=pull_request.author_type,
            changed_files=int(changed_files),
        ),
        config=config,
        installation_active=installation.active,
        repository_enabled=repository.enabled,
        repository_accessible=accessible,
        explicit=explicit,
    )


def repository_from_payload(
    payload: payloads.RepositoryEvent,
) -> tuple[Installation, Repository] | Outcome:
    """The installation and repository a delivery is about, learnt from it if new (the
    App may have been installed before Tasuku ran)."""
    if payload.installation is None:
        return Outcome.ignore("no installation in the payload: not a GitHub App delivery")
    repo_data = payload.repository
    # The repository, its installation and its policy in one read: the usual delivery,
    # of a repository known and still in the installation that sent it.
    known = Repository.objects.select_related("installation", "policy").filter(
        github_id=repo_data.id
    )
    repository = known.first()
    if repository is not None and repository.installation.github_id == payload.installation.id:
        installation = repository.installation
    else:
        installation = Installation.objects.filter(github_id=payload.installation.id).first()
        if installation is None:
            installation = installation_upsert(
                github_id=payload.installation.id,
                account_login=repo_data.owner.login,
                account_type=repo_data.owner.type,
                absent=True,
            )
    repository = repository_upsert(
        installation=installation,
        github_id=repo_data.id,
        full_name=repo_data.full_name,
        private=repo_data.private,
        default_branch=repo_data.default_branch,
        row=repository,
    )
    # Its installation is the one just read (the upsert holds it to it): no second read.
    repository.installation = installation
    return installation, repository


def retarget(
    payload: payloads.PullRequestEvent,
    installation: Installation,
    pull_request: PullRequest,
    *,
    delivery_id: int,
) -> Outcome:
    """`pull_request.edited` with a new base branch: the pull request is now a different
    change (what its base lacks), so its head is reviewed again in full against the new
    base, and its earlier findings on lines it no longer changes are outdated
    (reviews/validation/reconcile.py). Admitted as a push is: a policy that reviews pushes reviews
    retargets. Once per head and base: a redelivered event reviews nothing twice."""
    label = f"{pull_request.repository.full_name}#{pull_request.number}"
    was = payload.changes.base.ref.from_
    if pull_request.state != "open":
        return Outcome.ignore(f"{label} is closed: its new base is not reviewed")
    reviewed = ReviewRun.objects.filter(
        pull_request=pull_request, head_sha=pull_request.head_sha,
        base_sha=pull_request.base_sha, trigger=Trigger.RETARGET,
    ).exists()  # fmt: skip
    if reviewed:
        return Outcome.ignore(f"{label} was reviewed against {pull_request.base_ref} already")
    config = effective_config(pull_request.repository)
    admission = admission_for(pull_request, action=Trigger.SYNCHRONIZE.value, config=config)
    if not admission.admitted:
        return Outcome(
            f"retargeted {label} not reviewed: {admission.reason}", decision=Decision.SKIPPED
        )
    runs = []
    for reviewer in Reviewer.objects.filter(slug__in=[r.slug for r in config.reviewers]):
        run, created = run_request(
            pull_request=pull_request, reviewer=reviewer, trigger=Trigger.RETARGET,
            config=config, delivery_id=delivery_id,
        )  # fmt: skip
        run_check_then_ring(run, created=created, installation=installation)
        runs.append(run)
    logger.info(
        "retargeted %s from %s to %s: %d runs", label, was, pull_request.base_ref, len(runs)
    )
    return Outcome(
        f"retargeted {label} from {was} to {pull_request.base_ref}: reviewed again against it",
        decision=Decision.ADMITTED,
    )


def pull_request_event(payload: payloads.PullRequestEvent, *, delivery_id: int) -> Outcome:
    """Handle a `pull_request` delivery.

    1. Record the pull request as the payload describes it.
    2. Actions that are not review triggers stop here (closed, labeled, edited ...).
    3. Admission (reviews/intake/admission.py) against the repository's effective config.
    4. Admitted: one queued run per enabled reviewer, each with a queued check run.
       Skipped with a check verdict (bot, excluded author, too many files): one skipped
       run per reviewer, each with a completed check run saying why.
    """
    action = payload.action
    found = repository_from_payload(payload)
    if isinstance(found, Outcome):
        return found
    installation, repository = found
    if state_outdated(repository, payload):
        return Outcome.ignore(
            f"pull_request.{action} of {repository.full_name}#{payload.pull_request.number} "
            "is older than the state on record (delivered late): nothing changes"
        )
    pull_request = pull_request_current(installation, repository, payload)
    label = f"{repository.full_name}#{pull_request.number}"

    if action == "closed":
        verb = "merged" if pull_request.merged else "closed"
        harvested = outcomes_harvest(pull_request)
        return Outcome(f"{label} {verb}; {harvested} finding outcomes recorded")
    if action == "review_requested":
        # GitHub does not let an App be a requested reviewer (its bot cannot be picked
        # under *Reviewers*), so a review request is never one for Tasuku.
        return Outcome.ignore(
            "review requests are for people: GitHub does not let an App be requested as a "
            "reviewer (ask Tasuku with a comment command)"
        )
    if action == "edited":
        if payload.changes is None or payload.changes.base is None:
            return Outcome.ignore(
                "pull_request.edited (its title or description) does not trigger a review"
            )
        return retarget(payload, installation, pull_request, delivery_id=delivery_id)
    if action not in POLICY_TRIGGERS:
        return Outcome.ignore(f"pull_request.{action} does not trigger a review")

    config, reviewers = effective_config_reviewers(repository, policy_read=True)
    admission = admission_for(pull_request, action=action, config=config)
    if not admission.admitted and admission.check is None:
        return Outcome(f"skipped {label}: {admission.reason}", decision=Decision.SKIPPED)

    runs = runs_create(
        pull_request=pull_request,
        config=config,
        trigger=Trigger(action),
        admission=admission,
        delivery_id=delivery_id,
        reviewers=reviewers,
    )
    verdict = admission.check
    for run, created in runs:
        if verdict is None:
            run_check_then_ring(run, created=created, installation=installation)
        else:
            run_check_then_ring(
                run,
                created=created,
                installation=installation,
                conclusion=verdict.conclusion,
                output=CheckRunOutput(title=verdict.title, summary=verdict.summary),
            )
    if admission.admitted:
        said = admission.reason
        known = [run for run, created in runs if not created]
        if known:
            # Not queued by this delivery: say what stands instead of "queued".
            joined = "; ".join(
                f"{run.reviewer.slug}'s run {run.pk} for {run.head_sha[:7]} is "
                f"{run.get_status_display()} already"
                for run in known
            )
            fresh = len(runs) - len(known)
            said = ngettext(
                "%(count)d reviewer queued; %(joined)s",
                "%(count)d reviewers queued; %(joined)s",
                fresh,
            ) % {"count": fresh, "joined": joined}
        logger.info("admitted %s@%s: %s", label, pull_request.head_sha[:7], said)
        queued = [run.pk for run, created in runs if created and run.status == RunStatus.QUEUED]
        return Outcome(
            f"admitted {label}: {said}",
            decision=Decision.ADMITTED,
            then=tuple((PROCESS_TASK, pk) for pk in queued[:1]),
        )
    return Outcome(f"skipped {label}: {admission.reason}", decision=Decision.SKIPPED)

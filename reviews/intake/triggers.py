"""Reviews asked for beyond pull request events: comment commands, a review request for
the App, a re-run of a check, and the dashboard's "Review now" buttons.

Each asks GitHub for the pull request's current head, checks the repository may be
reviewed, and requests runs (coalesced with any waiting or running one).
"""

from __future__ import annotations

import logging
import re

from django.db import IntegrityError, transaction

from repos import github
from repos.github import RepoRef
from repos.models import Installation, Repository, Reviewer
from repos.policy import Trigger
from repos.selectors import effective_config, write_access
from reviews.checks.checkruns import REREVIEW
from reviews.intake.pull_requests import (
    NOTE_MAX,
    admission_for,
    pull_request_refresh,
    repository_from_payload,
    run_check_then_ring,
    run_request,
)
from reviews.models import CommandComment, Notice, PullRequest, ReviewRun
from reviews.text.markers import marker as signed_marker
from webhooks import payloads
from webhooks.routing import Decision, Outcome

logger = logging.getLogger(__name__)


def command_acted_on(repository: Repository, comment_id: int, delivery_id: int) -> str | None:
    """Record that this delivery acts on the comment's command; None when it may (the
    first delivery of the comment, or that delivery tried again), else the delivery
    that acted on it already."""
    record, _ = CommandComment.objects.get_or_create(
        repository=repository, comment_id=comment_id, defaults={"delivery_id": delivery_id}
    )
    if record.delivery_id == delivery_id:
        return None
    return str(record.delivery_id)


def help_text(slug: str) -> str:
    return (
        f"Tasuku's commands (from people with write access to this repository):\n\n"
        f"- `@{slug} review [note]` — review the changes since the last review (a note "
        f"after it, such as what to look at, goes to the reviewer)\n"
        f"- `@{slug} full review [note]` — review the whole pull request again\n"
        f"- `@{slug} dismiss <reason>` — in a finding's thread: dismiss that finding\n"
        f"- `@{slug} help` — this list"
    )


def command_note(body: str, slug: str) -> str:
    """What a person said with their `@slug review` / `@slug full review`: the rest of
    the line after the command, and the lines after it ("" when nothing)."""
    match = re.search(
        rf"(?<![\w/-])@{re.escape(slug)}(?:\[bot\])?\b[ \t:,-]*(?:full[ \t]+)?(?:re)?review\b(.*)",
        body or "",
        re.IGNORECASE | re.DOTALL,
    )
    if match is None:
        return ""
    return match.group(1).strip(" \t:,-\n")[:NOTE_MAX]


def command_parse(body: str, slug: str) -> str | None:
    """The command addressed to `@slug` in a comment: "review", "full review", "help",
    or "unknown"; None when the comment does not address Tasuku."""
    match = re.search(
        rf"(?<![\w/-])@{re.escape(slug)}(?:\[bot\])?\b(.*)", body or "", re.IGNORECASE
    )
    if match is None:
        return None
    words = re.findall(r"[a-z]+", match.group(1).lower())[:3]
    if words[:2] == ["full", "review"]:
        return "full review"
    if words[:1] in (["review"], ["rereview"]):
        return "review"
    if words[:1] == ["help"]:
        return "help"
    return "unknown"


def runs_request_for(
    pull_request: PullRequest,
    trigger: Trigger,
    *,
    reviewers: list[Reviewer] | None = None,
    delivery_id: int | None = None,
    requested_by: str = "",
    note: str = "",
) -> tuple[list[ReviewRun], str]:
    """Runs for the pull request's head, each with its check run; or no runs and why.
    `requested_by` and `note`: who asked, and what they said with it."""
    repository = pull_request.repository
    installation = repository.installation
    if not installation.active:
        return [], "the App's installation is suspended or removed"
    if not repository.enabled:
        return [], "reviews are disabled for this repository"
    if pull_request.state != "open":
        return [], "the pull request is closed"
    config = effective_config(repository)
    if reviewers is None:
        slugs = [r.slug for r in config.reviewers]
        reviewers = list(Reviewer.objects.filter(slug__in=slugs).order_by("slug"))
    if not reviewers:
        return [], "no enabled reviewer on this repository's policy"
    admission = admission_for(pull_request, action=trigger.value, config=config, explicit=True)
    if not admission.admitted:
        return [], admission.reason
    runs = []
    for reviewer in reviewers:
        run, created = run_request(
            pull_request=pull_request,
            reviewer=reviewer,
            trigger=trigger,
            config=config,
            delivery_id=delivery_id,
            requested_by=requested_by,
            note=note,
        )
        run_check_then_ring(run, created=created, installation=installation)
        runs.append(run)
    return runs, ""


def _answer(
    installation: Installation, repository: Repository, number: int, body: str, key: str
) -> None:
    marker = signed_marker("command", key)
    github.gateway().issue_comment_create(
        RepoRef.of(repository, installation),
        number=number,
        body=f"{body}\n\n{marker}",
        marker=marker,
    )


def issue_comment_event(payload: payloads.IssueCommentEvent, *, delivery_id: int) -> Outcome:
    """`issue_comment.created` on a pull request: Tasuku's comment commands.

    1. Only new comments on pull requests, by people (never bots, Tasuku included).
    2. A comment that does not address `@<slug>` is ignored.
    3. Without write access (GitHub's collaborator permission: write, maintain or
       admin): a polite refusal, once per person and pull request.
    4. `help`, or an unknown command: the list of commands. `review` / `full review`:
       runs for the current head (a full review ignores earlier reviews), once per
       comment — a delivery of the same comment under another delivery id (a captured
       delivery replayed) starts nothing.
    """
    if payload.action != "created":
        return Outcome.ignore(f"issue_comment.{payload.action} needs no action")
    if not payload.issue.is_pull_request:
        return Outcome.ignore("a comment on an issue, not on a pull request")
    comment = payload.comment
    user = comment.user or payloads.NO_USER
    if user.type == "Bot":
        return Outcome.ignore("comments by bots are not commands")
    found = repository_from_payload(payload)
    if isinstance(found, Outcome):
        return found
    installation, repository = found
    slug = github.gateway().app_slug()
    command = command_parse(comment.body, slug)
    number = payload.issue.number
    label = f"{repository.full_name}#{number}"
    if command is None:
        return Outcome.ignore("the comment does not address Tasuku")
    login = user.login
    if not write_access(installation, repository, login):
        pull_request = PullRequest.objects.filter(repository=repository, number=number).first()
        if pull_request is None:
            pull_request = pull_request_refresh(installation, repository, number)
        try:
            with transaction.atomic():
                Notice.objects.create(
                    pull_request=pull_request, kind="command-refused", login=login
                )
        except IntegrityError:
            return Outcome.ignore(f"{login} may not give commands on {label} (told once already)")
        _answer(
            installation,
            repository,
            number,
            f"Sorry @{login}, only people with write access to this repository (owners, members "
            f"and collaborators) can give Tasuku commands.",
            f"refused-{login}",
        )
        return Outcome(f"refused a command by {login} on {label}: no write access")
    if command in ("help", "unknown"):
        _answer(installation, repository, number, help_text(slug), f"help-{comment.id}")
        return Outcome(f"answered {command} on {label}")
    acted = command_acted_on(repository, comment.id, delivery_id)
    if acted is not None:
        return Outcome.ignore(
            f"the {command} command of comment {comment.id} on {label} was acted on already "
            f"(delivery {acted})"
        )
    pull_request = pull_request_refresh(installation, repository, number)
    trigger = Trigger.FULL_REVIEW_COMMAND if command == "full review" else Trigger.COMMAND
    runs, refusal = runs_request_for(
        pull_request,
        trigger,
        delivery_id=delivery_id,
        requested_by=login,
        note=command_note(comment.body, slug),
    )
    if refusal:
        _answer(
            installation,
            repository,
            number,
            f"Tasuku cannot review this pull request: {refusal}.",
            f"cannot-{comment.id}",
        )
        return Outcome(f"{command} on {label} refused: {refusal}", decision=Decision.SKIPPED)
    return Outcome(
        f"{command} requested by {login} on {label}: run {', '.join(str(r.pk) for r in runs)}",
        decision=Decision.ADMITTED,
    )


def _run_of_check(check: payloads.CheckRun) -> ReviewRun | None:
    """The run whose check run this is (its external id), if it is one of Tasuku's."""
    external = check.external_id or ""
    previous = (
        ReviewRun.objects.filter(pk=int(external))
        .select_related("pull_request__repository", "reviewer")
        .first()
        if external.isdigit()
        else None
    )
    if previous is None or previous.check_run_id not in (None, check.id):
        return None
    return previous


def check_run_event(payload: payloads.CheckRunEvent, *, delivery_id: int) -> Outcome:
    """`check_run.rerequested` on one of Tasuku's check runs: a new run for that head.
    `check_run.requested_action`: its Re-review button (check_run_rereview)."""
    action = payload.action
    if action == "requested_action":
        return check_run_rereview(payload, delivery_id=delivery_id)
    if action != "rerequested":
        return Outcome.ignore(f"check_run.{action} needs no action")
    check = payload.check_run
    previous = _run_of_check(check)
    if previous is None:
        return Outcome.ignore("not one of Tasuku's check runs")
    found = repository_from_payload(payload)
    if isinstance(found, Outcome):
        return found
    pull_request = pull_request_refresh(found[0], found[1], previous.pull_request.number)
    runs, refusal = runs_request_for(
        pull_request, Trigger.RERUN, reviewers=[previous.reviewer], delivery_id=delivery_id
    )
    label = f"{pull_request.repository.full_name}#{pull_request.number}"
    if refusal:
        return Outcome(f"re-run on {label} skipped: {refusal}", decision=Decision.SKIPPED)
    return Outcome(
        f"re-run of {previous.reviewer.slug} on {label}: run {runs[0].pk}",
        decision=Decision.ADMITTED,
    )


def check_run_rereview(payload: payloads.CheckRunEvent, *, delivery_id: int) -> Outcome:
    """The Re-review button of one of Tasuku's check runs (`check_run.requested_action`).

    1. Only Tasuku's own button on one of its check runs, pressed by a person.
    2. Without write access (GitHub's collaborator permission: write, maintain or
       admin): refused, and nothing runs — GitHub shows the button to anyone who can
       see the check run.
    3. A head the pull request has left is not reviewed again (its newer head has a
       check run of its own).
    4. Otherwise a fresh review of that head by the check's reviewer (a re-run: the
       engine looks anew), once per delivery.
    """
    if payload.requested_action is None or payload.requested_action.identifier != REREVIEW:
        return Outcome.ignore("not a button Tasuku offers")
    check = payload.check_run
    previous = _run_of_check(check)
    if previous is None:
        return Outcome.ignore("not one of Tasuku's check runs")
    sender = payload.sender or payloads.NO_USER
    if sender.type == "Bot":
        return Outcome.ignore("buttons pressed by bots ask for nothing")
    found = repository_from_payload(payload)
    if isinstance(found, Outcome):
        return found
    installation, repository = found
    label = f"{repository.full_name}#{previous.pull_request.number}"
    if not write_access(installation, repository, sender.login):
        logger.info("re-review of %s refused: %s has no write access", label, sender.login)
        return Outcome(
            f"re-review on {label} refused: {sender.login or 'someone unknown'} has no write "
            "access",
            decision=Decision.SKIPPED,
        )
    made = ReviewRun.objects.filter(delivery_id=delivery_id).first()
    if made is not None:
        return Outcome.ignore(f"this delivery asked for run {made.pk} already")
    pull_request = pull_request_refresh(installation, repository, previous.pull_request.number)
    if pull_request.head_sha != check.head_sha:
        return Outcome(
            f"re-review on {label} skipped: the pull request has moved on to "
            f"{pull_request.head_sha[:7]}",
            decision=Decision.SKIPPED,
        )
    runs, refusal = runs_request_for(
        pull_request,
        Trigger.RERUN,
        reviewers=[previous.reviewer],
        delivery_id=delivery_id,
        requested_by=sender.login,
    )
    if refusal:
        return Outcome(f"re-review on {label} skipped: {refusal}", decision=Decision.SKIPPED)
    return Outcome(
        f"re-review of {previous.reviewer.slug} on {label} asked by {sender.login}: "
        f"run {runs[0].pk}",
        decision=Decision.ADMITTED,
    )


def check_suite_event(payload: payloads.CheckSuiteEvent, *, delivery_id: int) -> Outcome:
    if payload.action != "rerequested":
        return Outcome.ignore(f"check_suite.{payload.action} needs no action")
    return check_suite_rerequested(payload, delivery_id=delivery_id)


def check_suite_rerequested(payload: payloads.CheckSuiteEvent, *, delivery_id: int) -> Outcome:
    """`check_suite.rerequested` ("Re-run all checks" on Tasuku's suite): a new run for
    every reviewer whose check is in the suite, on each pull request whose head it is."""
    head_sha = payload.check_suite.head_sha
    found = repository_from_payload(payload)
    if isinstance(found, Outcome):
        return found
    installation, repository = found
    earlier = (
        ReviewRun.objects.filter(
            pull_request__repository=repository,
            head_sha=head_sha,
            check_run_id__isnull=False,
            pass_link__isnull=True,
        )
        .select_related("pull_request", "reviewer")
        .order_by("pk")
    )
    reviewers: dict[int, dict[int, Reviewer]] = {}
    for run in earlier:
        reviewers.setdefault(run.pull_request.number, {})[run.reviewer_id] = run.reviewer
    if not reviewers:
        return Outcome.ignore(f"no Tasuku check on {repository.full_name}@{head_sha[:7]}")
    said = []
    admitted = False
    for number, chosen in sorted(reviewers.items()):
        pull_request = pull_request_refresh(installation, repository, number)
        label = f"{repository.full_name}#{number}"
        if pull_request.head_sha != head_sha:
            said.append(f"{label} has moved on to {pull_request.head_sha[:7]}")
            continue
        runs, refusal = runs_request_for(
            pull_request, Trigger.RERUN, reviewers=list(chosen.values()), delivery_id=delivery_id
        )
        if refusal:
            said.append(f"re-run on {label} skipped: {refusal}")
        else:
            admitted = True
            said.append(f"re-run on {label}: run {', '.join(str(r.pk) for r in runs)}")
    return Outcome("; ".join(said), decision=Decision.ADMITTED if admitted else Decision.SKIPPED)


def manual_review(pull_request: PullRequest, *, full: bool) -> tuple[list[ReviewRun], str]:
    """The dashboard's "Review now" / "Full review" buttons."""
    repository = pull_request.repository
    if repository.installation.github_id == 0:
        return [], "local repositories are reviewed with `manage.py review`"
    fresh = pull_request_refresh(repository.installation, repository, pull_request.number)
    return runs_request_for(fresh, Trigger.FULL_REVIEW_COMMAND if full else Trigger.MANUAL)

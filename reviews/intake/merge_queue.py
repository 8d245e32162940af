"""Merge queues: the `Tasuku · <reviewer>` checks of a merge group (`merge_group` events).

Why this exists: GitHub's merge queue tests each queued pull request on a temporary
branch (`refs/heads/gh-readonly-queue/<base>/pr-<N>-<sha>`) and "will wait for required
checks to be reported before it can proceed with merging" (docs: Managing a merge
queue). A required `Tasuku · <reviewer>` check never reported on the group's head blocks
the queue until its status-check timeout; a failed one removes the pull request from
the queue ("if there are failed required status checks …, the pull request will be
removed from the queue").

What GitHub says (webhook and REST descriptions, @octokit/openapi 23.0.2):
- `merge_group.checks_requested` carries `merge_group`: `head_sha` ("The SHA of the
  merge group"), `head_ref`, `base_sha` ("The SHA of the merge group's parent commit"),
  `base_ref` ("The full ref of the branch the merge group will be merged into") and
  `head_commit`; the receiver should "perform checks on the head SHA and report status
  back using check runs or commit statuses". `merge_group.destroyed` adds `reason`:
  `merged`, `dequeued` or `invalidated`. Receiving them needs Merge queues: read.
- A group's parent commit is the head of the group ahead of it in the queue (or the
  base branch's tip) — what integrations see, the descriptions do not spell it out — so
  `base_sha...head_sha` is one queue entry's own increment. With "Only merge
  non-failing pull requests" off, a group merges "as long as the last pull request in
  the group has passed required checks": the last entry's check answers for the
  entries ahead of it too.
- "List pull requests associated with a commit" names the open pull requests whose
  commits include a commit not on the default branch; a commit the queue made itself
  (its merge or squash commit) has none. Compare lists at most 300 changed files.

The rule (README, "In a merge queue") — Tasuku reviews nothing here, it concludes: each
reviewer's check on the group's head is `success` only when every pull request the
group merges (the `pr-N` of this entry and of the entries ahead of it that Tasuku was
told of, and any other open pull request GitHub associates with one of the group's
commits) is open, targets the group's base branch, and has a completed review by that
reviewer at its current head whose check concluded `success`; and when every file the
group changes is a file one of those pull requests changes. Anything else — a failing,
`neutral`, skipped, failed, running or missing review, a file no pull request accounts
for, a group too large for GitHub to list, a group GitHub would not describe — is
`failure`, with the title naming the first reason, so the queue removes the pull request
instead of waiting. The check is created completed, never left queued; a GitHub error on
the way raises, and the delivery is retried.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django.conf import settings
from django.urls import reverse
from django.utils.translation import ngettext

from repos import github
from repos.github import CheckRunOutput, GitHubError, GitHubGateway, PullRequestInfo, RepoRef
from repos.github.commits import Comparison
from repos.models import Repository
from repos.selectors import effective_config
from reviews.intake.pull_requests import repository_from_payload
from reviews.models import PullRequest, Review, ReviewRun, ReviewState, RunStatus
from reviews.text.escaping import code_span, inline_text
from webhooks import payloads
from webhooks.models import WebhookDelivery
from webhooks.routing import Outcome

# GitHub names a group's branch after the pull request it was made for.
QUEUE_REF = re.compile(r"^refs/heads/gh-readonly-queue/.+/pr-(?P<number>\d+)-[0-9a-f]+$")
# A merge queue merges at most 100 pull requests at once: no longer chain is followed.
MAX_ENTRIES = 100
# Commits of a group outside its pull requests' histories that GitHub is asked about
# (one request each; a queue's own merge or squash commit is one per entry).
MAX_COMMITS_ASKED = 50
# The external id of a merge group's check runs (a review run's check carries the run id).
EXTERNAL_ID = "merge-group"
PATHS_NAMED = 10


@dataclass(frozen=True)
class Entry:
    """One queue entry: a merge group GitHub asked checks for."""

    head_sha: str
    base_sha: str
    head_ref: str
    base_ref: str

    @classmethod
    def of(cls, group: payloads.MergeGroup) -> Entry:
        return cls(
            head_sha=group.head_sha,
            base_sha=group.base_sha,
            head_ref=group.head_ref,
            base_ref=group.base_ref,
        )

    @property
    def number(self) -> int | None:
        match = QUEUE_REF.match(self.head_ref)
        return int(match.group("number")) if match else None

    @property
    def branch(self) -> str:
        return self.base_ref.removeprefix("refs/heads/")


@dataclass
class Pull:
    """One pull request of the group as GitHub has it now (None: GitHub has none)."""

    number: int
    info: PullRequestInfo | None
    files: frozenset[str] = frozenset()
    row: PullRequest | None = None


@dataclass(frozen=True)
class Reason:
    """Why something fails, as the summary shows it (Markdown, escaped) and as a check
    title shows it (plain text, one line)."""

    text: str
    title: str


@dataclass
class Group:
    """Everything concluding needs, read once for every reviewer."""

    entries: list[Entry]
    pulls: dict[int, Pull] = field(default_factory=dict)
    problems: list[Reason] = field(default_factory=list)  # why it cannot pass, whoever reviews


@dataclass(frozen=True)
class Verdict:
    number: int
    passed: bool
    text: str  # Markdown
    title: str  # plain text


def check_name(slug: str) -> str:
    return f"Tasuku · {slug}"


# --- the event --------------------------------------------------------------------------


def merge_group_event(payload: payloads.MergeGroupEvent, *, delivery_id: int) -> Outcome:
    """Handle a `merge_group` delivery: conclude the group's checks, or note its end."""
    action = payload.action
    if action not in ("checks_requested", "destroyed"):
        return Outcome.ignore(f"merge_group.{action} needs no action")
    entry = Entry.of(payload.merge_group)
    if not entry.head_sha:
        return Outcome.ignore("merge_group without a head_sha")
    found = repository_from_payload(payload)
    if isinstance(found, Outcome):
        return found
    installation, repository = found
    label = f"merge group {repository.full_name}@{entry.head_sha[:7]}"
    if action == "destroyed":
        return group_destroyed(repository, entry, label, payload.reason or "")
    if not installation.active or not repository.enabled:
        return Outcome.ignore(f"{label}: Tasuku does not review {repository.full_name}")
    if _destroyed(repository, entry.head_sha):
        return Outcome.ignore(f"{label} was destroyed before its checks were concluded")
    slugs = [r.slug for r in effective_config(repository).reviewers]
    if not slugs:
        return Outcome.ignore(f"{label}: no reviewer is enabled on {repository.full_name}")
    gateway = github.gateway()
    repo = RepoRef.of(repository)
    group = group_read(gateway, repo, repository, entry)
    decided = []
    for slug in slugs:
        conclusion, title, summary = conclude(group, slug)
        check_publish(
            gateway,
            repo,
            entry.head_sha,
            slug,
            conclusion,
            title,
            summary,
            _details(repository, entry),
        )
        decided.append(
            f"{check_name(slug)} {conclusion}" + (f" ({title})" if conclusion != "success" else "")
        )
    numbers = ", ".join(f"#{n}" for n in group.pulls) or "no pull request"
    return Outcome(f"{label} ({numbers} into {entry.branch}): " + "; ".join(decided))


def group_destroyed(repository: Repository, entry: Entry, label: str, reason: str) -> Outcome:
    """The group is gone (merged, dequeued or invalidated): nothing is left to conclude.
    Tasuku creates a group's checks completed, so none should be unfinished; one that is
    (whatever made it) is completed `cancelled`, never left hanging."""
    why = f" ({reason})" if reason else ""
    requested = WebhookDelivery.objects.filter(
        event="merge_group",
        action="checks_requested",
        repository_full_name=repository.full_name,
        payload__merge_group__head_sha=entry.head_sha,
    ).exists()
    if not requested:
        return Outcome(f"{label} destroyed{why}: Tasuku had no check on it")
    gateway = github.gateway()
    repo = RepoRef.of(repository)
    cancelled = 0
    for reviewer in effective_config(repository).reviewers:
        check = gateway.check_run_find(
            repo,
            head_sha=entry.head_sha,
            name=check_name(reviewer.slug),
            external_id=EXTERNAL_ID,
        )
        if check is None or check.status == "completed":
            continue
        gateway.check_run_update(
            repo,
            check_run_id=check.id,
            conclusion="cancelled",
            output=CheckRunOutput(
                title="Merge group destroyed",
                summary=f"GitHub destroyed this merge group{why} before Tasuku concluded it.",
            ),
        )
        cancelled += 1
    if cancelled:
        return Outcome(f"{label} destroyed{why}: {cancelled} unfinished Tasuku check(s) cancelled")
    return Outcome(f"{label} destroyed{why}: nothing left to conclude")


# --- reading the group ------------------------------------------------------------------


def group_read(
    gateway: GitHubGateway, repo: RepoRef, repository: Repository, entry: Entry
) -> Group:
    """The group's entries, pull requests and changes as GitHub has them. A permanent
    GitHub error (it will not describe the group) makes the group unable to pass; a
    transient one raises, and the delivery is retried."""
    group = Group(entries=entries_ahead(repository, entry))
    try:
        comparisons = [
            # A payload without `base_sha` (older servers) compares with the base branch.
            gateway.compare(repo, base=e.base_sha or e.branch, head=e.head_sha)
            for e in group.entries
        ]
        for e in group.entries:
            if e.number is not None and e.number not in group.pulls:
                group.pulls[e.number] = pull_read(gateway, repo, repository, e.number)
        pulls_associated(gateway, repo, repository, entry.branch, group, comparisons)
    except GitHubError as exc:
        if not exc.permanent:
            raise
        why = f"GitHub would not describe this merge group: {exc.message}"
        group.problems.append(Reason(inline_text(why, 500), _line(why)))
        return group
    if not group.pulls:
        why = "no pull request was found in this merge group"
        group.problems.append(Reason(why, why))
    group.problems += changes_unaccounted(group, comparisons)
    return group


def entries_ahead(repository: Repository, entry: Entry) -> list[Entry]:
    """This entry and those ahead of it in the queue that Tasuku was told of: each
    group's parent commit is the head of the group ahead of it, until the base branch
    (a group that merged is on it)."""
    entries, seen = [entry], {entry.head_sha}
    while len(entries) < MAX_ENTRIES:
        parent = entries[-1].base_sha
        delivery = (
            WebhookDelivery.objects.filter(
                event="merge_group",
                action="checks_requested",
                repository_full_name=repository.full_name,
                payload__merge_group__head_sha=parent,
            )
            .order_by("-pk")
            .first()
        )
        if delivery is None or parent in seen or _destroyed(repository, parent, "merged"):
            break
        earlier = payloads.parse("merge_group", delivery.payload)
        if isinstance(earlier, payloads.Malformed):
            break  # ignored as malformed when it came: it never was an entry
        entries.append(Entry.of(earlier.merge_group))
        seen.add(parent)
    return entries


def pull_read(gateway: GitHubGateway, repo: RepoRef, repository: Repository, number: int) -> Pull:
    try:
        info = gateway.pull_request_get(repo, number=number)
    except GitHubError as exc:
        if exc.status != 404:
            raise
        return Pull(number=number, info=None)
    files = gateway.pull_request_files(repo, number=number)
    names = {f.filename for f in files} | {
        f.previous_filename for f in files if f.previous_filename
    }
    row = PullRequest.objects.filter(repository=repository, number=number).first()
    return Pull(number=number, info=info, files=frozenset(names), row=row)


def pulls_associated(
    gateway: GitHubGateway,
    repo: RepoRef,
    repository: Repository,
    branch: str,
    group: Group,
    comparisons: list[Comparison],
) -> None:
    """Add the open pull requests into `branch` that GitHub associates with a commit of
    the group outside the known pull requests' histories (a pull request's own commits
    are reviewed with it; the queue's merge and squash commits have none)."""
    parents = {c.sha: c.parents for comparison in comparisons for c in comparison.commits}
    newest_first = [c.sha for comparison in comparisons for c in reversed(comparison.commits)]
    reviewed = _histories(group, parents)
    asked = 0
    for sha in newest_first:
        if sha in reviewed or asked >= MAX_COMMITS_ASKED:
            continue
        asked += 1
        for associated in gateway.commit_pull_requests(repo, sha=sha):
            if associated.state != "open" or associated.base_ref != branch:
                continue
            if associated.number not in group.pulls:
                group.pulls[associated.number] = pull_read(
                    gateway, repo, repository, associated.number
                )
                reviewed = _histories(group, parents)


def _histories(group: Group, parents: dict[str, tuple[str, ...]]) -> set[str]:
    """The group's commits reachable from one of its pull requests' heads."""
    reached: set[str] = set()
    todo = [p.info.head_sha for p in group.pulls.values() if p.info and p.info.head_sha in parents]
    while todo:
        sha = todo.pop()
        if sha in reached or sha not in parents:
            continue
        reached.add(sha)
        todo += parents[sha]
    return reached


def changes_unaccounted(group: Group, comparisons: list[Comparison]) -> list[Reason]:
    """Why the group's changes are not all its pull requests' own: a changed file none
    of them changes, or a comparison GitHub did not list in full."""
    problems = []
    if not all(c.complete for c in comparisons):
        why = (
            "the merge group changes too much to check: GitHub lists at most 300 changed "
            "files of a comparison"
        )
        problems.append(Reason(why, why))
    names = frozenset().union(*(p.files for p in group.pulls.values()))
    outside = sorted(
        {
            path
            for comparison in comparisons
            for f in comparison.files
            for path in (f.filename, f.previous_filename)
            if path and path not in names
        }
    )
    if outside:
        count = ngettext("%(count)d file", "%(count)d files", len(outside)) % {
            "count": len(outside)
        }
        more = f" and {len(outside) - PATHS_NAMED} more" if len(outside) > PATHS_NAMED else ""
        why = f"the merge group changes {count} that none of its pull requests changes: "
        problems.append(
            Reason(
                why + ", ".join(code_span(path, 200) for path in outside[:PATHS_NAMED]) + more,
                why + ", ".join(_line(path) for path in outside[:PATHS_NAMED]) + more,
            )
        )
    return problems


def _destroyed(repository: Repository, head_sha: str, reason: str | None = None) -> bool:
    deliveries = WebhookDelivery.objects.filter(
        event="merge_group",
        action="destroyed",
        repository_full_name=repository.full_name,
        payload__merge_group__head_sha=head_sha,
    )
    if reason is not None:
        deliveries = deliveries.filter(payload__reason=reason)
    return deliveries.exists()


# --- the rule ---------------------------------------------------------------------------


def verdict(pull: Pull, slug: str, branch: str) -> Verdict:
    """Whether one pull request of the group passed reviewer `slug` at its current head."""
    n, info = pull.number, pull.info

    def failed(text: str, title: str | None = None) -> Verdict:
        return Verdict(n, False, text, title if title is not None else text)

    if info is None:
        return failed("is not a pull request GitHub knows")
    short = info.head_sha[:7]
    head = f"`{short}`"
    if info.merged:
        return Verdict(n, True, "is merged already: its changes are on the base branch", "")
    if info.state != "open":
        return failed(f"is {inline_text(info.state, 20)}", f"is {_line(info.state)}")
    if info.base_ref != branch:
        return failed(
            f"targets {code_span(info.base_ref, 200)}, not {code_span(branch, 200)}",
            f"targets {_line(info.base_ref)}, not {_line(branch)}",
        )
    run = (
        ReviewRun.objects.filter(
            pull_request=pull.row,
            reviewer__slug=slug,
            head_sha=info.head_sha,
            pass_link__isnull=True,
        )
        .order_by("-pk")
        .first()
        if pull.row is not None
        else None
    )
    if run is None:
        return failed(
            f"has no {check_name(slug)} review of its head {head}",
            f"has no {check_name(slug)} review of its head {short}",
        )
    if run.status in (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.DISPATCHED):
        return failed(f"is still being reviewed at {head}", f"is still being reviewed at {short}")
    if run.status == RunStatus.SKIPPED:
        return failed(
            f"was not reviewed at {head}: {inline_text(run.reason, 300)}",
            f"was not reviewed at {short}: {_line(run.reason)}",
        )
    if run.status != RunStatus.COMPLETED:
        return failed(f"review of {head} {run.status}", f"review of {short} {run.status}")
    review = Review.objects.filter(run=run).first()
    in_full = review is not None and review.state == ReviewState.COMPLETE and not review.shortfall
    if run.check_conclusion != "success" or not in_full:
        concluded = run.check_conclusion or "nothing"
        return failed(
            f"check at {head} concluded {concluded}"
            + (f": {inline_text(run.check_title, 200)}" if run.check_title else ""),
            f"check at {short} concluded {concluded}"
            + (f": {_line(run.check_title)}" if run.check_title else ""),
        )
    return Verdict(n, True, f"passed at {head}", f"passed at {short}")


def conclude(group: Group, slug: str) -> tuple[str, str, str]:
    """(conclusion, title, summary) of reviewer `slug`'s check on the group's head."""
    branch = group.entries[0].branch
    verdicts = [verdict(pull, slug, branch) for pull in group.pulls.values()]
    reasons = [
        Reason(f"#{v.number} {v.text}", f"#{v.number} {v.title}") for v in verdicts if not v.passed
    ] + group.problems
    name = check_name(slug)
    if not reasons:
        count = len(verdicts)
        title = (
            f"#{verdicts[0].number} passed {name}"
            if count == 1
            else f"All {count} pull requests of the group passed {name}"
        )
        conclusion = "success"
    else:
        more = f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else ""
        title = reasons[0].title[: 255 - len(more)] + more
        conclusion = "failure"
    return conclusion, title, _summary(group, verdicts, [r.text for r in reasons], slug)


def _summary(group: Group, verdicts: list[Verdict], reasons: list[str], slug: str) -> str:
    name = check_name(slug)
    entry = group.entries[0]
    lines = [
        f"Merge group `{entry.head_sha[:7]}` into {code_span(entry.branch, 200)}. Tasuku "
        f"reviews no merge group: it passes when every pull request the group merges passed "
        f"{name} at its current head and the group changes nothing else.",
        "",
    ]
    if verdicts:
        lines += ["| Pull request | " + name + " |", "| --- | --- |"]
        lines += [f"| #{v.number} | {'✅' if v.passed else '❌'} {v.text} |" for v in verdicts]
        lines.append("")
    if reasons:
        lines.append("**Why this check fails** (the queue removes the pull request):")
        lines += [f"- {reason}" for reason in reasons]
        lines.append("")
    if len(group.entries) > 1:
        ahead = ", ".join(f"`{e.head_sha[:7]}`" for e in group.entries[1:])
        lines.append(f"It answers for the groups ahead of it in the queue too: {ahead}.")
    return "\n".join(lines).strip()


def _line(text: str | None) -> str:
    """Text for a check title, which GitHub shows as plain text: one line, bounded."""
    return " ".join((text or "").split())[:200]


# --- GitHub -----------------------------------------------------------------------------


def check_publish(
    gateway: GitHubGateway,
    repo: RepoRef,
    head_sha: str,
    slug: str,
    conclusion: str,
    title: str,
    summary: str,
    details_url: str,
) -> None:
    """The reviewer's check on the group's head, completed: created so (never queued),
    or, when an earlier attempt of this delivery made it, updated to what holds now."""
    name = check_name(slug)
    output = CheckRunOutput(title=title[:255], summary=summary)
    found = gateway.check_run_find(repo, head_sha=head_sha, name=name, external_id=EXTERNAL_ID)
    if found is not None:
        gateway.check_run_update(
            repo,
            check_run_id=found.id,
            conclusion=conclusion,
            output=output,
            details_url=details_url,
        )
        return
    gateway.check_run_create(
        repo,
        name=name,
        head_sha=head_sha,
        external_id=EXTERNAL_ID,
        details_url=details_url,
        conclusion=conclusion,
        output=output,
    )


def _details(repository: Repository, entry: Entry) -> str:
    """The check's Details link: the entry's pull request on Tasuku's dashboard."""
    if entry.number is None:
        return settings.TASUKU_BASE_URL + reverse("reviews:overview")
    owner, name = repository.full_name.split("/", 1)
    return settings.TASUKU_BASE_URL + reverse(
        "reviews:pull_request", args=[owner, name, entry.number]
    )

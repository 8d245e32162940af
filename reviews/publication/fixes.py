"""A pull request's one-click fixes, proposed as a pull request of Tasuku's, for a
repository that opted in (its policy's `fix_pull_requests`; docs/reviews.md, *One-click
fixes as a pull request*).

After a review on GitHub, the open findings whose suggestion GitHub would apply with one
click (the ```suggestion blocks the review posted, `Finding.suggestion_applies`) are
committed — one commit over the pull request's head — on Tasuku's branch
`tasuku/fix/pr-<N>` in the same repository, and proposed as a pull request into the pull
request's head branch. Tasuku never pushes to the author's branch, and does nothing for
a fork's pull request (it would have to push to the fork). A later review updates the
same branch (moved by force: it is Tasuku's) and edits the same pull request; once no
fix is left (every finding resolved, outdated or dismissed), or the pull request is
merged or closed, Tasuku closes its pull request and deletes its branch.

A suggestion that no longer applies to the head — its file changed since the review,
its lines gone, or overlapping another fix — is left out, and the pull request says so.

Sending is an outbox (a durable queue row, `FixProposal`, one per pull request): a review
records that the fixes are to be brought up to date and rings; the sender reads the
findings and the head as they are when it sends. GitHub's weather defers the row, a
refusal (a 422, a missing permission) fails it with the reason, shown on the row (the
admin) — never the review. Nothing is lost: the findings stay, and the next review or
the sweep asks again.
"""

from __future__ import annotations

import ast
import logging
import re
from datetime import timedelta
from pathlib import PurePosixPath
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from repos import github
from repos.github import GitHubError, RepoRef
from repos.policy import CHECKLESS_TRIGGERS, EffectiveConfig
from reviews.models import (
    Finding,
    FindingState,
    FixProposal,
    PullRequest,
    Review,
    ReviewRun,
    RunStatus,
)
from reviews.publication.patching import LineFix, fixes_apply
from reviews.text.escaping import code_span, inline_text
from reviews.text.rendering import MAX_BODY_BYTES, clip_bytes
from tasuku import durable
from webhooks import payloads
from webhooks.routing import Outcome

logger = logging.getLogger(__name__)

SEND_TASK = "reviews.tasks.fixes_send"
BRANCH = "tasuku/fix/pr-{number}"
# Every branch of fixes Tasuku makes starts so: a pull request whose head is one (a fixes
# pull request, reviewed; or an author's branch named like Tasuku's) gets no fixes of its
# own — no fixes of fixes, and never a write to its head branch.
BRANCH_PREFIX = "tasuku/fix/"
# The review summary's paragraph about the fixes: replaced, never repeated, when the
# sender links the pull request (`_review_link`).
LEAD = "**One-click fixes:**"
FORK_NOTE = (
    f"{LEAD} not proposed as a pull request: this pull request's branch is in a fork, "
    "and Tasuku creates branches only in this repository. Apply the suggestions on their "
    "comments."
)
HEAD_NOTE = (
    f"{LEAD} not proposed as a pull request: this pull request's branch is named like "
    "Tasuku's own branches of fixes, which Tasuku would have to write. Apply the "
    "suggestions on their comments."
)
MAX_LISTED = 50
# The state of a fixes pull request someone closed without merging it.
DECLINED = "declined"

FIXES = durable.Queue(
    model="reviews.FixProposal",
    task=SEND_TASK,
    name="fixes",
    waiting=(FixProposal.Status.DUE,),
    working=FixProposal.Status.SENDING,
    failed=FixProposal.Status.FAILED,
    installation="pull_request__repository__installation__github_id",
    max_attempts=5,
    ring_again=timedelta(minutes=2),
)


def branch_of(pull_request: PullRequest) -> str:
    return BRANCH.format(number=pull_request.number)


def head_is_tasukus(head_ref: str) -> bool:
    return head_ref.startswith(BRANCH_PREFIX)


def fixes_wanted(run: ReviewRun, config: EffectiveConfig) -> bool:
    """A run on GitHub of a repository that opted in, reporting on its pull request."""
    return (
        config.fix_pull_requests
        and run.trigger not in CHECKLESS_TRIGGERS
        and run.pull_request.repository.installation.github_id != 0
    )


def summary_note(run: ReviewRun, config: EffectiveConfig, offered: int) -> str:
    """What the review's summary says about its fixes before the sender has run: for a
    fork, why there is no pull request; otherwise where it will be (the sender puts the
    link in). `offered`: how many of the review's comments carry a one-click suggestion."""
    if not offered or not fixes_wanted(run, config):
        return ""
    if run.pull_request.from_fork:
        return FORK_NOTE
    if head_is_tasukus(run.pull_request.head_ref):
        return HEAD_NOTE
    return (
        f"{LEAD} the suggestions still open are proposed as one commit on Tasuku's branch "
        f"{code_span(branch_of(run.pull_request))}, in a pull request into this one's "
        "branch (linked here once it is open). Tasuku never pushes to this branch."
    )


def fixes_request_after(run: ReviewRun, *, current: bool = False) -> None:
    """The run has ended: if it completed a review of a repository that opted in, bring
    the pull request's fixes up to date with it. Never raises: the review stands.
    `current`: `run` was read after it ended (with its pull request and repository)."""
    try:
        if not current:
            run = ReviewRun.objects.select_related(
                "pull_request__repository__installation", "reviewer"
            ).get(pk=run.pk)
        if run.status != RunStatus.COMPLETED:
            return  # a run that did not finish asks nothing; the one that supersedes it will
        if not fixes_wanted(run, EffectiveConfig.model_validate(run.config)):
            return
        if run.pull_request.from_fork or head_is_tasukus(run.pull_request.head_ref):
            return  # its summary said why (`summary_note`)
        review = Review.objects.filter(run=run).first()
        if not FixProposal.objects.filter(pull_request=run.pull_request).exists() and not (
            review is not None and open_fixes(run.pull_request)
        ):
            return  # nothing proposed, nothing to propose: no job, no call to GitHub
        fixes_request(run.pull_request, review=review)
    except Exception:  # noqa: BLE001 - the fixes never stop a review
        logger.exception("run %s: could not ask for its fixes pull request", run.pk)


def fixes_request(pull_request: PullRequest, *, review: Review | None = None) -> None:
    """Ask for the pull request's fixes to be brought up to date, and ring the sender.
    A request made while a sender holds the row raises its version only: the sender sees
    it when it finishes and sends again."""
    now = timezone.now()
    with transaction.atomic():
        row, _ = FixProposal.objects.select_for_update().get_or_create(
            pull_request=pull_request, defaults={"branch": branch_of(pull_request)}
        )
        if review is not None and row.review_id and row.review_id > review.pk:
            review = None  # an older review ending late: the newer one keeps the link
        fields: dict[str, Any] = {"version": F("version") + 1, "requested_at": now}
        if review is not None:
            fields["review"] = review
        FIXES.asked_again(row.pk, **fields)


def pull_request_event(payload: payloads.PullRequestEvent, *, delivery_id: int) -> Outcome:
    """`pull_request.closed`: the fixes of a merged or closed pull request are no longer
    needed; its fixes pull request (if Tasuku opened one) is closed by the sender."""
    if payload.action != "closed":
        return Outcome.ignore(f"pull_request.{payload.action}: nothing for its fixes")
    row = (
        FixProposal.objects.filter(
            pull_request__repository__github_id=payload.repository.id,
            pull_request__number=payload.pull_request.number,
        )
        .select_related("pull_request")
        .first()
    )
    if row is None or (row.state != "open" and not row.commit_sha):
        return Outcome.ignore("no fixes pull request to close")
    fixes_request(row.pull_request)
    return Outcome(f"its fixes pull request ({row.branch}) is to be closed")


def fixes_sweep() -> int:
    """Hand fixes whose sender died to another, and ring the due ones."""
    lost = {"error": "The worker stopped while updating the fixes pull request."}
    return FIXES.sweep(lost=lost, lost_last=lost)["rung"]


# --- Sending ----------------------------------------------------------------------------


class FixesSend(durable.Job):
    """Bring the pull request's fixes up to date on GitHub: `sent`, `waiting` (GitHub's
    weather, or a newer version to send), `failed` or `not claimed`.

    1. Read the pull request: closed or merged → close Tasuku's pull request.
    2. The fixes: the open findings with a one-click suggestion, of each reviewer's
       latest review; none → close.
    3. Read the head's files they are in (`_files_fixed`); apply what still applies.
    4. One commit over the head on Tasuku's branch (created, or moved by force).
    5. Open the pull request into the head branch, or edit the one that is open.
    6. Link it from the review's summary.

    GitHub's weather defers the row; a refusal (a 422, a missing permission) fails it
    with the reason, shown on the row — never on the review."""

    queue = FIXES
    retry_on = (GitHubError,)
    related = ("pull_request__repository__installation",)
    since = "requested_at"
    log_as = "fixes"

    def work(self) -> str:
        row = self.row
        repository = row.pull_request.repository
        repo = RepoRef.of(repository)
        done = _bring_up_to_date(github.gateway(), repo, row)
        done["error"] = ""
        return self.queue.sent(self.pk, self.attempt, row.version, FixProposal.Status.SENT, **done)

    def failure_fields(self, exc: BaseException, verdict: durable.Verdict) -> dict:
        said = (
            f"GitHub refused the fixes pull request ({verdict.why or verdict.kind}): {exc}"
            if verdict.kind == durable.FAILED
            else f"the fixes pull request waits for GitHub ({verdict.why}): {exc}"
        )
        return {"error": said[:2000]}


fixes_send = FixesSend.run  # the task's body (reviews/tasks.py)


def open_fixes(pull_request: PullRequest) -> list[Finding]:
    """The findings whose one-click suggestion still stands: open, posted with a
    ```suggestion block, in the latest completed review of each reviewer."""
    latest: dict[int, int] = {}
    for review_pk, reviewer_pk in (
        Review.objects.filter(pull_request=pull_request, run__status=RunStatus.COMPLETED)
        .order_by("pk")
        .values_list("pk", "reviewer_id")
    ):
        latest[reviewer_pk] = review_pk
    return list(
        Finding.objects.filter(
            review_id__in=latest.values(),
            state=FindingState.OPEN,
            suggestion_applies=True,
            suggestion__isnull=False,
            side="RIGHT",
        )
        .exclude(published=False, github_comment_id__isnull=True)
        .select_related("review")
        .order_by("path", "start_line", "pk")
    )


def _bring_up_to_date(gateway, repo: RepoRef, row: FixProposal) -> dict[str, Any]:
    pull_request = row.pull_request
    info = gateway.pull_request_get(repo, number=pull_request.number)
    if head_is_tasukus(info.head_ref):
        # Before anything that closes or deletes: Tasuku's branch may be this head.
        return {
            "outcome": f"not proposed: #{pull_request.number}'s branch "
            f"{info.head_ref} is named like Tasuku's own branches of fixes; Tasuku "
            "writes no branch it did not make"
        }
    if info.state != "open":
        why = "merged" if info.merged else "closed"
        return _close(gateway, repo, row, f"#{pull_request.number} was {why}")
    if pull_request.from_fork or (
        # "" is GitHub's null: a fork since deleted, still a fork.
        info.head_repository is not None and info.head_repository.lower() != repo.full_name.lower()
    ):
        return _close(gateway, repo, row, f"#{pull_request.number}'s branch is in a fork")
    if row.state == DECLINED:
        return {"outcome": f"not proposed again: someone closed #{row.number} without merging it"}
    policy = _policy_now(pull_request)
    if not policy.fix_pull_requests:
        return _close(gateway, repo, row, "the repository no longer asks for fixes pull requests")
    missing = gateway.fix_permissions_missing(repo.installation_id)
    if missing:
        raise GitHubError(
            "Tasuku's GitHub App may not create a branch and a pull request of fixes: give "
            f"it the repository permission {' and '.join(missing)}, or turn fixes pull "
            "requests off for this repository.",
            permanent=True,
            code="github-permission",
        )
    findings = open_fixes(pull_request)
    if not findings:
        return _close(gateway, repo, row, "no one-click fix is left open")
    if _declined(gateway, repo, row, info):
        deleted = _branch_drop(gateway, repo, row)
        return {
            "state": DECLINED,
            "commit_sha": "",
            "outcome": f"someone closed #{row.number} without merging it: not proposed again "
            "for this pull request" + (f"; branch {row.branch} deleted" if deleted else ""),
        }
    files, applied, left_out = _files_fixed(gateway, repo, info.head_sha, findings)
    if not applied:
        why = "no suggestion applies to the head any more"
        closed = _close(gateway, repo, row, why)
        _review_say(
            gateway, repo, row,
            f"{LEAD} nothing is proposed: none of the suggestions applies to the head "
            f"{code_span(info.head_sha[:7])} as it was written (apply them from their "
            "comments where they still fit).",
        )  # fmt: skip
        return {**closed, "left_out": left_out, "head_sha": info.head_sha}
    if (
        row.state == "open"
        and row.number
        and (row.head_sha, row.applied, row.left_out) == (info.head_sha, applied, left_out)
        and gateway.git_branch_sha(repo, branch=row.branch) == row.commit_sha
    ):
        # What GitHub has is what would be sent (a review that changed nothing here, a
        # repeated send): no write but the newest review's link.
        _review_link(gateway, repo, row, row.url, row.number, len(applied))
        return {"outcome": f"up to date: #{row.number} already proposes these fixes"}
    commit = _commit(gateway, repo, row, info.head_sha, files, applied, into=info.head_ref)
    pull = _pull_open(gateway, repo, row, info, applied, left_out)
    _review_link(gateway, repo, row, pull.html_url, pull.number, len(applied))
    outcome = (
        f"{len(applied)} fix(es) committed over {info.head_sha[:7]} and proposed in "
        f"#{pull.number}" + (f"; {len(left_out)} left out" if left_out else "")
    )
    return {
        "head_sha": info.head_sha,
        "commit_sha": commit,
        "number": pull.number,
        "url": pull.html_url,
        "state": "open",
        "applied": applied,
        "left_out": left_out,
        "outcome": outcome,
    }


def _policy_now(pull_request: PullRequest) -> EffectiveConfig:
    from repos.selectors import effective_config

    return effective_config(pull_request.repository)


def _entry_of(row: Finding, why: str = "") -> dict[str, Any]:
    entry = {
        "fingerprint": row.fingerprint,
        "path": row.path,
        "start_line": row.start_line,
        "end_line": row.end_line,
        "title": row.title,
        "rule": row.rule,
    }
    if why:
        entry["why"] = why
    return entry


class _Tree:
    """The head's files, read a directory at a time through the Git Data API."""

    def __init__(self, gateway, repo: RepoRef, commit: str) -> None:
        self.gateway, self.repo = gateway, repo
        self.root = gateway.git_commit_tree(repo, sha=commit)
        self._dirs: dict[str, dict[str, Any]] = {}

    def _listing(self, directory: str) -> dict[str, Any] | None:
        if directory in self._dirs:
            return self._dirs[directory]
        if directory == "":
            sha = self.root
        else:
            parent, _, name = directory.rpartition("/")
            listing = self._listing(parent)
            entry = listing.get(name) if listing else None
            if entry is None or entry.type != "tree":
                self._dirs[directory] = None  # type: ignore[assignment]
                return None
            sha = entry.sha
        found = {e.path: e for e in self.gateway.git_tree(self.repo, sha=sha)}
        self._dirs[directory] = found
        return found

    def entry(self, path: str):
        directory, _, name = path.rpartition("/")
        listing = self._listing(directory)
        return listing.get(name) if listing else None


def _files_fixed(
    gateway, repo: RepoRef, head: str, findings: list[Finding]
) -> tuple[dict[str, tuple[str, str]], list[dict], list[dict]]:
    """The files with their fixes applied ({path: (mode, text)}), the fixes applied and
    those left out with why. A fix written at another head applies only where its file is
    the same at this head (its lines are then the lines it was written for)."""
    tree = _Tree(gateway, repo, head)
    reviewed: dict[str, _Tree] = {}
    by_path: dict[str, list[Finding]] = {}
    for finding in findings:
        by_path.setdefault(finding.path, []).append(finding)
    files: dict[str, tuple[str, str]] = {}
    applied: list[dict] = []
    left_out: list[dict] = []
    for path, wanted in by_path.items():
        if PurePosixPath(path).parts[:2] == (".github", "workflows"):
            # A workflow runs with the repository's secrets when the pull request of fixes
            # opens: Tasuku proposes no change to one (GitHub would refuse an App without
            # the Workflows permission anyway).
            left_out += [_entry_of(f, "Tasuku does not change workflow files") for f in wanted]
            continue
        entry = tree.entry(path)
        if entry is None or entry.type != "blob" or entry.mode not in ("100644", "100755"):
            left_out += [_entry_of(f, f"{path} is not a file at the head any more") for f in wanted]
            continue
        fresh = []
        for finding in wanted:
            at = finding.review.head_sha
            if at != head:
                if at not in reviewed:
                    reviewed[at] = _Tree(gateway, repo, at)
                then = reviewed[at].entry(path)
                if then is None or then.sha != entry.sha:
                    left_out.append(_entry_of(
                        finding, f"{path} changed since the review at {at[:7]}: the "
                        "suggestion no longer applies as it was written",
                    ))  # fmt: skip
                    continue
            fresh.append(finding)
        if not fresh:
            continue
        data = gateway.git_blob(repo, sha=entry.sha)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            left_out += [_entry_of(f, f"{path} is not UTF-8 text") for f in fresh]
            continue
        by_key = {f.fingerprint: f for f in fresh}
        patched = fixes_apply(
            text,
            [LineFix(f.fingerprint, f.start_line, f.end_line, f.suggestion or "") for f in fresh],
        )
        left_out += [_entry_of(by_key[fix.key], why) for fix, why in patched.left_out]
        if patched.applied and _breaks(path, text, patched.text):
            # The gate checked where a suggestion goes, not what it makes: one that turns
            # a file that parsed into one that does not is left out (the others kept when
            # they parse without it).
            kept = [f for f in patched.applied if not _breaks(path, text, fixes_apply(text, [f]).text)]  # fmt: skip
            redo = fixes_apply(text, kept)
            if kept and _breaks(path, text, redo.text):
                kept, redo = [], fixes_apply(text, [])
            left_out += [
                _entry_of(by_key[f.key], f"{path} would no longer parse as Python with it")
                for f in patched.applied
                if f not in kept
            ]
            patched = redo
        if patched.applied and patched.text != text:
            files[path] = (entry.mode, patched.text)
            applied += [_entry_of(by_key[fix.key]) for fix in patched.applied]
        else:
            left_out += [
                _entry_of(by_key[fix.key], "the suggestion changes nothing at the head")
                for fix in patched.applied
            ]
    return files, applied, left_out


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _breaks(path: str, before: str, after: str) -> bool:
    """Whether the fixes turn a Python file that parsed into one that does not."""
    return path.endswith((".py", ".pyi")) and _parses(before) and not _parses(after)


def _commit(
    gateway,
    repo: RepoRef,
    row: FixProposal,
    head: str,
    files: dict,
    applied: list[dict],
    *,
    into: str,
) -> str:
    """One commit over `head` applying `files`, and Tasuku's branch pointing at it. The
    same fixes over the same head, already on the branch, are not committed again."""
    branch = row.branch
    on_branch = gateway.git_branch_sha(repo, branch=branch)
    same = [a["fingerprint"] for a in applied] == [a["fingerprint"] for a in row.applied or []]
    if on_branch and on_branch == row.commit_sha and row.head_sha == head and same:
        return on_branch
    if on_branch and on_branch != row.commit_sha:
        # A branch of that name Tasuku did not leave there: moved by force only when no
        # one's open pull request comes from it (else it would rewrite their branch).
        theirs = [
            p.number
            for p in gateway.pull_requests_from(repo, branch=branch, base=None)
            # Tasuku's own (into the head branch: a send whose record was lost opened it)
            if p.state == "open" and p.number != row.number and p.base_ref != into
        ]
        if theirs:
            raise GitHubError(
                f"Branch {branch} is the branch of open pull request #{theirs[0]}: Tasuku "
                "does not move a branch someone else's pull request comes from. Rename that "
                "branch, or close that pull request, then send again.",
                permanent=True,
            )
    base_tree = gateway.git_commit_tree(repo, sha=head)
    tree = gateway.git_tree_create(repo, base_tree=base_tree, files=files)
    count = len(applied)
    # No engine text and no path (the author names the files): a commit message is not
    # escaped Markdown, and "Closes #1" or a "Co-authored-by:" trailer in it would act once
    # the commit reaches the default branch. The pull request's body lists the fixes.
    message = (
        f"Apply {count} one-click fix{'es' if count != 1 else ''} from Tasuku's review of "
        f"#{row.pull_request.number}\n\n"
        f"The fixes are listed in the pull request from {branch}."
    )
    commit = gateway.git_commit_create(repo, message=message, tree=tree, parent=head)
    if on_branch is None:
        try:
            gateway.git_branch_create(repo, branch=branch, sha=commit)
            return commit
        except GitHubError as exc:
            if exc.status != 422 or "already exists" not in exc.message:
                raise
            # Made meanwhile (a lost answer, another sender): it is Tasuku's, moved below.
    gateway.git_branch_move(repo, branch=branch, sha=commit)
    return commit


def _fix_body(row: FixProposal, info, applied: list[dict], left_out: list[dict]) -> str:
    number = row.pull_request.number
    lines = [
        f"One-click fixes from Tasuku's review of #{number}, in one commit over its head "
        f"{code_span(info.head_sha[:12])}. Merging this pull request applies them to "
        f"{code_span(info.head_ref)}.",
        "",
        "**Applied:**",
    ]
    lines += [_listed(a) for a in applied[:MAX_LISTED]]
    if left_out:
        lines += ["", "**Left out** (apply or fix them by hand):"]
        lines += [f"{_listed(a)} — {inline_text(a['why'], 300)}" for a in left_out[:MAX_LISTED]]
    lines += [
        "",
        f"This branch ({code_span(row.branch)}) is Tasuku's: a later review of #{number} "
        "updates it in place, and Tasuku closes this pull request once no fix is left.",
    ]
    return clip_bytes("\n".join(lines), MAX_BODY_BYTES)


def _listed(entry: dict) -> str:
    lines = (
        f"line {entry['start_line']}"
        if entry["start_line"] == entry["end_line"]
        else f"lines {entry['start_line']}–{entry['end_line']}"
    )
    rule = f" ({inline_text(entry['rule'], 100)})" if entry.get("rule") else ""
    return f"- {code_span(entry['path'])} {lines}: {inline_text(entry['title'], 200)}{rule}"


def _pull_open(gateway, repo: RepoRef, row: FixProposal, info, applied, left_out):
    """Tasuku's open pull request from its branch into the head branch: the one on
    record edited, an open one found by its branch, or a new one."""
    title = f"Tasuku's one-click fixes for #{row.pull_request.number}"
    body = _fix_body(row, info, applied, left_out)
    number = row.number if row.state == "open" else None
    if number is None:
        found = gateway.pull_requests_from(repo, branch=row.branch, base=info.head_ref)
        number = next((p.number for p in found if p.state == "open"), None)
    if number is not None:
        pull = gateway.fix_pull_update(repo, number=number, title=title, body=body)
        if pull.state == "open" and pull.base_ref == info.head_ref:
            return pull
    try:
        return gateway.fix_pull_create(
            repo, branch=row.branch, base=info.head_ref, title=title, body=body
        )
    except GitHubError as exc:
        if exc.status != 422 or "already exists" not in exc.message:
            raise
    # Opened meanwhile (by a sender whose answer was lost): edit that one.
    found = gateway.pull_requests_from(repo, branch=row.branch, base=info.head_ref)
    open_now = next((p for p in found if p.state == "open"), None)
    if open_now is None:
        raise GitHubError(
            f"GitHub says a pull request from {row.branch} exists but lists none open",
            permanent=False,
        )
    return gateway.fix_pull_update(repo, number=open_now.number, title=title, body=body)


def _declined(gateway, repo: RepoRef, row: FixProposal, info) -> bool:
    """Whether someone closed Tasuku's open pull request without merging it: a person's
    no, which a later review does not overrule (**Send again** in the admin does)."""
    if not row.number or row.state != "open":
        return False
    found = gateway.pull_requests_from(repo, branch=row.branch, base=info.head_ref)
    mine = next((p for p in found if p.number == row.number), None)
    return mine is not None and mine.state == "closed" and not mine.merged


def _close(gateway, repo: RepoRef, row: FixProposal, why: str) -> dict[str, Any]:
    """Close Tasuku's pull request (saying why) and delete its branch, if there is one."""
    if row.number and row.state == "open":
        body = (
            f"Closed by Tasuku: {why}. The fixes this pull request proposed are no longer needed."
        )
        try:
            gateway.fix_pull_update(repo, number=row.number, body=body, state="closed")
        except GitHubError as exc:
            # Merged or closed meanwhile (GitHub refuses to edit some such): closed either way.
            if exc.status != 422:
                raise
    deleted = _branch_drop(gateway, repo, row)
    outcome = f"closed: {why}" if row.number else f"nothing to propose: {why}"
    if deleted:
        outcome += f"; branch {row.branch} deleted"
    return {
        "state": "closed" if row.number else "",
        "commit_sha": "",
        "applied": [],
        "outcome": outcome,
    }


def _branch_drop(gateway, repo: RepoRef, row: FixProposal) -> bool:
    """Delete Tasuku's branch if it is there. Looked for, not taken from the row: a send
    that failed after making the branch (its pull request refused) left it unrecorded. A
    read first: no write when there is none."""
    if gateway.git_branch_sha(repo, branch=row.branch) is None:
        return False
    return gateway.git_branch_delete(repo, branch=row.branch)


def _review_link(
    gateway, repo: RepoRef, row: FixProposal, url: str, number: int, count: int
) -> None:
    """Say in the review's summary where its fixes are."""
    _review_say(
        gateway, repo, row,
        f"{LEAD} {count} suggestion{'s are' if count != 1 else ' is'} proposed as one commit "
        f"in [#{number}]({url}), a pull request into this one's branch from Tasuku's branch "
        f"{code_span(row.branch)}. Tasuku never pushes to this branch.",
    )  # fmt: skip


def _review_say(gateway, repo: RepoRef, row: FixProposal, line: str) -> None:
    """`line` in the review's summary, in place of the paragraph about its fixes
    (`summary_note`'s, or an earlier send's), or added."""
    review = Review.objects.filter(pk=row.review_id).first() if row.review_id else None
    if review is None or not review.github_review_id or not review.body:
        return
    if line in review.body:
        return
    kept = [text for text in review.body.split("\n") if not text.startswith(LEAD)]
    parts = re.sub(r"\n{3,}", "\n\n", "\n".join(kept))
    # Before the run marker and the details: right after the verdict's paragraphs.
    cut = parts.find("\n\n<details>")
    body = parts[:cut] + f"\n\n{line}" + parts[cut:] if cut >= 0 else f"{parts}\n\n{line}"
    posted = gateway.review_update(
        repo, number=row.pull_request.number, review_id=review.github_review_id, body=body
    )
    Review.objects.filter(pk=review.pk).update(body=posted.body)

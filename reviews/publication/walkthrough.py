"""The walkthrough: one comment per pull request that explains the change — what changed,
per group of files, the risk areas triage saw — and, for each reviewer, what it reviewed
and what it did not (filtered, not shown, unread), how its review is going or how it
ended, with links to the review and the run page (docs/reviews.md, *The walkthrough*).

One per pull request, not per reviewer: what changed is the same for every reviewer,
and one comment whatever the number of reviewers is less noise; each reviewer has its
own section. It is GitHub's forge's (reviews/pipeline/forges.py): a run announces itself once it
has looked at the change (`walkthrough_begin`, shown only if the review is still going
UNDER_WAY_GRACE later), and asks for its ending to be shown (`walkthrough_end`). Local reviews never reach it, and neither do check-less runs (a
review pass reports through its task: repos.policy.CHECKLESS_TRIGGERS).

Posting is an outbox (a durable queue row, `Walkthrough`): a run only records what is to
be shown and rings; the sender renders the body from the rows as they are when it sends,
finds Tasuku's comment by its signed marker (only on Tasuku's own comments:
`markers.is_ours`) and edits it, or creates it once. GitHub's weather defers the row, a
refusal fails it with the reason, shown on the run page: the review is never failed or
held by its walkthrough.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import Count, F, OuterRef, Subquery
from django.utils import timezone
from django.utils.translation import ngettext

from repos import github
from repos.github import GitHubError, IssueCommentInfo, RepoRef
from repos.policy import CHECKLESS_TRIGGERS, EffectiveConfig
from reviews.checks.checkruns import dashboard_url
from reviews.models import Finding, FindingState, Review, ReviewRun, RunStatus, Walkthrough
from reviews.scope.coverage import entries_of, unreviewed
from reviews.scope.diff import Diff, diff_parse
from reviews.text.escaping import block_text, code_span, inline_text
from reviews.text.markers import is_ours, marker, marker_of
from reviews.text.rendering import MAX_BODY_BYTES, clip_bytes
from sandbox.contract import MAX_WALKTHROUGH
from tasuku import durable

if TYPE_CHECKING:
    from reviews.core.context import Context
    from sandbox.workspace import Checkout

logger = logging.getLogger(__name__)

SEND_TASK = "reviews.tasks.walkthrough_send"
KIND = "walkthrough"
MAX_FILES = 300  # files of the change kept on the row
MAX_GROUPS = 15
MAX_PER_GROUP = 8
MAX_LISTED = 10
# How long a review runs before its walkthrough says it is under way: one that ends
# sooner (a static review, a small change) posts the walkthrough once, with its final
# text; a longer one shows it under way within this (and the reaper's period) of starting.
UNDER_WAY_GRACE = timedelta(seconds=20)

WALKTHROUGHS = durable.Queue(
    model="reviews.Walkthrough",
    task=SEND_TASK,
    name="walkthrough",
    waiting=(Walkthrough.Status.DUE,),
    working=Walkthrough.Status.SENDING,
    failed=Walkthrough.Status.FAILED,
    installation="pull_request__repository__installation__github_id",
    max_attempts=5,
    ring_again=timedelta(minutes=2),
)


def walkthrough_wanted(run: ReviewRun, config: EffectiveConfig) -> bool:
    """A walkthrough is kept for a run on GitHub whose repository wants one, unless the
    run reports elsewhere (a review pass, a local review)."""
    return (
        config.walkthrough
        and run.trigger not in CHECKLESS_TRIGGERS
        and run.pull_request.repository.installation.github_id != 0
    )


def change_of(diff: Diff, checkout: Checkout, verdict: Any) -> dict[str, Any]:
    """What the whole pull request changes at this head, as the row keeps it."""
    files = [
        {
            "path": f.path,
            "status": f.status,
            "previous_path": f.previous_path or "",
            "added": f.added_count,
            "removed": f.removed_count,
            "binary": f.binary,
        }
        for f in diff.files[:MAX_FILES]
    ]
    return {
        "head_sha": checkout.head_sha,
        "base_sha": checkout.merge_base or checkout.base_sha,
        "files": files,
        "file_count": len(diff.files),
        "added": sum(f.added_count for f in diff.files),
        "removed": sum(f.removed_count for f in diff.files),
        "risk_areas": list(verdict.risk_areas) if verdict else [],
        "risk_by": verdict.decided_by if verdict else "",
        "triage": verdict.summary if verdict else "",
    }


def walkthrough_begin(ctx: Context, checkout: Checkout) -> None:
    """The run has looked at the change (checkout, filters, triage): show what changed
    and that its review is under way. Never raises: the review goes on regardless."""
    run = ctx.run
    if not walkthrough_wanted(run, ctx.config):
        return
    try:
        core = ctx.core
        # An incremental review's own diff is only the new commits: the walkthrough
        # explains the whole pull request.
        whole = core.anchors if core.anchors is not None else core.diff
        if checkout.anchor_diff is not None and core.anchors is None:
            whole = diff_parse(checkout.anchor_diff)
        walkthrough_request(run, change=change_of(whole, checkout, core.verdict), under_way=True)
    except Exception:  # noqa: BLE001 - the walkthrough never stops a review
        logger.exception("run %s: could not record its walkthrough", run.pk)


def walkthrough_end(run: ReviewRun) -> ReviewRun | None:
    """The run has ended (or is waiting to be tried again): show how. Never raises.
    Returns the run as it ended, read here (None if it could not be: what follows its
    end reads it then)."""
    current = None
    try:
        run = current = ReviewRun.objects.select_related(
            "pull_request__repository__installation", "reviewer"
        ).get(pk=run.pk)
        if not walkthrough_wanted(run, EffectiveConfig.model_validate(run.config)):
            return current
        quiet = (RunStatus.QUEUED, RunStatus.CANCELLED, RunStatus.SKIPPED)
        if run.status in quiet and not _speaks_for(run):
            # Stopped before it looked at the change (superseded by a newer head, the pull
            # request closed): the section keeps the last run that did.
            return current
        walkthrough_request(run)
    except Exception:  # noqa: BLE001 - the walkthrough never stops a review
        logger.exception("run %s: could not record its walkthrough", run.pk)
    return current


def _speaks_for(run: ReviewRun) -> bool:
    runs = (
        Walkthrough.objects.filter(pull_request_id=run.pull_request_id)
        .values_list("runs", flat=True)
        .first()
    )
    return bool(runs) and runs.get(str(run.reviewer_id)) == run.pk


def walkthrough_request(
    run: ReviewRun, *, change: dict[str, Any] | None = None, under_way: bool = False
) -> None:
    """Ask for the pull request's walkthrough to show `run` (and `change`, what its head
    changes), and ring its sender. Only a newer run of a reviewer replaces the one its
    section shows.

    `under_way` (the run has begun): shown only once the review has taken UNDER_WAY_GRACE,
    so that a review that ends sooner posts its walkthrough once, with its final text (one
    write, not two); the sweep rings it when the grace is over, and the run's end, asked
    for meanwhile, makes it due at once."""
    now = timezone.now()
    with transaction.atomic():
        row, created = Walkthrough.objects.select_for_update().get_or_create(
            pull_request_id=run.pull_request_id
        )
        runs = dict(row.runs or {})
        slot = str(run.reviewer_id)
        if runs.get(slot, 0) > run.pk:
            return  # an older run ending late: the newer run's section stands
        runs[slot] = run.pk
        fields: dict[str, Any] = {"runs": runs, "version": F("version") + 1, "requested_at": now}
        if change is not None:
            fields["change"] = change
        if under_way:
            # While a sender holds the row only the version goes up (`Queue.asked_again`).
            if Walkthrough.objects.filter(pk=row.pk, status=Walkthrough.Status.SENDING).update(
                **fields
            ):
                return
            idle = Walkthrough.objects.filter(pk=row.pk).exclude(status=Walkthrough.Status.SENDING)
            if created or row.status != Walkthrough.Status.DUE:
                # Not rung: the sweep rings it once the grace is over (tasuku/durable.py,
                # `ring_due`), unless the run's end made it due at once before.
                idle.update(
                    **fields,
                    status=Walkthrough.Status.DUE,
                    attempts=0,
                    next_attempt_at=now + UNDER_WAY_GRACE,
                )
            else:
                idle.update(**fields)  # already due: it goes when it was to
            return
        # A failed or sent row is due again, with its tries afresh, at once; one waiting
        # out GitHub's weather (a deferral) keeps its `next_attempt_at`.
        WALKTHROUGHS.asked_again(row.pk, **fields)


def walkthroughs_sweep() -> int:
    """Hand walkthroughs whose sender died to another, and ring the due ones."""
    lost = {"error": "The worker stopped while sending the walkthrough."}
    return WALKTHROUGHS.sweep(lost=lost, lost_last=lost)["rung"]


# --- Sending ----------------------------------------------------------------------------


class WalkthroughSend(durable.Job):
    """Bring the pull request's walkthrough comment on GitHub up to date: `sent`,
    `waiting` (GitHub's weather, or a newer version to send), `failed` or `not claimed`."""

    queue = WALKTHROUGHS
    retry_on = (GitHubError,)
    related = ("pull_request__repository__installation",)
    since = "requested_at"
    log_as = "walkthrough"

    def work(self) -> str:
        row = self.row
        pull_request = row.pull_request
        repository = pull_request.repository
        repo = RepoRef.of(repository)
        key = f"pr-{pull_request.pk}"
        signed = marker(KIND, key)
        body = clip_bytes(walkthrough_body(row), MAX_BODY_BYTES - len(signed.encode()) - 2)
        body = f"{body}\n\n{signed}"
        posted = _post(github.gateway(), repo, pull_request.number, row, body, key, signed)
        done = {"comment_id": posted.id, "comment_url": posted.html_url, "body": body}
        return self.queue.sent(self.pk, self.attempt, row.version, Walkthrough.Status.SENT,
                               **done, error="")  # fmt: skip

    def failure_fields(self, exc: BaseException, verdict: durable.Verdict) -> dict:
        said = (
            f"GitHub did not take the walkthrough ({verdict.why or verdict.kind}): {exc}"
            if verdict.kind == durable.FAILED
            else f"the walkthrough waits for GitHub ({verdict.why}): {exc}"
        )
        return {"error": said[:2000]}


walkthrough_send = WalkthroughSend.run  # the task's body (reviews/tasks.py)


def _post(
    gateway, repo: RepoRef, number: int, row: Walkthrough, body: str, key: str, signed: str
) -> IssueCommentInfo:
    """Edit Tasuku's walkthrough comment on the pull request, or create it once."""
    if row.comment_id:
        if row.body == body:
            return IssueCommentInfo(id=row.comment_id, body=body, html_url=row.comment_url)
        try:
            return gateway.issue_comment_update(repo, comment_id=row.comment_id, body=body)
        except GitHubError as exc:
            if exc.status != 404:
                raise
            # Someone deleted it: look again, and make a new one if it is gone.
    # A comment can be on GitHub unrecorded only if a create was tried (its answer lost,
    # or the sender stopped before recording it): a walkthrough never sent skips the
    # look-up, a request saved on every first review.
    if row.comment_id or row.create_tried:
        slug = gateway.app_slug()
        for comment in gateway.issue_comments_list(repo, number=number):
            # Only Tasuku's own comment with a valid marker: a copy of the marker in
            # anyone else's comment is text, and never what Tasuku edits.
            if (
                is_ours(comment.user_login, comment.user_type, slug)
                and marker_of(comment.body, KIND) == key
            ):
                if comment.body == body:
                    return comment
                return gateway.issue_comment_update(repo, comment_id=comment.id, body=body)
    Walkthrough.objects.filter(pk=row.pk).update(create_tried=True)
    # The gateway looks for this marker before it posts again after a lost answer.
    return gateway.issue_comment_create(repo, number=number, body=body, marker=signed)


# --- The body ---------------------------------------------------------------------------


def walkthrough_body(row: Walkthrough) -> str:
    """The comment, from the rows as they are now. Everything from the pull request or
    an engine in it is escaped and bounded (reviews/text/escaping.py)."""
    parts = ["### Tasuku walkthrough", ""]
    parts += _change_section(row.change or {})
    open_findings = (
        Finding.objects.filter(review__run=OuterRef("pk"), state=FindingState.OPEN)
        .order_by()
        .values("review__run")
    )
    runs = (
        ReviewRun.objects.filter(pk__in=[int(pk) for pk in (row.runs or {}).values()])
        # Each run's review, and how many of its findings are open, in the same read.
        .select_related("reviewer", "review")
        .annotate(
            open_findings=Subquery(open_findings.annotate(n=Count("pk")).values("n")),
            blocking_findings=Subquery(
                open_findings.filter(blocking=True).annotate(n=Count("pk")).values("n")
            ),
        )
        .order_by("reviewer__slug")
    )
    if runs:
        parts += ["", "#### Reviews", ""]
        for run in runs:
            parts += _run_section(run, row.change or {})
    parts += [
        "",
        "<sub>Tasuku keeps this comment up to date as the pull request changes.</sub>",
    ]
    return "\n".join(parts)


def _group(path: str) -> str:
    parent = PurePosixPath(path).parent.parts[:2]
    return "/".join(parent) + "/" if parent else "(top level)"


def _change_section(change: dict[str, Any]) -> list[str]:
    files = change.get("files") or []
    if not change.get("head_sha"):
        return ["A review of this pull request is about to start."]
    count = int(change.get("file_count") or len(files))
    span = code_span(f"{change.get('base_sha', '')[:7]}…{change['head_sha'][:7]}")
    lines = [
        "**What changed** in "
        + span
        + ": "
        + ngettext("%(count)d file", "%(count)d files", count) % {"count": count}
        + f", +{int(change.get('added') or 0)} −{int(change.get('removed') or 0)}.",
        "",
    ]
    groups: dict[str, list[dict[str, Any]]] = {}
    for file in files:
        groups.setdefault(_group(str(file.get("path", ""))), []).append(file)
    ranked = sorted(
        groups.items(), key=lambda g: (-sum(f["added"] + f["removed"] for f in g[1]), g[0])
    )
    for name, members in ranked[:MAX_GROUPS]:
        added = sum(int(f.get("added") or 0) for f in members)
        removed = sum(int(f.get("removed") or 0) for f in members)
        shown = ", ".join(_file(f) for f in members[:MAX_PER_GROUP])
        more = f" and {len(members) - MAX_PER_GROUP} more" if len(members) > MAX_PER_GROUP else ""
        lines.append(f"- {code_span(name)} (+{added} −{removed}): {shown}{more}")
    if len(ranked) > MAX_GROUPS:
        lines.append(f"- … and {len(ranked) - MAX_GROUPS} more groups of files")
    if count > len(files):
        lines.append(f"- … {count - len(files)} more files not listed")
    areas = [str(a) for a in (change.get("risk_areas") or [])][:MAX_LISTED]
    if areas:
        # The rule names the files with the most changed code; a triage model, areas.
        shown = (
            ", ".join(code_span(a) for a in areas)
            if change.get("risk_by") == "rule"
            else "; ".join(inline_text(a, 100) for a in areas)
        )
        lines += ["", f"**Risk areas** (triage, {inline_text(change.get('risk_by'), 60)}): {shown}"]
    elif change.get("triage"):
        lines += ["", f"**Triage:** {inline_text(change.get('triage'), 300)}"]
    return lines


def _file(file: dict[str, Any]) -> str:
    name = PurePosixPath(str(file.get("path", ""))).name or str(file.get("path", ""))
    status = str(file.get("status") or "modified")
    if file.get("previous_path"):
        status = f"renamed from {code_span(file['previous_path'])}"
    return f"{code_span(name)} ({inline_text(status, 300)})"


STATUS_LINE = {
    RunStatus.QUEUED: "⏳ waiting to be tried again",
    RunStatus.RUNNING: "⏳ review under way",
    RunStatus.DISPATCHED: "⏳ review under way on a GitHub Actions runner",
}


def _run_section(run: ReviewRun, change: dict[str, Any]) -> list[str]:
    review = getattr(run, "review", None)  # read with the run (walkthrough_body)
    head = code_span(run.head_sha[:7])
    links = f"[run details]({dashboard_url(run)})"
    if review is not None and review.github_review_url:
        links = f"[the review]({review.github_review_url}) · {links}"
    if run.status in STATUS_LINE:
        said = f"{STATUS_LINE[run.status]} at {head}"
    elif run.status == RunStatus.FAILED:
        said = (
            f"❌ failed at {inline_text(run.stage, 40)} at {head}: {inline_text(run.reason, 300)}"
        )
    elif run.status in (RunStatus.CANCELLED, RunStatus.SKIPPED):
        said = f"⏹ {run.status} at {head}: {inline_text(run.reason, 300)}"
    else:
        said = _outcome(run, review, head)
    lines = [f"**{inline_text(run.reviewer.slug, 64)}** · {said} · {links}"]
    if review is not None and review.walkthrough:
        lines += [
            "",
            "In the reviewer's words (a model's summary):",
            "",
            block_text(review.walkthrough, MAX_WALKTHROUGH),
        ]
    lines += [""] + _scope(run, change, review) + [""]
    return lines


def _outcome(run: ReviewRun, review: Review | None, head: str) -> str:
    if review is None:
        return f"✅ ended at {head}"
    count, blocking = run.open_findings or 0, run.blocking_findings or 0  # walkthrough_body
    findings = (
        ngettext("%(count)d open finding", "%(count)d open findings", count) % {"count": count}
        if count
        else "no open finding"
    ) + (f" ({blocking} blocking)" if blocking else "")
    check = f" · check `{run.check_conclusion}`" if run.check_conclusion else ""
    if review.state == "incomplete":
        why = inline_text(review.incomplete_reason, 300)
        return f"⚠️ not reviewed in full at {head} ({why}) · {findings}{check}"
    if review.state == "triaged":
        return f"➖ triaged trivial at {head}, not reviewed in depth · {findings}{check}"
    return f"✅ reviewed at {head} · {findings}{check}"


def _scope(run: ReviewRun, change: dict[str, Any], review: Review | None) -> list[str]:
    """What this reviewer reviewed and what it did not (`review`: the run's, if any)."""
    lines = []
    reviewed = len(run.reviewed or [])
    if run.status in STATUS_LINE and change.get("head_sha") != run.head_sha:
        return ["- What it reviews is listed here when it has looked at the change."]
    scope = (
        f" (only the changes since {code_span(run.incremental_since[:7])})"
        if run.incremental_since
        else ""
    )
    lines.append(
        "- "
        + ngettext("Reviewed %(count)d file", "Reviewed %(count)d files", reviewed)
        % {"count": reviewed}
        + scope
        + "."
    )
    ledger = entries_of(review.coverage if review is not None else None)
    missing = [(e.path, e.reason) for e in unreviewed(ledger)]
    for label, items in (
        ("**Not reviewed**", missing),
        ("Excluded by a rule", [(p, r) for p, r in (run.filtered or [])]),
        (
            "Not shown to the reviewer (it could read them)",
            [(o["path"], o["reason"]) for o in run.omitted or []] if not ledger else [],
        ),
        (
            "Could not be read",
            [(u.get("path", ""), u.get("reason", "")) for u in _unread(run)] if not ledger else [],
        ),
    ):
        if items:
            shown = ", ".join(
                f"{code_span(path)} ({inline_text(reason, 120)})"
                for path, reason in items[:MAX_LISTED]
            )
            more = f" and {len(items) - MAX_LISTED} more" if len(items) > MAX_LISTED else ""
            lines.append(f"- {label}: {shown}{more}")
    return lines


def _unread(run: ReviewRun) -> list[dict[str, Any]]:
    result = run.runner_result or {}
    unread = result.get("unread") if isinstance(result, dict) else None
    return [u for u in unread if isinstance(u, dict)] if isinstance(unread, list) else []

"""What Tasuku writes on GitHub: review bodies, inline comments, check-run output.

Pure: validated findings in, Markdown out. Every inline comment carries a hidden marker
with its finding's fingerprint and every review body a marker with its run, so posting
can be repeated safely (a marker already on the pull request is not posted again).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.utils.translation import ngettext

from reviews.scope.coverage import EXCLUDED, REVIEWED, Entry, title_part, unreviewed
from reviews.text.escaping import block_text, code_span, inline_text
from reviews.text.markers import marker, markers_of
from reviews.validation.findings import GROUPED, OPEN, UNANCHORABLE, Validated
from sandbox.contract import ReviewSummary, Severity, Side

BODY_ONLY_NOTE = (
    "GitHub did not accept inline comments on these lines, so the findings are listed here."
)
REFUSED_NOTE = (
    "GitHub refused inline comments on these lines (its reason is given with each), so "
    "these findings are listed here; the others are inline."
)
# GitHub's limits: a review or comment body 65,536 characters (reported to be counted in
# bytes too: bytes are never fewer than characters, so counting bytes fits both), a check
# run's summary 65,535 bytes.
MAX_BODY_BYTES = 65_536
MAX_SUMMARY_BYTES = 65_535
CUT = "\n\n… (cut to fit GitHub's limit)"


def fence_for(text: str) -> str:
    """A code fence longer than any backtick run inside `text`."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def clip_bytes(text: str, limit: int) -> str:
    """`text` in at most `limit` bytes of UTF-8, cut at a character boundary with a note
    when it does not fit."""
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[: limit - len(CUT.encode())].decode("utf-8", "ignore") + CUT


def location(finding: Validated) -> str:
    lines = (
        f"{finding.start_line}"
        if finding.start_line == finding.end_line
        else f"{finding.start_line}-{finding.end_line}"
    )
    side = " (removed lines)" if finding.side == Side.LEFT else ""
    return f"{finding.path}:{lines}{side}"


def finding_marker(fingerprint: str) -> str:
    return marker("finding", fingerprint)


def run_marker(run_id: int) -> str:
    return marker("review", f"run-{run_id}")


def _heading(finding: Validated) -> str:
    blocking = " · blocking" if finding.blocking else ""
    category = inline_text(finding.category, 64)
    return (
        f"**{finding.severity.value.title()}{blocking} · {category}** — "
        f"{inline_text(finding.title)}"
    )


def _also(finding: Validated) -> list[str]:
    """The other occurrences a grouped comment stands for."""
    said = []
    also = getattr(finding, "also_lines", ())
    if also:
        shown = ", ".join(str(n) for n in also[:30]) + (" …" if len(also) > 30 else "")
        said.append(
            ngettext(
                "The same in this file on line %(lines)s.",
                "The same in this file on lines %(lines)s.",
                len(also),
            )
            % {"lines": shown}
        )
    here = getattr(finding, "also_here", ())
    if here:
        said.append("Also on this line: " + "; ".join(inline_text(t) for t in here[:10]) + ".")
    return said


def comment_body(finding: Validated) -> str:
    parts = [_heading(finding)]
    if finding.body:
        parts += ["", block_text(finding.body)]
    also = _also(finding)
    if also:
        parts += ["", " ".join(also)]
    if finding.evidence:
        parts += [
            "",
            "<details><summary>Evidence</summary>",
            "",
            block_text(finding.evidence),
            "",
            "</details>",
        ]
    if finding.suggestion is not None:
        fence = fence_for(finding.suggestion)
        if finding.suggestion_applies:
            parts += ["", f"{fence}suggestion", finding.suggestion, fence]
        else:
            parts += ["", "Suggested fix:", "", fence, finding.suggestion, fence]
    signed = finding_marker(finding.fingerprint)
    return clip_bytes("\n".join(parts), MAX_BODY_BYTES - len(signed.encode()) - 2) + "\n\n" + signed


def comment_payload(finding: Validated) -> dict[str, Any]:
    """An entry of a review's `comments[]`: `line`/`side` (+ `start_line`/`start_side`
    for a range), never the closing-down `position`; a single line has no start_line
    (GitHub refuses start_line == line)."""
    payload: dict[str, Any] = {
        "path": finding.path,
        "body": comment_body(finding),
        "line": finding.end_line,
        "side": finding.side.value,
    }
    if finding.start_line < finding.end_line:
        payload["start_line"] = finding.start_line
        payload["start_side"] = finding.side.value
    return payload


def markers_in(bodies: Iterable[str]) -> set[str]:
    """Fingerprints of Tasuku's findings already posted in these comment bodies (the
    caller passes only the bodies of Tasuku's own comments)."""
    return markers_of(bodies, "finding")


@dataclass(frozen=True)
class ReviewContext:
    run_id: int
    reviewer: str
    base_sha: str
    head_sha: str
    dashboard_url: str
    filtered: tuple[tuple[str, str], ...] = ()
    sanitised: tuple[str, ...] = ()
    incremental: bool = False
    omitted: tuple[tuple[str, str], ...] = ()
    guidelines: tuple[str, ...] = ()
    still_open: int = 0  # earlier findings still open on the pull request
    # The ledger's files not reviewed, with why (reviews/scope/coverage.py)
    not_reviewed: tuple[tuple[str, str], ...] = ()
    # Where the review's one-click fixes are proposed, or why not (reviews/publication/fixes.py).
    fixes: str = ""


def review_body(
    summary: ReviewSummary,
    findings: list[Validated],
    context: ReviewContext,
    *,
    inline: Iterable[Validated] = (),
    body_only: bool = False,
    refused: Iterable[tuple[Validated, str]] = (),
) -> str:
    """The review's body: the verdict, findings that could not go inline (all of them,
    `body_only`; or those GitHub `refused`, each with its reason), the summary, what was
    not reviewed, and the run marker."""
    published = [f for f in findings if f.published]
    grouped = [f for f in findings if f.held == GROUPED]
    # Every open finding a posted comment stands for: its own, and those it lists.
    told = published + grouped
    blocking = sum(1 for f in told if f.blocking)
    unanchored = [f for f in findings if f.held == UNANCHORABLE]
    parts = [f"### Tasuku review · {context.reviewer}", ""]
    span = f"`{context.base_sha[:7]}…{context.head_sha[:7]}`"
    if context.incremental:
        parts += [f"Reviewed only the changes since `{context.base_sha[:7]}`.", ""]
    if told:
        parts.append(
            ngettext(
                "Reviewed %(span)s: **%(count)d finding**",
                "Reviewed %(span)s: **%(count)d findings**",
                len(told),
            )
            % {"span": span, "count": len(told)}
            + (f", {blocking} blocking" if blocking else "")
            + (
                ngettext(" (in %(n)d comment).", " (in %(n)d comments).", len(published))
                % {"n": len(published)}
                if grouped
                else "."
            )
        )
    elif context.not_reviewed:
        parts.append(f"Reviewed {span}: no problems found in the files it reviewed.")
    elif context.still_open:
        parts.append(f"Reviewed {span}: no new problems in the changed lines.")
    else:
        parts.append(f"Reviewed {span}: no problems found in the changed lines.")
    if context.not_reviewed:
        count = len(context.not_reviewed)
        parts.append(
            ngettext(
                "**%(count)d changed file was not reviewed** (see *Not reviewed* below): "
                "this head is not reviewed in full.",
                "**%(count)d changed files were not reviewed** (see *Not reviewed* below): "
                "this head is not reviewed in full.",
                count,
            )
            % {"count": count}
        )
    if context.still_open:
        parts.append(
            ngettext(
                "%(count)d earlier finding is still open on this pull request (see their threads).",
                "%(count)d earlier findings are still open on this pull request (see their "
                "threads).",
                context.still_open,
            )
            % {"count": context.still_open}
        )
    if grouped:
        parts.append(
            ngettext(
                "%(count)d of them is listed in the comment of the same problem, not "
                "commented on again.",
                "%(count)d of them are listed in the comments of the same problem, not "
                "commented on again.",
                len(grouped),
            )
            % {"count": len(grouped)}
        )
    suppressed = len(findings) - len(told)
    if suppressed:
        parts.append(
            ngettext(
                "%(count)d more finding was kept off the pull request (below the "
                "thresholds, duplicated or past the comment limit): [see them all](%(url)s).",
                "%(count)d more findings were kept off the pull request (below the "
                "thresholds, duplicated or past the comment limit): [see them all](%(url)s).",
                suppressed,
            )
            % {"count": suppressed, "url": context.dashboard_url}
        )
    if context.fixes:
        parts.append(context.fixes)

    if body_only:
        parts += ["", BODY_ONLY_NOTE, ""]
        for finding in inline:
            parts += [f"#### {code_span(location(finding))}", comment_body(finding), ""]
    refused = list(refused)
    if refused:
        parts += ["", REFUSED_NOTE, ""]
        for finding, reason in refused:
            parts += [
                f"#### {code_span(location(finding))}",
                f"*GitHub: {inline_text(reason, 300)}*",
                "",
                comment_body(finding),
                "",
            ]

    if unanchored:
        parts += ["", "#### Findings outside the changed lines", ""]
        for finding in unanchored[:30]:
            parts.append(
                f"- {code_span(location(finding))} **{finding.severity.value}** — "
                f"{inline_text(finding.title)}"
            )

    parts += ["", "<details><summary>What was reviewed</summary>", ""]
    if summary.inspected_areas:
        parts.append("**Inspected:** " + "; ".join(inline_text(a) for a in summary.inspected_areas))
    if summary.important_files:
        parts.append(
            "**Important files:** " + ", ".join(code_span(p) for p in summary.important_files[:20])
        )
    if summary.validation:
        parts.append(f"**Validation:** {inline_text(summary.validation, 2000)}")
    if summary.context_sources:
        parts.append("**Context:** " + "; ".join(inline_text(c) for c in summary.context_sources))
    parts.append(f"**Confidence:** {summary.confidence:.0%}")
    if summary.limitations:
        parts.append(
            "**Limitations:** " + " ".join(inline_text(t, 2000) for t in summary.limitations)
        )
    if context.not_reviewed:
        shown = ", ".join(
            f"{code_span(path)} ({inline_text(reason, 300)})"
            for path, reason in context.not_reviewed[:15]
        )
        more = (
            f" and {len(context.not_reviewed) - 15} more" if len(context.not_reviewed) > 15 else ""
        )
        parts.append(f"**Not reviewed:** {shown}{more}")
    if context.filtered:
        shown = ", ".join(f"{code_span(path)} ({reason})" for path, reason in context.filtered[:15])
        more = f" and {len(context.filtered) - 15} more" if len(context.filtered) > 15 else ""
        parts.append(f"**Excluded by a rule:** {shown}{more}")
    if context.omitted:
        shown = ", ".join(f"{code_span(path)} ({reason})" for path, reason in context.omitted[:15])
        more = f" and {len(context.omitted) - 15} more" if len(context.omitted) > 15 else ""
        parts.append(
            f"**Not shown to the reviewer** (it could read them from the checkout): {shown}{more}"
        )
    if context.guidelines:
        parts.append("**Guidelines:** " + ", ".join(context.guidelines))
    if context.sanitised:
        parts.append(
            "**Removed before review:** "
            + ", ".join(code_span(p) for p in context.sanitised[:15])
            + " (never read: files that could instruct a model reviewer, and what links "
            "leading outside the repository point to)"
        )
    parts += ["", "</details>", "", f"[Run details]({context.dashboard_url})"]
    signed = run_marker(context.run_id)
    return clip_bytes("\n".join(parts), MAX_BODY_BYTES - len(signed.encode()) - 2) + "\n\n" + signed


def check_conclusion(
    findings: Iterable[Any], fail_on: Severity | None, *, in_full: bool = True
) -> str:
    """The gate. `failure` while an open finding (validated, or a stored row) reaches
    `fail_on`; otherwise `success` only when the head was reviewed in full — a review
    that did not look at everything (triaged trivial, over budget, incomplete) is
    `neutral`, however clean its carried findings are."""
    if fail_on is not None and any(
        f.state == OPEN and Severity(f.severity).at_least(fail_on) for f in findings
    ):
        return "failure"
    return "success" if in_full else "neutral"


def check_output(
    findings: list[Any],
    conclusion: str,
    fail_on: Severity | None,
    *,
    shortfall: str = "",
    limitations: Iterable[str] = (),
    ledger: Iterable[Entry] = (),
) -> tuple[str, str]:
    """(title, summary) of a completed check run. `shortfall` says why the head was not
    reviewed in depth; `ledger` is its coverage (reviews/scope/coverage.py): the files it did
    not review are named in the title and the summary, and "No problems found" is said
    only when there are none; `limitations` are the engine's own."""
    entries = list(ledger)
    missing = unreviewed(entries)
    open_now = [f for f in findings if f.state == OPEN]
    if open_now:
        worst = max((Severity(f.severity) for f in open_now), key=lambda s: s.rank).value
        count = ngettext("%(count)d open finding", "%(count)d open findings", len(open_now)) % {
            "count": len(open_now)
        }
        title = f"{count} (worst: {worst})"
    elif missing:
        title = "No problems found in what was reviewed"
    elif shortfall:
        title = "No open findings"
    else:
        title = "No problems found"
    if missing:
        title += " · " + title_part(entries)
    if shortfall:
        title += " · not reviewed in depth"
    lines = []
    if shortfall:
        lines.append(f"**Not reviewed in depth:** {shortfall}\n")
    if missing:
        named = ", ".join(
            f"{code_span(e.path)} ({inline_text(e.reason, 300)}"
            + (f", at {e.at[:7]}" if e.at else "")
            + ")"
            for e in missing[:20]
        )
        more = (
            f" and {len(missing) - 20} more (the run page lists them)" if len(missing) > 20 else ""
        )
        lines.append(f"**Not reviewed:** {named}{more}.\n")
    if entries:
        reviewed = sum(1 for e in entries if e.status == REVIEWED and e.adds)
        excluded = sum(1 for e in entries if e.status == EXCLUDED)
        lines.append(
            f"**Coverage:** {reviewed} reviewed, {excluded} excluded by a rule, "
            f"{len(missing)} not reviewed, of the {len(entries)} files this review covers "
            "(every file, with what read it, on the run page).\n"
        )
    if conclusion == "failure" and fail_on is not None:
        lines.append(
            f"Failing: an open finding reaches **{fail_on.value}**, this repository's threshold.\n"
        )
    limits = [inline_text(text, 2000) for text in limitations if text]
    if limits:
        lines.append("**Limitations:** " + " ".join(limits) + "\n")
    if open_now:
        lines += ["| Severity | Where | Finding |", "| --- | --- | --- |"]
        for finding in open_now[:50]:
            title_cell = inline_text(finding.title).replace("|", "\\|")
            if getattr(finding, "suppressed_in_pr", ""):
                # Its pragma is the pull request's own: open all the same, and said so.
                title_cell += (
                    " (suppressed in this pull request by "
                    + inline_text(finding.suppressed_in_pr).replace("|", "\\|")
                    + ": still open)"
                )
            severity = Severity(finding.severity).value
            where = code_span(location(finding)).replace("|", "\\|")
            lines.append(f"| {severity} | {where} | {title_cell} |")
        if len(open_now) > 50:
            lines.append(f"\n… and {len(open_now) - 50} more on the dashboard.")
    elif shortfall or missing:
        lines.append("No Tasuku finding is open on this pull request.")
    else:
        lines.append("No open finding on the changed lines.")
    return title, clip_bytes("\n".join(lines), MAX_SUMMARY_BYTES)

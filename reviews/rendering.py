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

from reviews.validation import OPEN, Validated
from sandbox.contract import ReviewSummary, Severity, Side

FINDING_MARKER = "<!-- tasuku:finding:{} -->"
RUN_MARKER = "<!-- tasuku:review:run-{} -->"
FINDING_MARKER_RE = re.compile(r"<!-- tasuku:finding:([0-9a-f]{8,64}) -->")
BODY_ONLY_NOTE = (
    "GitHub did not accept inline comments on these lines, so the findings are listed here."
)
# GitHub refuses bodies over 65,536 characters; leave room for multibyte text.
MAX_BODY = 60_000


def fence_for(text: str) -> str:
    """A code fence longer than any backtick run inside `text`."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 40] + "\n\n… (cut to fit GitHub's limit)"


def location(finding: Validated) -> str:
    lines = (
        f"{finding.start_line}"
        if finding.start_line == finding.end_line
        else f"{finding.start_line}-{finding.end_line}"
    )
    side = " (removed lines)" if finding.side == Side.LEFT else ""
    return f"{finding.path}:{lines}{side}"


def _heading(finding: Validated) -> str:
    blocking = " · blocking" if finding.blocking else ""
    return f"**{finding.severity.value.title()}{blocking} · {finding.category}** — {finding.title}"


def comment_body(finding: Validated) -> str:
    parts = [_heading(finding)]
    if finding.body:
        parts += ["", finding.body]
    if finding.evidence:
        parts += [
            "",
            "<details><summary>Evidence</summary>",
            "",
            finding.evidence,
            "",
            "</details>",
        ]
    if finding.suggestion is not None:
        fence = fence_for(finding.suggestion)
        if finding.suggestion_applies:
            parts += ["", f"{fence}suggestion", finding.suggestion, fence]
        else:
            parts += ["", "Suggested fix:", "", fence, finding.suggestion, fence]
    marker = FINDING_MARKER.format(finding.fingerprint)
    return _clip("\n".join(parts), MAX_BODY - len(marker) - 2) + "\n\n" + marker


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
    """Fingerprints of Tasuku's findings already posted in these comment bodies."""
    found: set[str] = set()
    for body in bodies:
        found.update(FINDING_MARKER_RE.findall(body or ""))
    return found


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


def review_body(
    summary: ReviewSummary,
    findings: list[Validated],
    context: ReviewContext,
    *,
    inline: Iterable[Validated] = (),
    body_only: bool = False,
) -> str:
    """The review's body: the verdict, findings that could not go inline, the summary,
    what was not reviewed, and the run marker."""
    published = [f for f in findings if f.published]
    blocking = sum(1 for f in published if f.blocking)
    unanchored = [f for f in findings if f.reason.startswith("not anchorable")]
    parts = [f"### Tasuku review · {context.reviewer}", ""]
    span = f"`{context.base_sha[:7]}…{context.head_sha[:7]}`"
    if context.incremental:
        parts += [f"Reviewed only the changes since `{context.base_sha[:7]}`.", ""]
    if published:
        parts.append(
            f"Reviewed {span}: **{len(published)} finding{'s' if len(published) != 1 else ''}**"
            + (f", {blocking} blocking." if blocking else ".")
        )
    else:
        parts.append(f"Reviewed {span}: no problems found in the changed lines.")
    suppressed = len(findings) - len(published)
    if suppressed:
        parts.append(
            f"{suppressed} more finding{'s were' if suppressed != 1 else ' was'} kept off the "
            f"pull request (below the thresholds, duplicated or past the comment limit): "
            f"[see them all]({context.dashboard_url})."
        )

    if body_only:
        parts += ["", BODY_ONLY_NOTE, ""]
        for finding in inline:
            parts += [f"#### `{location(finding)}`", comment_body(finding), ""]

    if unanchored:
        parts += ["", "#### Findings outside the changed lines", ""]
        for finding in unanchored[:30]:
            parts.append(f"- `{location(finding)}` **{finding.severity.value}** — {finding.title}")

    parts += ["", "<details><summary>What was reviewed</summary>", ""]
    if summary.inspected_areas:
        parts.append("**Inspected:** " + "; ".join(summary.inspected_areas))
    if summary.important_files:
        parts.append(
            "**Important files:** " + ", ".join(f"`{p}`" for p in summary.important_files[:20])
        )
    if summary.validation:
        parts.append(f"**Validation:** {summary.validation}")
    if summary.context_sources:
        parts.append("**Context:** " + "; ".join(summary.context_sources))
    parts.append(f"**Confidence:** {summary.confidence:.0%}")
    if summary.limitations:
        parts.append("**Limitations:** " + " ".join(summary.limitations))
    if context.filtered:
        shown = ", ".join(f"`{path}` ({reason})" for path, reason in context.filtered[:15])
        more = f" and {len(context.filtered) - 15} more" if len(context.filtered) > 15 else ""
        parts.append(f"**Not reviewed:** {shown}{more}")
    if context.omitted:
        shown = ", ".join(f"`{path}` ({reason})" for path, reason in context.omitted[:15])
        more = f" and {len(context.omitted) - 15} more" if len(context.omitted) > 15 else ""
        parts.append(
            f"**Not shown to the reviewer** (it could read them from the checkout): {shown}{more}"
        )
    if context.guidelines:
        parts.append("**Guidelines:** " + ", ".join(context.guidelines))
    if context.sanitised:
        parts.append(
            "**Removed before review:** "
            + ", ".join(f"`{p}`" for p in context.sanitised[:15])
            + " (agent instructions and links outside the repository are never read)"
        )
    parts += ["", "</details>", "", f"[Run details]({context.dashboard_url})"]
    marker = RUN_MARKER.format(context.run_id)
    return _clip("\n".join(parts), MAX_BODY - len(marker) - 2) + "\n\n" + marker


def check_conclusion(findings: Iterable[Any], fail_on: Severity | None) -> str:
    """`failure` while an open finding (validated, or a stored row) reaches `fail_on`,
    else `success`."""
    if fail_on is None:
        return "success"
    failing = any(f.state == OPEN and Severity(f.severity).at_least(fail_on) for f in findings)
    return "failure" if failing else "success"


def check_output(findings: list[Any], conclusion: str, fail_on: Severity | None) -> tuple[str, str]:
    """(title, summary) of a completed check run."""
    published = [f for f in findings if f.state == OPEN]
    if not published:
        title = "No problems found"
    else:
        worst = max((Severity(f.severity) for f in published), key=lambda s: s.rank).value
        title = f"{len(published)} finding{'s' if len(published) != 1 else ''} (worst: {worst})"
    lines = []
    if conclusion == "failure" and fail_on is not None:
        lines.append(
            f"Failing: an open finding reaches **{fail_on.value}**, this repository's threshold.\n"
        )
    if published:
        lines += ["| Severity | Where | Finding |", "| --- | --- | --- |"]
        for finding in published[:50]:
            title_cell = finding.title.replace("|", "\\|")
            severity = Severity(finding.severity).value
            lines.append(f"| {severity} | `{location(finding)}` | {title_cell} |")
        if len(published) > 50:
            lines.append(f"\n… and {len(published) - 50} more on the dashboard.")
    else:
        lines.append("No open finding on the changed lines.")
    return title, _clip("\n".join(lines), MAX_BODY)

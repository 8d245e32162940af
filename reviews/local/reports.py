"""A review as a report: plain text, JSON, or SARIF 2.1.0 (`manage.py review`).

Pure: plain data in (the review's summary, its findings as dictionaries and, for fixes,
a reader of the head's files), text out.

A finding's suggestion replaces whole lines: the lines the engine pointed at. When the
gate narrowed a finding to the changed lines (`original_start_line`/`original_end_line`
say where the engine pointed), the fix is for the original lines; when those are not
known, or the file cannot be read, no fix is offered (the text stays in the message).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from django.utils.translation import ngettext

from sandbox.contract import Severity

FINDING_KEYS = (
    "path", "start_line", "end_line", "side", "severity", "category", "title", "body", "evidence",
    "suggestion", "confidence", "blocking", "fingerprint", "state", "suppression_reason", "rule",
    "first_seen_sha", "original_start_line", "original_end_line", "suppressed_in_pr",
    "published",
)  # fmt: skip
URI_BASE = "SRCROOT"
LINE_RE = re.compile(r"([^\r\n]*)(\r\n|\r|\n|$)")

Source = Callable[[str], str | None]  # path -> the head's text of the file, None if unreadable
SARIF_LEVELS = {
    "critical": "error",
    "high": "error",
    "medium": "warning",
    "low": "note",
    "info": "note",
}
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def fix_lines(finding: dict[str, Any]) -> tuple[int, int] | None:
    """The whole lines a finding's suggestion replaces, or None when it offers no fix
    that can be applied: none written, not open, on removed lines, or narrowed to the
    changed lines with the lines it was written for unknown (or not around the
    narrowed ones: a stale record)."""
    if finding["suggestion"] is None or finding["state"] != "open" or finding["side"] != "RIGHT":
        return None
    start, end = finding["start_line"], finding["end_line"]
    original = (finding.get("original_start_line"), finding.get("original_end_line"))
    if original == (None, None):
        return start, end
    if None in original:
        return None
    first, last = original
    if not (first <= start <= end <= last):
        return None
    return first, last


@dataclass(frozen=True)
class Fix:
    start_line: int
    end_line: int
    replacement: str  # the new text of those whole lines, without their final newline
    region: dict[str, int]  # the exact SARIF region (line/column) it replaces
    inserted: str  # the exact SARIF inserted content


def _lines(text: str) -> list[tuple[str, str]]:
    """(content, newline) for each line; a final newline starts no line."""
    found = []
    for match in LINE_RE.finditer(text):
        content, newline = match.groups()
        if not content and not newline:
            break
        found.append((content, newline))
    return found


def fix_build(finding: dict[str, Any], source: Source | None) -> Fix | None:
    """The exact replacement of a finding's fix in the head's file, or None.

    Columns count Unicode code points (the run says `columnKind: unicodeCodePoints`) and
    every region has an explicit end column: a replacement covers the lines' text, not
    their final newline (so it adds none); a deletion also takes one newline (so it
    leaves no blank line) — the lines' own, or the one before them at the end of a file.
    """
    lines = fix_lines(finding)
    if lines is None or source is None:
        return None
    text = source(finding["path"])
    if text is None:
        return None
    rows = _lines(text)
    first, last = lines
    if last > len(rows):
        return None
    replacement = finding["suggestion"]
    if replacement.endswith("\n"):
        replacement = replacement[:-1]
    newline = rows[first - 1][1] or (rows[0][1] or "\n")
    end_column = len(rows[last - 1][0]) + 1
    if finding["suggestion"] == "":
        if last < len(rows):
            region = {"startLine": first, "startColumn": 1, "endLine": last + 1, "endColumn": 1}
        elif first > 1:
            before = len(rows[first - 2][0]) + 1
            region = {"startLine": first - 1, "startColumn": before,
                      "endLine": last, "endColumn": end_column}  # fmt: skip
        else:
            region = {"startLine": 1, "startColumn": 1, "endLine": last, "endColumn": end_column}
        inserted = ""
    else:
        region = {"startLine": first, "startColumn": 1, "endLine": last, "endColumn": end_column}
        inserted = newline.join(replacement.split("\n")) if newline != "\n" else replacement
    return Fix(first, last, replacement, region, inserted)


def artifact_uri(path: str) -> str:
    """A repository path as a relative URI reference (percent-encoded, UTF-8)."""
    return quote(path, safe="/")


def _fix_text(finding: dict[str, Any]) -> str:
    text = finding["suggestion"]
    lines = fix_lines(finding)
    if lines is None:
        where = "not applied: it was written for more lines than the finding now points at"
    else:
        where = (
            f"for lines {lines[0]}-{lines[1]}" if lines[0] != lines[1] else f"for line {lines[0]}"
        )
    body = (
        "\n".join(f"    {line}" for line in text.splitlines()) if text else "    (delete the lines)"
    )
    return f"Suggested fix ({where}):\n{body}"


def report_text(review: dict[str, Any], findings: list[dict[str, Any]]) -> str:
    lines: list[str] = []
    shown = [f for f in findings if f["state"] == "open"]
    for finding in shown:
        where = f"{finding['path']}:{finding['start_line']}"
        if finding["end_line"] != finding["start_line"]:
            where += f"-{finding['end_line']}"
        blocking = " (blocking)" if finding["blocking"] else ""
        lines.append(f"{where} {finding['severity']}{blocking} {finding['title']}")
        for text in (finding["body"], finding["evidence"]):
            if text:
                lines.extend(f"    {line}" for line in text.splitlines())
        if finding["suggestion"] is not None:
            fixed = fix_lines(finding)
            if fixed is None:
                header = "suggested fix (written for more lines than shown; not applied):"
            elif fixed != (finding["start_line"], finding["end_line"]):
                header = f"suggested fix (replaces lines {fixed[0]}-{fixed[1]}):"
            else:
                header = "suggested fix:"
            lines.append(f"    {header}")
            lines.extend(f"    | {line}" for line in finding["suggestion"].splitlines() or [""])
        lines.append("")
    closed = [f for f in findings if f["state"] in ("resolved", "outdated")]
    for finding in closed:
        lines.append(
            f"{finding['path']}:{finding['start_line']} {finding['state']}: {finding['title']} ({finding['suppression_reason']})"
        )
    if closed:
        lines.append("")
    hidden = [f for f in findings if f["state"] == "suppressed"]
    for finding in hidden:
        lines.append(
            f"{finding['path']}:{finding['start_line']} suppressed: {finding['title']} ({finding['suppression_reason']})"
        )
    if hidden:
        lines.append("")
    suppressed = len(hidden)
    scope = f"{review['base'][:7]}..{review['head'][:7]}"
    if review["incremental"]:
        scope += f" (only the changes since {review['incremental_since'][:7]})"
    missing = [
        e for e in review.get("coverage") or () if e["status"] == "not reviewed" and e["adds"]
    ]
    not_read = f" ({len(missing)} of them not reviewed, listed below)" if missing else ""
    files = ngettext("%(count)d file", "%(count)d files", len(review["reviewed"])) % {
        "count": len(review["reviewed"])
    }
    open_now = ngettext("%(count)d open finding", "%(count)d open findings", len(shown)) % {
        "count": len(shown)
    }
    lines.append(
        f"Reviewed {scope}: {files}{not_read}, {open_now}"
        + (f", {suppressed} suppressed" if suppressed else "")
        + (f", {len(closed)} resolved or outdated since the last review" if closed else "")
        + "."
    )
    if review.get("reused_from"):
        lines.append(
            f"Nothing changed since run {review['reused_from']}: its engine result was reused."
        )
    if review.get("triage", {}).get("verdict") == "trivial":
        # Triage stops only an engine that costs money; the static engine still reviewed.
        depth = (
            "Not reviewed in depth."
            if review.get("engine") == "triage"
            else ("Reviewed all the same (triage only spares a paid model).")
        )
        lines.append(f"Triage: trivial — {review['triage']['summary']} {depth}")
    for entry in missing:
        lines.append(f"Not reviewed: {entry['path']} ({entry['reason']})")
    for item in review["filtered"]:
        path, reason, rule = _filtered(item)
        lines.append(
            f"Excluded: {path} ({reason}: {rule})" if rule else f"Excluded: {path} ({reason})"
        )
    if review["validation"]:
        lines.append(review["validation"])
    return "\n".join(lines) + "\n"


def _filtered(item: Any) -> tuple[str, str, str]:
    if isinstance(item, dict):
        return item["path"], item["reason"], item.get("rule", "")
    path, reason, *rest = item
    return path, reason, rest[0] if rest else ""


def report_json(
    review: dict[str, Any], findings: list[dict[str, Any]], *, source: Source | None = None
) -> str:
    """The review and every finding (suppressed, resolved and outdated ones too), each
    with `fix`: the whole lines its suggestion replaces and their new text, or null."""
    out = []
    for finding in findings:
        item = {k: finding.get(k) for k in FINDING_KEYS}
        fix = fix_build(finding, source)
        item["fix"] = (
            {"start_line": fix.start_line, "end_line": fix.end_line, "replacement": fix.replacement}
            if fix
            else None
        )
        out.append(item)
    return json.dumps({"review": review, "findings": out}, indent=2, sort_keys=False)


def report_sarif(
    review: dict[str, Any],
    findings: list[dict[str, Any]],
    *,
    version: str,
    source: Source | None = None,
) -> str:
    """SARIF 2.1.0: one run, one result per finding; suppressed findings carry a
    suppression with the reason; resolved and outdated ones are `absent` results.
    Paths are relative URI references against `SRCROOT` (the repository root)."""
    rules: dict[str, dict[str, Any]] = {}
    results = []
    for finding in findings:
        rule_id = finding.get("rule") or f"tasuku/{finding['category']}"
        rules.setdefault(
            rule_id,
            {
                "id": rule_id,
                "shortDescription": {"text": finding["title"][:200]},
                "properties": {"category": finding["category"]},
            },
        )
        fix = fix_build(finding, source)
        message = finding["title"] + (f"\n\n{finding['body']}" if finding["body"] else "")
        if finding["suggestion"] is not None and fix is None:
            message += "\n\n" + _fix_text(finding)
        location = {"uri": artifact_uri(finding["path"]), "uriBaseId": URI_BASE}
        result: dict[str, Any] = {
            "ruleId": rule_id,
            "level": SARIF_LEVELS.get(finding["severity"], "warning"),
            "message": {"text": message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": location,
                        "region": {
                            "startLine": finding["start_line"],
                            "endLine": finding["end_line"],
                        },
                    }
                }
            ],
            "partialFingerprints": {"tasuku/v1": finding["fingerprint"]},
            "properties": {
                "severity": finding["severity"],
                "blocking": finding["blocking"],
                "confidence": finding["confidence"],
                "state": finding["state"],
            },
        }
        if finding["state"] == "suppressed":
            result["suppressions"] = [
                {"kind": "external", "justification": finding["suppression_reason"]}
            ]
        if finding["state"] in ("resolved", "outdated"):
            result["baselineState"] = "absent"
        elif review["incremental"] or finding.get("first_seen_sha"):
            result["baselineState"] = (
                "unchanged" if finding.get("first_seen_sha") not in ("", review["head"]) else "new"
            )
        if fix is not None:
            where = (
                f"line {fix.start_line}"
                if fix.start_line == fix.end_line
                else (f"lines {fix.start_line}-{fix.end_line}")
            )
            result["fixes"] = [
                {
                    "description": {"text": f"Suggested fix: replaces {where}"},
                    "artifactChanges": [
                        {
                            "artifactLocation": dict(location),
                            "replacements": [
                                {
                                    "deletedRegion": fix.region,
                                    "insertedContent": {"text": fix.inserted},
                                }
                            ],
                        }
                    ],
                }
            ]
        results.append(result)
    log: dict[str, Any] = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "Tasuku",
                        "version": version,
                        "rules": list(rules.values()),
                    }
                },
                "versionControlProvenance": [
                    {
                        "repositoryUri": review["repository_uri"],
                        "revisionId": review["head"],
                        "mappedTo": {"uriBaseId": URI_BASE},
                    }
                ],
                "columnKind": "unicodeCodePoints",
                "results": results,
                # A file the review did not look at is said, not left to look clean.
                "invocations": [
                    {
                        "executionSuccessful": True,
                        "toolExecutionNotifications": [
                            {
                                "level": "warning",
                                "message": {"text": f"Not reviewed: {e['reason']}"},
                                "locations": [
                                    {
                                        "physicalLocation": {
                                            "artifactLocation": {
                                                "uri": artifact_uri(e["path"]),
                                                "uriBaseId": URI_BASE,
                                            }
                                        }
                                    }
                                ],
                            }  # fmt: skip
                            for e in review.get("coverage") or ()
                            if e["status"] == "not reviewed" and e["adds"]
                        ],
                    }
                ],
                "properties": {
                    "base": review["base"],
                    "incremental": review["incremental"],
                    "coverage": review.get("coverage") or [],
                    "filtered": [
                        dict(zip(("path", "reason", "rule"), _filtered(item), strict=True))
                        for item in review["filtered"]
                    ],
                },
            }
        ],
    }
    if review.get("root_uri"):
        log["runs"][0]["originalUriBaseIds"] = {URI_BASE: {"uri": review["root_uri"]}}
    return json.dumps(log, indent=2)


def fails(findings: list[dict[str, Any]], threshold: Severity | None) -> bool:
    """Whether an open finding reaches `threshold`."""
    if threshold is None:
        return False
    return any(
        f["state"] == "open" and Severity(f["severity"]).at_least(threshold) for f in findings
    )

"""A review as a report: plain text, JSON, or SARIF 2.1.0 (`manage.py review`).

Pure: plain data in (the review's summary and its findings as dictionaries), text out.
"""

from __future__ import annotations

import json
from typing import Any

from sandbox.contract import Severity

FINDING_KEYS = (
    "path", "start_line", "end_line", "side", "severity", "category", "title", "body", "evidence",
    "suggestion", "confidence", "blocking", "fingerprint", "state", "suppression_reason",
)  # fmt: skip
SARIF_LEVELS = {
    "critical": "error",
    "high": "error",
    "medium": "warning",
    "low": "note",
    "info": "note",
}
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


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
            lines.append("    suggested fix:")
            lines.extend(f"    | {line}" for line in finding["suggestion"].splitlines() or [""])
        lines.append("")
    closed = [f for f in findings if f["state"] in ("resolved", "outdated")]
    for finding in closed:
        lines.append(
            f"{finding['path']}:{finding['start_line']} {finding['state']}: {finding['title']} ({finding['suppression_reason']})"
        )
    if closed:
        lines.append("")
    suppressed = sum(1 for f in findings if f["state"] == "suppressed")
    scope = f"{review['base'][:7]}..{review['head'][:7]}"
    if review["incremental"]:
        scope += f" (only the changes since {review['incremental_since'][:7]})"
    lines.append(f"Reviewed {scope}: {len(review['reviewed'])} files, {len(shown)} open findings"
                 + (f", {suppressed} suppressed" if suppressed else "")
                 + (f", {len(closed)} resolved or outdated since the last review" if closed else "")
                 + ".")  # fmt: skip
    if review.get("triage", {}).get("verdict") == "trivial":
        lines.append(f"Triage: trivial — {review['triage']['summary']} Not reviewed in depth.")
    for path, reason in review["filtered"]:
        lines.append(f"Not reviewed: {path} ({reason})")
    if review["validation"]:
        lines.append(review["validation"])
    return "\n".join(lines) + "\n"


def report_json(review: dict[str, Any], findings: list[dict[str, Any]]) -> str:
    return json.dumps(
        {"review": review, "findings": [{k: f[k] for k in FINDING_KEYS} for f in findings]},
        indent=2,
        sort_keys=False,
    )


def report_sarif(review: dict[str, Any], findings: list[dict[str, Any]], *, version: str) -> str:
    """SARIF 2.1.0: one run, one result per finding; suppressed findings carry a
    suppression with the reason; resolved and outdated ones are `absent` results."""
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
        result: dict[str, Any] = {
            "ruleId": rule_id,
            "level": SARIF_LEVELS.get(finding["severity"], "warning"),
            "message": {
                "text": finding["title"] + (f"\n\n{finding['body']}" if finding["body"] else "")
            },
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": finding["path"]},
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
        if (
            finding["suggestion"] is not None
            and finding["state"] == "open"
            and finding["side"] == "RIGHT"
        ):
            result["fixes"] = [
                {
                    "description": {"text": "Suggested fix"},
                    "artifactChanges": [
                        {
                            "artifactLocation": {"uri": finding["path"]},
                            "replacements": [
                                {
                                    "deletedRegion": {
                                        "startLine": finding["start_line"],
                                        "endLine": finding["end_line"],
                                    },
                                    "insertedContent": {"text": finding["suggestion"] + "\n"},
                                }
                            ],
                        }
                    ],
                }
            ]
        results.append(result)
    log = {
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
                    {"repositoryUri": review["repository_uri"], "revisionId": review["head"]}
                ],
                "results": results,
                "properties": {"base": review["base"], "incremental": review["incremental"]},
            }
        ],
    }
    return json.dumps(log, indent=2)


def fails(findings: list[dict[str, Any]], threshold: Severity | None) -> bool:
    """Whether an open finding reaches `threshold`."""
    if threshold is None:
        return False
    return any(
        f["state"] == "open" and Severity(f["severity"]).at_least(threshold) for f in findings
    )

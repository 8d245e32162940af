"""Shell: shellcheck. A fix shellcheck offers on one line becomes the suggestion."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from sandbox.contract import Finding, Severity
from sandbox.engines.static.common import Skipped, Target, argument, finding, quote_line
from sandbox.engines.static.tools import tool

LEVELS = {
    "error": Severity.HIGH,
    "warning": Severity.MEDIUM,
    "info": Severity.LOW,
    "style": Severity.INFO,
}
EXPLAIN = {
    2086: "Unquoted, the variable's value is split on whitespace and expanded as a glob: a value with a space or `*` turns into several arguments or into file names.",
    2115: "If the variable is empty, the path collapses to `/…`: the command acts on the root of the file system.",
    2046: "Unquoted, the command's output is split on whitespace and glob-expanded before it is used.",
    2164: "If `cd` fails the script carries on in the wrong directory, and later commands act on the wrong files.",
    2155: "Declaring and assigning at once hides the exit status of the command: a failure goes unnoticed.",
    2068: "Unquoted, `$@` splits arguments that contain spaces into several.",
}  # fmt: skip
SHELLS = ("sh", "bash", "dash", "ksh")


def _is_shell(target: Target) -> bool:
    if target.path.endswith((".sh", ".bash", ".ksh")):
        return True
    if "." in Path(target.path).name or not target.lines:
        return False
    first = target.lines[0]
    return first.startswith("#!") and any(
        first.rstrip().endswith(s) or f"/{s} " in first for s in SHELLS
    )


def _suggestion(target: Target, line: int, fix: dict | None) -> str | None:
    if not fix:
        return None
    replacements = fix.get("replacements") or []
    if not replacements or any(r["line"] != line or r["endLine"] != line for r in replacements):
        return None
    text = target.lines[line - 1]
    ordered = sorted(
        replacements, key=lambda r: (r["column"], r.get("precedence", 0)), reverse=True
    )
    for r in ordered:
        begin, finish = r["column"] - 1, r["endColumn"] - 1
        text = text[:begin] + r["replacement"] + text[finish:]
    return text


def check(root: Path, files: list[Target]) -> tuple[list[Finding], str, list[Skipped]]:
    scripts = {t.path: t for t in files if _is_shell(t)}
    if not scripts:
        return [], "", []
    # As `./name`, after `--`: a script named `--severity=error.sh` or `-` is a file.
    by_argument = {argument(path): target for path, target in scripts.items()}
    command = [tool("shellcheck"), "--format", "json1", "--norc", "--", *sorted(by_argument)]
    completed = subprocess.run(command, cwd=root, capture_output=True, check=False, timeout=300)  # noqa: S603
    if completed.returncode not in (0, 1):
        raise RuntimeError(
            f"shellcheck failed ({completed.returncode}): "
            + completed.stderr.decode(errors="replace").strip()[:500]
        )
    findings = []
    for item in json.loads(completed.stdout or b"{}").get("comments", []):
        target = by_argument.get(item["file"])
        if target is None or not target.touches(item["line"], item["endLine"]):
            continue
        code = item["code"]
        severity = LEVELS.get(item["level"], Severity.LOW)
        explanation = EXPLAIN.get(code)
        body = explanation or item["message"]
        body += f"\n\nRule: [SC{code}](https://www.shellcheck.net/wiki/SC{code})"
        line = item["line"]
        suggestion = _suggestion(target, line, item.get("fix")) if item["endLine"] == line else None
        findings.append(
            finding(
                target=target,
                start=line,
                end=item["endLine"],
                severity=severity,
                category="bug" if severity.at_least(Severity.MEDIUM) else "robustness",
                title=item["message"],
                body=body,
                evidence=f"shellcheck SC{code} ({item['level']}) at {target.path}:{line}: `{quote_line(target, line)}`",
                rule=f"shellcheck:SC{code}",
                suggestion=suggestion,
            )  # fmt: skip
        )
    version = subprocess.run(
        [tool("shellcheck"), "--version"], capture_output=True, text=True, check=False
    ).stdout  # noqa: S603
    version_line = next((v for v in version.splitlines() if v.startswith("version:")), "version: ?")
    return findings, "shellcheck " + version_line.split(":", 1)[1].strip(), []

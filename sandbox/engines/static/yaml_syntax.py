"""YAML that does not parse: a CI workflow, a Compose file, a Kubernetes manifest or an
application's configuration with a syntax error fails whatever reads it. Parsed the way
every YAML reader starts (PyYAML's composer: syntax only, so a custom tag such as
CloudFormation's `!Ref` or GitLab's `!reference` is fine), and reported on the added line
the parser stopped at. Style (indentation widths, line length, `yes`/`no`) is never said.

A file with template markers (`{{ }}`, `{% %}`: Helm charts, Jinja) is YAML only once
rendered: when it does not parse as it is, it is named as not checked, never reported."""

from __future__ import annotations

from pathlib import Path

import yaml

from sandbox.contract import Finding, Severity
from sandbox.engines.static.common import Skipped, Target, finding, quote_line

EXTENSIONS = (".yml", ".yaml")
TEMPLATE_MARKERS = ("{{", "{%")
TEMPLATED = "templated YAML (Helm or Jinja): its syntax is known only once it is rendered"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def applies(target: Target) -> bool:
    return target.path.lower().endswith(EXTENSIONS)


def check(
    root: Path, files: list[Target], options: object = None
) -> tuple[list[Finding], str, list[Skipped]]:
    targets = [t for t in files if applies(t)]
    if not targets:
        return [], "", []
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    for target in targets:
        try:
            for _ in yaml.compose_all(target.text, Loader=_LOADER):
                pass
        except yaml.MarkedYAMLError as exc:
            if any(marker in target.text for marker in TEMPLATE_MARKERS):
                skipped.append(Skipped(target.path, TEMPLATED))
                continue
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark is not None else 0
            if line not in target.added:
                continue  # the base's: not this change's to answer for
            findings.append(_finding(target, line, exc))
        except yaml.YAMLError as exc:  # no position: said as not checked, never guessed
            skipped.append(Skipped(target.path, f"the YAML parser stopped: {exc}"[:300]))
    return findings, f"PyYAML {yaml.__version__}", skipped


def _finding(target: Target, line: int, exc: yaml.MarkedYAMLError) -> Finding:
    problem = (exc.problem or "a syntax error").strip()
    context = (exc.context or "").strip()
    said = f"{context}: {problem}" if context else problem
    return finding(
        target=target,
        start=line,
        severity=Severity.HIGH,
        category="bug",
        title=f"This YAML does not parse: {problem}",
        body=(
            f"The YAML parser stops at line {line} ({said}), so whatever reads "
            f"`{target.path}` — a CI runner, Compose, Kubernetes, the application — fails "
            "to load it."
        ),
        evidence=quote_line(target, line),
        rule="yaml:syntax",
    )

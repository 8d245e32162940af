"""Dockerfiles: hadolint, with a short list of its rules chosen for precision.

hadolint runs with a configuration of Tasuku's (never one the pull request could add);
the base branch's `.hadolint.yaml` may turn a rule off. Its `# hadolint ignore=` comments
are ignored for the run, and a diagnostic only such a comment hid is reported with it (the
validation gate decides whether it counts). Pinning every package's version, and most of
the shell checks hadolint runs inside `RUN`, are a team's taste, and off by default.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from sandbox.contract import Finding, Severity, StaticOptions, Suppression
from sandbox.engines.static.common import (
    Skipped,
    Target,
    argument,
    finding,
    parsed_json,
    quote_line,
    run_checker,
    shown,
    utf8_copies,
    version_of,
)
from sandbox.engines.static.config import RepositoryWord
from sandbox.engines.static.languages import dockerfile_name
from sandbox.engines.static.tools import tool

H, M, L = Severity.HIGH, Severity.MEDIUM, Severity.LOW
# rule -> (severity, category, what goes wrong); docs/reviewers.md says why each is here.
RULES: dict[str, tuple[Severity, str, str]] = {
    "DL3000": (M, "bug", "A relative WORKDIR depends on the one before it: the files land somewhere else when the base image's changes."),
    "DL3002": (L, "security", "The container's process runs as root: anything that breaks out of it has root's rights."),
    "DL3004": (M, "bug", "`sudo` in a build: there is no terminal and usually no sudo, and the build already runs as the current USER."),
    "DL3006": (L, "reliability", "Without a tag the image is whatever `latest` is on the day of the build: two builds of one commit can differ."),
    "DL3007": (L, "reliability", "`latest` changes under the build: two builds of one commit can differ."),
    "DL3011": (M, "bug", "The port is outside 0-65535: the image cannot expose it."),
    "DL3012": (M, "bug", "Only the last HEALTHCHECK of a stage counts: the others are silently ignored."),
    "DL3021": (M, "bug", "COPY with several sources needs a destination ending in `/`: the build fails."),
    "DL3022": (M, "bug", "`COPY --from` names no earlier stage: Docker pulls an image of that name instead."),
    "DL3023": (M, "bug", "`COPY --from` names the stage it is in: the build fails."),
    "DL3024": (M, "bug", "Two stages have the same name: `--from` can reach only one of them."),
    "DL3025": (L, "reliability", "In shell form the command runs under `/bin/sh -c`: it does not get SIGTERM, so the container is killed after the stop timeout."),
    "DL3043": (M, "bug", "ONBUILD may not trigger ONBUILD, FROM or MAINTAINER: the child image's build fails."),
    "DL3044": (M, "bug", "An ENV that refers to a variable it sets in the same instruction reads the old value."),
    "DL3061": (M, "bug", "An instruction before the first FROM (other than ARG): the build fails."),
    "DL4003": (M, "bug", "Only the last CMD counts: the earlier ones are silently ignored."),
    "DL4004": (M, "bug", "Only the last ENTRYPOINT counts: the earlier ones are silently ignored."),
}  # fmt: skip
# `HEALTHCHECK … CMD x` in shell form: DL3025 is about the signal the main process gets
# when the container stops, which a health probe's command never is.
HEALTHCHECK = re.compile(r"^\s*HEALTHCHECK\b", re.IGNORECASE)
# Rules a policy may ask for by code, with what they say. DL4006 (a pipe without
# `pipefail`) is sound advice, but measured on real Dockerfiles it was the docker-library
# idiom every time (`… | xargs -r apt-mark manual`, where nothing is lost): noise.
OPT_IN: dict[str, tuple[Severity, str, str]] = {
    "DL4006": (L, "reliability", "Without `set -o pipefail` a pipe succeeds when its last command does: a failed download piped into a shell goes unnoticed."),
}  # fmt: skip
PRAGMA = re.compile(r"#\s*hadolint\s+(global\s+)?ignore=([\w,\s-]+)")


def applies(target: Target) -> bool:
    """Whether hadolint reads this file: `Dockerfile`, `Dockerfile.prod`,
    `Dockerfile-alpine.template`, `x.dockerfile`, `Containerfile`."""
    return dockerfile_name(target.path)


def check(
    root: Path, files: list[Target], options: StaticOptions | None = None
) -> tuple[list[Finding], str, list[Skipped]]:
    dockerfiles = sorted((t for t in files if applies(t)), key=lambda t: t.path)
    if not dockerfiles:
        return [], "", []
    options = options or StaticOptions()
    word = RepositoryWord(options.configs)
    turned_off = {r for r in options.ignore if r.startswith("DL")}
    asked = {r for r in options.select if r.startswith("DL")}
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    with tempfile.TemporaryDirectory(prefix="tasuku-hadolint-") as scratch:
        config = Path(scratch) / "hadolint.yaml"
        config.write_text("{}\n")
        for target in dockerfiles:
            items, obeyed = _run_one(root, target, config)
            if items is None:
                skipped.append(
                    Skipped(target.path, "hadolint could not parse it, so its rules did not run")
                )
                continue
            off = turned_off | word.hadolint_ignored(target.path)
            for item in items:
                code = str(item.get("code", ""))
                if code in off or (code not in RULES and code not in asked):
                    continue
                line = int(item.get("line") or 1)
                end = _instruction_end(target, line)
                if not target.touches(line, end):
                    continue
                if code == "DL3025" and HEALTHCHECK.match(quote_line(target, line)):
                    continue  # a probe's command is never sent the stop signal
                severity, category, explanation = RULES.get(code) or OPT_IN.get(
                    code, (L, "maintainability", "")
                )
                message = str(item.get("message", "")).strip()
                url = (
                    f"https://github.com/hadolint/hadolint/wiki/{code}"
                    if code.startswith("DL")
                    else f"https://www.shellcheck.net/wiki/{code}"
                )
                findings.append(
                    finding(
                        target=target,
                        start=line,
                        end=end,
                        severity=severity,
                        category=category,
                        title=message[:200],
                        body=(explanation or message) + f"\n\nRule: [{code}]({url})",
                        evidence=f"hadolint {code} at {target.path}:{line}: `{quote_line(target, line)}`",
                        rule=f"hadolint:{code}",
                        suppressed_by=(
                            None if _key(item) in obeyed else _pragma(target, line, code)
                        ),
                    )
                )
    version = version_of("hadolint", tool("hadolint"), root).strip()
    return findings, version.replace("Haskell Dockerfile Linter", "hadolint").strip(), skipped


def _run_one(root: Path, target: Target, config: Path) -> tuple[list[dict] | None, set[tuple]]:
    """hadolint's diagnostics on one Dockerfile with its ignore comments disregarded
    (None: it does not parse), and the keys of those it reports with them obeyed."""
    if target.utf8:
        every = _run(root, target.path, config, pragmas=False)
        obeyed = (
            _run(root, target.path, config, pragmas=True) if "hadolint" in target.text else every
        )
    else:
        with utf8_copies([target]) as copy:
            every = _run(copy, target.path, config, pragmas=False)
            obeyed = every if "hadolint" not in target.text else _run(
                copy, target.path, config, pragmas=True
            )  # fmt: skip
    if every is None:
        return None, set()
    return every, {_key(item) for item in obeyed or []}


def _run(root: Path, path: str, config: Path, *, pragmas: bool) -> list[dict] | None:
    command = [tool("hadolint"), "--config", str(config), "--format", "json", "--no-fail",
               "--no-color"]  # fmt: skip
    if not pragmas:
        command.append("--disable-ignore-pragma")
    command += ["--", argument(path)]
    on = shown(path)
    completed = run_checker("hadolint", command, cwd=root, on=on)
    items = parsed_json("hadolint", completed.stdout, on, "[]")
    if not isinstance(items, list) or any(item.get("code") == "DL1000" for item in items):
        return None  # DL1000: it does not parse, and nothing else was checked
    return items


def _key(item: dict) -> tuple:
    return (item.get("code"), item.get("line"), item.get("column"))


def _instruction_end(target: Target, line: int) -> int:
    """The last line of the instruction that starts at `line` (continued with `\\`)."""
    end = line
    while end <= len(target.lines) and target.lines[end - 1].rstrip().endswith("\\"):
        end += 1
    return min(end, max(len(target.lines), line))


def _pragma(target: Target, line: int, code: str) -> Suppression | None:
    """The ignore comment that hid `code` at `line`: one in the comments just above the
    instruction, or a `global` one anywhere."""
    number = line - 1
    while number >= 1 and target.lines[number - 1].lstrip().startswith("#"):
        found = PRAGMA.search(target.lines[number - 1])
        if found and not found.group(1) and code in _codes(found.group(2)):
            return Suppression(pragma=found.group(0).strip()[:300], line=number, scope="next")
        number -= 1
    for number, text in enumerate(target.lines, start=1):
        found = PRAGMA.search(text)
        if found and found.group(1) and code in _codes(found.group(2)):
            return Suppression(pragma=found.group(0).strip()[:300], line=number, scope="file")
    return None


def _codes(text: str) -> set[str]:
    return {w.strip() for w in text.split(",") if w.strip()}

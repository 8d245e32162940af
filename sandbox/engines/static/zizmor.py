"""GitHub Actions workflows and actions: zizmor, offline, with its audits chosen for
precision.

zizmor runs with Tasuku's configuration (never one the pull request could add): third-
party actions must be pinned to a commit, GitHub's own (`actions/*`, `github/*`) to a
tag at least. The base branch's `zizmor.yml` may turn an audit off. zizmor's `# zizmor:
ignore[…]` comments are disregarded for the run, and a diagnostic only such a comment hid
is reported with it (the validation gate decides whether it counts). Audits that need
the network (known-vulnerable actions, impostor commits) do not run.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path, PurePosixPath

from sandbox.contract import Finding, Severity, StaticOptions, Suppression
from sandbox.engines.static.common import (
    CheckerFailed,
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
from sandbox.engines.static.tools import tool

H, M, L = Severity.HIGH, Severity.MEDIUM, Severity.LOW
# audit -> (severity, category, what goes wrong); docs/reviewers.md says why each is here.
AUDITS: dict[str, tuple[Severity, str, str]] = {
    "template-injection": (H, "security", "`${{ … }}` is pasted into the script before it runs: text an outsider controls (a title, a branch name, a comment) becomes shell code with the workflow's token. Pass it through `env:` and quote the variable."),
    "dangerous-triggers": (M, "security", "`pull_request_target` and `workflow_run` run with the base repository's secrets and a write token on events a fork can cause: checking out or running the fork's code there hands it both."),
    "unpinned-uses": (M, "security", "A tag or branch can be moved by whoever controls the action: the workflow then runs their new code with its token and secrets. Pin a commit SHA (a comment can keep the version)."),
    "excessive-permissions": (M, "security", "`write-all` gives every step a token that can push code, cut releases and change settings: a compromised step or action gets all of that."),
    "insecure-commands": (H, "security", "`ACTIONS_ALLOW_UNSECURE_COMMANDS` lets anything printed to the log set environment variables and paths: output an attacker influences can run code."),
    "github-env": (H, "security", "Text written to `GITHUB_ENV`/`GITHUB_PATH` in a workflow an outsider can trigger can set variables such as `LD_PRELOAD` for every later step."),
    "cache-poisoning": (M, "security", "A release or publishing workflow restores a cache that other, less trusted workflows can write: a poisoned cache ends up in the artifact."),
    "hardcoded-container-credentials": (H, "secret", "A registry password is written into the workflow: everyone with read access has it."),
    "overprovisioned-secrets": (M, "security", "`toJSON(secrets)` or `secrets[…]` hands the step every secret of the repository, not the one it needs."),
    "unredacted-secrets": (M, "security", "A secret parsed as JSON: its fields are not masked in the log."),
    "unsound-contains": (M, "bug", "`contains()` on a string tests for a substring: an attacker-chosen ref such as `refs/heads/ma` passes the check."),
    "unsound-condition": (M, "bug", "A multi-line `if:` with `${{ }}` inside is a non-empty string: it is always true."),
    "bot-conditions": (M, "security", "`github.actor == 'dependabot[bot]'` can be true for a pull request a person opened: the check does not say who wrote the code."),
}  # fmt: skip
CONFIDENT = ("High", "Medium")
# Contexts an outsider writes: an event's fields (a title, a body, a branch name, a
# commit message) and the head branch's name.
# `github.event.inputs.*` is a manual run's inputs (`workflow_dispatch`): typed by someone
# with write access, a caller's input like `inputs.*`, not an outsider's text.
OUTSIDER = re.compile(r"\bgithub\.(?:event\.(?!inputs\.)|head_ref\b)")
# The repository's own names: the base branch a pull request targets (`github.base_ref`,
# `github.event.pull_request.base.*`) and the repository's name and settings
# (`github.event.repository.*`) — chosen by someone with write access, as a manual run's
# inputs are; a pull request from a fork cannot name a base branch that does not exist.
OWN = re.compile(
    r"\bgithub\.(?:base_ref\b|event\.(?:pull_request\.base|repository)\b)[\w.*\[\]'\"-]*"
)
EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}")
INPUT_INJECTION = (
    "`${{ … }}` is pasted into the script before it runs, and the value comes from the "
    "workflow's caller, an input or an earlier step: if it can ever carry text an outsider "
    "wrote, that text becomes shell code. Pass it through `env:` and quote the variable."
)
OWN_INJECTION = (
    "`${{ … }}` is pasted into the script before it runs, and the value is the repository's "
    "own (the base branch's name, the repository's name or settings), chosen by someone with "
    "write access: a branch name can still hold `$(…)`, which becomes shell code. Pass it "
    "through `env:` and quote the variable."
)
POLICY = (
    "rules:\n"
    "  unpinned-uses:\n"
    "    config:\n"
    "      policies:\n"
    '        "actions/*": ref-pin\n'
    '        "github/*": ref-pin\n'
    '        "*": hash-pin\n'
)
IGNORE_COMMENT = re.compile(r"#\s*zizmor:\s*ignore\[([^\]]*)\]")
# Exit codes: 0 no findings, 10-14 findings by their worst severity.
OK_CODES = (0, 10, 11, 12, 13, 14)
NOTHING_READ = 3  # among other failures: "no inputs collected" (none could be read)


def applies(target: Target) -> bool:
    """Whether zizmor reads this file: a workflow (`.github/workflows/*.yml`) or an
    action's definition (`action.yml`)."""
    path = target.path
    name = PurePosixPath(path).name.lower()
    if path.startswith(".github/workflows/") and name.endswith((".yml", ".yaml")):
        return "/" not in path.removeprefix(".github/workflows/")
    return name in ("action.yml", "action.yaml")


def check(
    root: Path, files: list[Target], options: StaticOptions | None = None
) -> tuple[list[Finding], str, list[Skipped]]:
    workflows = sorted((t for t in files if applies(t)), key=lambda t: t.path)
    if not workflows:
        return [], "", []
    options = options or StaticOptions()
    word = RepositoryWord(options.configs)
    turned_off = {r.removeprefix("zizmor:") for r in options.ignore if r.startswith("zizmor:")}
    asked = {r.removeprefix("zizmor:") for r in options.select if r.startswith("zizmor:")}
    by_path = {t.path: t for t in workflows}
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    with tempfile.TemporaryDirectory(prefix="tasuku-zizmor-") as scratch:
        config = Path(scratch) / "zizmor.yml"
        config.write_text(POLICY)
        plain = [t for t in workflows if t.utf8]
        results = _run(root, [t.path for t in plain], config, ignores=False)
        commented = [t for t in plain if "zizmor" in t.text]
        obeyed = {_key(r) for r in _run(root, [t.path for t in commented], config, ignores=True)}
        hidden = {_key(r) for r in results if r[0] in {t.path for t in commented}} - obeyed
        others = [t for t in workflows if not t.utf8]
        if others:
            with utf8_copies(others) as copy:
                results += _run(copy, [t.path for t in others], config, ignores=False)
        read = {path for path, _ in results}
        for target in plain:
            if target.path not in read and _unreadable(root, target, config):
                skipped.append(Skipped(target.path, "zizmor could not read it as a workflow"))
    for path, item in results:
        target = by_path.get(path)
        if target is None:
            continue
        ident = str(item.get("ident", ""))
        determinations = item.get("determinations") or {}
        if ident == "syntax-error":
            continue
        if ident in turned_off or (ident not in AUDITS and ident not in asked):
            continue
        if ident not in asked and determinations.get("confidence") not in CONFIDENT:
            continue
        pedantic = determinations.get("persona") not in (None, "Regular")
        if pedantic and ident not in asked and ident != "excessive-permissions":
            continue  # zizmor's "code smell" persona: its taste, not a risk it is sure of
        where = _primary(item)
        if where is None:
            continue
        start, end, annotation = where
        if (
            ident == "excessive-permissions"
            and ident not in asked
            and "write-all" not in annotation
        ):
            continue  # "no permissions block" is a team's call; write-all is not
        if not target.touches(start, end) or word.zizmor_disabled(path, ident, start):
            continue
        if ident == "unpinned-uses" and _was_unpinned(target, start):
            continue  # a version bump of an action the base already used by a tag
        severity, category, explanation = AUDITS.get(ident, (L, "security", ""))
        if ident == "template-injection" and _only_booleans(target, start, end):
            continue  # `${{ startsWith(…) }}`, `${{ a == b }}`: `true` or `false`, nothing else
        source = _source(target, start, end) if ident == "template-injection" else ""
        if source in ("caller", "own"):
            # `inputs.*`, `steps.*`, `env.*`: what a caller or an earlier step passes; the
            # base branch's name. A hardening worth saying, not a hole to block on.
            severity = M
            explanation = INPUT_INJECTION if source == "caller" else OWN_INJECTION
        title = f"{str(item.get('desc', ident)).capitalize()}: {annotation}".strip(": ")
        url = item.get("url") or f"https://docs.zizmor.sh/audits/#{ident}"
        findings.append(
            finding(
                target=target,
                start=start,
                end=end,
                severity=severity,
                category=category,
                title=title[:200],
                body=(explanation or title) + f"\n\nRule: [{ident}]({url})",
                evidence=f"zizmor {ident} at {path}:{start}: `{quote_line(target, start)}`",
                rule=f"zizmor:{ident}",
                suppressed_by=_comment(target, start, end, ident)
                if _key((path, item)) in hidden
                else None,
            )
        )
    version = version_of("zizmor", tool("zizmor"), root).strip()
    return findings, version or "zizmor", skipped


# `uses: owner/repo[/path]@ref` on a line (the diff's removed side names the same way).
USES = re.compile(r"""^\s*(?:-\s+)?uses:\s*["']?([A-Za-z0-9_.-]+/[^@\s"']+)@""")


def _was_unpinned(target: Target, line: int) -> bool:
    """Whether the action on `line` is one a line the change removed from this file
    already used by a tag or a branch (`ChangedFile.removed`: `uses:owner/repo`): the
    change moves it to another version, and its being unpinned is the base's. An action
    the change adds, or one the base had pinned to a commit, is the change's."""
    used = USES.match(quote_line(target, line))
    return bool(used) and any(name == f"uses:{used.group(1)}" for name, _, _ in target.removed)


def _run(root: Path, paths: list[str], config: Path, *, ignores: bool) -> list[tuple[str, dict]]:
    if not paths:
        return []
    command = [
        tool("zizmor"), "--offline", "--no-progress", "--format", "json", "--color", "never",
        "--config", str(config), "--persona", "pedantic", "--collect", "all",
    ]  # fmt: skip
    if not ignores:
        command.append("--no-ignores")
    command += ["--", *(argument(p) for p in sorted(paths))]
    on = shown(paths[0]) if len(paths) == 1 else f"{len(paths)} files"
    completed = run_checker("zizmor", command, cwd=root, on=on, ok=(*OK_CODES, NOTHING_READ))
    if completed.returncode == NOTHING_READ:
        if b"no inputs collected" not in completed.stderr:
            tail = completed.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
            raise CheckerFailed(f"zizmor failed on {on} (exit 3: {tail[0][:300]})")
        return []  # none of them is a workflow zizmor can read: each is named by the caller
    found = []
    for item in parsed_json("zizmor", completed.stdout, on, "[]"):
        for location in item.get("locations") or []:
            symbolic = location.get("symbolic") or {}
            if symbolic.get("kind") == "Primary":
                local = (symbolic.get("key") or {}).get("Local") or {}
                name = str(local.get("verbatim_path") or local.get("given_path") or "")
                found.append((name.removeprefix("./"), item))
                break
    return found


def _primary(item: dict) -> tuple[int, int, str] | None:
    """(first line, last line, what zizmor says there) of the finding's primary place."""
    for location in item.get("locations") or []:
        symbolic = location.get("symbolic") or {}
        if symbolic.get("kind") != "Primary":
            continue
        concrete = (location.get("concrete") or {}).get("location") or {}
        start = (concrete.get("start_point") or {}).get("row")
        end = (concrete.get("end_point") or {}).get("row", start)
        if start is None:
            return None
        return int(start) + 1, max(int(start), int(end)) + 1, str(symbolic.get("annotation", ""))
    return None


def _key(result: tuple[str, dict]) -> tuple:
    path, item = result
    where = _primary(item)
    return (path, item.get("ident"), where[:2] if where else None)


def _comment(target: Target, start: int, end: int, ident: str) -> Suppression | None:
    """The `# zizmor: ignore[…]` comment on the finding's lines that names its audit."""
    for number in range(start, min(end, len(target.lines)) + 1):
        found = IGNORE_COMMENT.search(target.lines[number - 1])
        if found and ident in {w.strip() for w in found.group(1).split(",")}:
            return Suppression(pragma=found.group(0)[:300], line=number, scope="line")
    return None


BOOLEAN = re.compile(
    r"^\s*(?:!\s*)?(?:(?:startsWith|endsWith|contains|success|failure|always|cancelled)\s*\("
    r"|[^'\"]*(?:==|!=|<=|>=|<|>)[^'\"]*$)"
)


def _only_booleans(target: Target, start: int, end: int) -> bool:
    """Whether every expression on the finding's lines evaluates to `true` or `false` (a
    test function or a comparison): pasted into a script, it can never be code."""
    expressions = [
        e
        for number in range(start, min(end, len(target.lines)) + 1)
        for e in EXPRESSION.findall(target.lines[number - 1])
    ]
    return bool(expressions) and all(BOOLEAN.match(e) for e in expressions)


def _source(target: Target, start: int, end: int) -> str:
    """Who writes what the expressions on the finding's lines read: "outsider" when any
    reads a context an outsider writes, else "own" when any reads the repository's own
    names, else "caller" (an input, an earlier step, the environment)."""
    own = False
    for number in range(start, min(end, len(target.lines)) + 1):
        for expression in EXPRESSION.findall(target.lines[number - 1]):
            if OUTSIDER.search(OWN.sub("", expression)):
                return "outsider"
            own = own or bool(OWN.search(expression))
    return "own" if own else "caller"


def _unreadable(root: Path, target: Target, config: Path) -> bool:
    """Whether a workflow zizmor reported nothing on is one it could not read: YAML that
    does not parse, or not a workflow at all (zizmor only warns of it and goes on; run
    alone and strictly, it fails)."""
    command = [
        tool("zizmor"), "--offline", "--no-progress", "--format", "json", "--color", "never",
        "--config", str(config), "--collect", "all", "--strict-collection", "--",
        argument(target.path),
    ]  # fmt: skip
    try:
        run_checker("zizmor", command, cwd=root, on=shown(target.path), ok=OK_CODES)
    except CheckerFailed:
        return True
    return False

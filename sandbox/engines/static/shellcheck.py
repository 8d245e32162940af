"""Shell: shellcheck. A fix shellcheck offers on one line becomes the suggestion."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from sandbox.contract import Finding, Severity, StaticOptions, Suppression
from sandbox.engines.static.common import (
    MAX_FILE_BYTES,
    CheckerFailed,
    Skipped,
    Target,
    argument,
    finding,
    interpreter,
    parsed_json,
    quote_line,
    run_checker,
    shown,
    version_of,
)
from sandbox.engines.static.config import RepositoryWord
from sandbox.engines.static.tools import tool

# Levels reported only when a policy asks for a rule by its code.
QUIET_LEVELS = ("info", "style")
# Rules reported only when a policy asks, each measured as noise on real pull requests
# (benchmarks/data/static_grades.json): "appears unused" (SC2034) and "referenced but not
# assigned" (SC2154) are wrong wherever another script defines or reads the variable — a
# framework that sources its plugins and themes, a plugin's metadata — which shellcheck
# cannot see; a relative shebang (SC2239) is how sourced modules mark themselves
# (`#! bash oh-my-bash.module`): they are never executed; "expands when defined, not when
# used" (SC2139) is an alias file's intent as often as its mistake (`alias snap="${sudo}snap"`,
# a prefix fixed once, as every alias above it in the file). "Declare and assign
# separately" (SC2155) was never useful in the graded set (2 acceptable, 5 noise): on
# `local x="$(…)"` in a project written that way, or a command that cannot fail.
OPT_IN = frozenset({"SC2034", "SC2139", "SC2154", "SC2155", "SC2239"})
# "No shebang" (SC2148) on a file that is not executable: it is sourced (or run as
# `bash file`), and a shebang there is never read — the fragments an installer sources
# carry none. On an executable file it stands: executed, the file runs in whatever shell
# starts it.
SHEBANG_UNREAD = 2148
# Errors whose harm depends on the command that gets the words: `"text $@"` (SC2145)
# passes several words where one was meant, which `echo` and a `die "…"` helper print the
# same; a bug only where the words are read one by one. Reported, not blocking.
MEDIUM = frozenset({2145})
# `local a= b=1`: an empty value on purpose, in a declaration (never a command run with an
# empty variable in its environment, which is what SC1007 warns of).
# `COMPREPLY=( $(compgen …) )`: bash-completion's own idiom, where splitting on words is
# the point (SC2207 on it was noise in every measured completion script).
COMPLETION = re.compile(r"^\s*COMPREPLY\+?=\(")
DECLARATION = re.compile(r"^\s*(?:local|declare|typeset|export|readonly)\b")
# bats runs each test in a subshell and sets `$status`, `$output` and `$lines`: what
# shellcheck says of variables lost in a subshell, or never assigned, is bats' design.
# A function a test calls before the file defines it (SC2218) is defined by then: bats
# loads the whole file before it runs a test.
BATS_BY_DESIGN = frozenset({"SC2030", "SC2031", "SC2034", "SC2154", "SC2218"})
# shellcheck's dataflow analysis (on by default since 0.10) is off unless a policy asks
# for SC2086, whose false positives it removes (a variable it proves holds a number).
# Measured on 1,097 scripts of eight public repositories: with it, 151 more warnings —
# 148 SC2218 in .bats files (noise, above), 3 others (SC2318–SC2320) — for about three
# times the CPU, and on the largest scripts 35 s and 3 to 5 GB each (nvm.sh, acme.sh)
# where it takes 2 s and 100 MB without.
DATAFLOW_FOR = "SC2086"
PORTABILITY = 3000  # SC3000–SC3999: "In POSIX sh, … is undefined"

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
SHELLS = {"sh", "bash", "dash", "ksh", "mksh", "ash", "busybox", "bats"}
DIALECTS = {"sh", "bash", "dash", "ksh", "busybox"}  # what `shellcheck --shell` accepts
# `# shellcheck shell=bash` at a script's top: shellcheck reads it in place of a `#!`.
SHELL_DIRECTIVE = re.compile(
    r"^\s*#\s*shellcheck\s+(?:\S+\s+)*shell=(?:sh|bash|dash|ksh|busybox)\b", re.MULTILINE
)
EXTENSIONS = (".sh", ".bash", ".ksh", ".dash", ".bats")
# Git hooks kept in the repository (husky's `.husky/pre-commit`, a `.githooks/` folder
# named by core.hooksPath) are shell scripts whatever their first line: husky runs its
# hooks with `sh -e`, and most have no `#!`. Without one, shellcheck reads them as sh.
HOOK_FOLDERS = frozenset({".husky", ".githooks", ".git-hooks"})
GIT_HOOKS = frozenset({
    "applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit",
    "prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout",
    "post-merge", "pre-push", "pre-auto-gc", "post-rewrite", "push-to-checkout",
})  # fmt: skip
MAX_SOURCED = 200  # files followed through `source` per script, before giving up on -x
# `source x`, `. x`, and the directives that name a file or folder to read.
SOURCE = re.compile(r"(?:^|[\s;&|(`{])(?:source|\.)[ \t]+(['\"]?)([^\s;&|)'\"`]+)\1")
DIRECTIVE = re.compile(r"#\s*shellcheck\s.*?\bsource(?:-path)?=(\S+)")


def _is_shell(target: Target) -> bool:
    """A shell script by its extension, its `#!` line or a `# shellcheck shell=`
    directive at its top, whatever else its name has (`install.nvm.sh`, `my.script`
    with `#!/bin/bash`)."""
    if target.path.lower().endswith(EXTENSIONS) or _unmarked_hook(target):
        return True
    return interpreter(target) in SHELLS or bool(SHELL_DIRECTIVE.search(_top(target)))


def _top(target: Target) -> str:
    return "\n".join(target.lines[:10])


def _dialect(target: Target) -> str | None:
    """The shell to name to shellcheck where it cannot read one from the file: an
    unmarked git hook (sh), a script started through a launcher it does not know
    (`#!/usr/bin/with-contenv bash`: "This shebang was unrecognized")."""
    if SHELL_DIRECTIVE.search(_top(target)):
        return None  # shellcheck reads the directive itself
    if _unmarked_hook(target):
        return "sh"
    first = target.lines[0] if target.lines else ""
    words = first[2:].split() if first.startswith("#!") else []
    program = interpreter(target)
    if words and Path(words[0]).name not in {"env", *SHELLS} and program in DIALECTS:
        return program
    return None


def _unmarked_hook(target: Target) -> bool:
    """A git hook in a hooks folder with no `#!` line and no `shell=` directive: sh."""
    folder, _, name = target.path.rpartition("/")
    return (
        name in GIT_HOOKS
        and folder.rpartition("/")[2] in HOOK_FOLDERS
        and not (target.lines and target.lines[0].startswith("#!"))
        and "shellcheck shell=" not in target.text
    )


def _inside(root: Path, candidate: Path) -> bool | None:
    """Whether `candidate` is a regular file inside `root` reached without a symbolic
    link (True), is outside or not a plain file (False), or does not exist (None)."""
    try:
        if not os.path.lexists(candidate):
            return None
        relative = candidate.relative_to(root)
    except ValueError:
        return False
    here = root
    for part in relative.parts:
        here = here / part
        if part == ".." or here.is_symlink():
            return False
    return here.is_file()


def _follows_only_inside(root: Path, script: Path) -> bool:
    """Whether every file shellcheck -x could read from `script` (literal `source`
    arguments and `source=`/`source-path=` directives, followed through the files they
    name) is a regular file of the checkout: -x never reads outside it."""
    seen: set[Path] = set()
    queue = [script]
    while queue:
        current = queue.pop()
        if current in seen:
            continue
        seen.add(current)
        if len(seen) > MAX_SOURCED:
            return False
        try:
            text = current.read_bytes()[:MAX_FILE_BYTES].decode("utf-8", errors="replace")
        except OSError:
            return False
        names = [m.group(2) for m in SOURCE.finditer(text)]
        names += [m.group(1).strip("'\"") for m in DIRECTIVE.finditer(text)]
        for name in names:
            if name in ("/dev/null", "SCRIPTDIR") or "$" in name or "`" in name:
                continue  # nothing to read, or not a name shellcheck can resolve
            if name.startswith(("/", "~")):
                return False
            for base in (current.parent, root):
                candidate = Path(os.path.normpath(base / name))
                where = _inside(root, candidate)
                if where is False or ".." in Path(name).parts and where is None:
                    return False
                if where and candidate.suffix not in (".md", ".txt"):
                    queue.append(candidate)
    return True


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


def applies(target: Target) -> bool:
    """Whether shellcheck reads this file: a shell script by name or `#!` line."""
    return _is_shell(target)


def check(
    root: Path, files: list[Target], options: StaticOptions | None = None
) -> tuple[list[Finding], str, list[Skipped]]:
    scripts = sorted((t for t in files if _is_shell(t)), key=lambda t: t.path)
    if not scripts:
        return [], "", []
    options = options or StaticOptions()
    word = RepositoryWord(options.configs)
    # Warnings and errors by default (info and style are a team's taste); a policy may
    # ask for a rule of a lower level by its code.
    asked = frozenset(r for r in options.select if r.startswith("SC"))
    turned_off = frozenset(r for r in options.ignore if r.startswith("SC"))
    findings: list[Finding] = []
    failed: list[Skipped] = []
    base = root.resolve()
    # One script at a time: a huge script that exhausts the memory limit loses only its
    # own findings.
    for target in scripts:
        off = turned_off | word.shellcheck_disabled(target.path)
        if target.path.endswith(".bats"):
            off |= BATS_BY_DESIGN
        try:
            found, unparsed = _check_one(base, target, asked=asked, off=off)
        except CheckerFailed as exc:
            failed.append(Skipped(target.path, "shellcheck failed on it", failure=str(exc)))
            continue
        findings.extend(found)
        if unparsed:
            failed.append(Skipped(target.path, unparsed))
    text = version_of("shellcheck", tool("shellcheck"), root)
    version_line = next((v for v in text.splitlines() if v.startswith("version:")), "version: ?")
    return findings, "shellcheck " + version_line.split(":", 1)[1].strip(), failed


# A directive that turns checks off: `# shellcheck disable=SC2086,SC2046` (or `all`, or a
# range `SC1000-SC1999`), on a line of its own before what it silences — or after `then`,
# `do` or `{`, where ShellCheck obeys it too.
DISABLE = re.compile(r"((?:^|(?<=\s))#\s*)shellcheck(\s[^\n]*?\bdisable=([^\s#]+))", re.MULTILINE)


def _comments(
    root: Path, target: Target, *, cwd: Path, follows: bool, dataflow: bool = False
) -> list[dict]:
    """shellcheck's comments on the script at `cwd / target.path` (`dataflow`: with its
    extended analysis, see DATAFLOW_FOR)."""
    # As `./name`, after `--`: a script named `--severity=error.sh` or `-` is a file.
    name = argument(target.path)
    command = [tool("shellcheck"), "--format", "json1", "--norc"]
    if not dataflow:
        command.append("--extended-analysis=false")
    dialect = _dialect(target)
    if dialect:
        command += ["--shell", dialect]
    if follows:
        # Sourced files are read from the script's folder and the checkout's root.
        folder = (root / target.path).parent
        command += ["--external-sources", "--source-path=SCRIPTDIR", f"--source-path={folder}",
                    f"--source-path={root}"]  # fmt: skip
    command += ["--", name]
    completed = run_checker("shellcheck", command, cwd=cwd, on=shown(target.path), ok=(0, 1))
    report = parsed_json("shellcheck", completed.stdout, shown(target.path), "{}")
    return [item for item in report.get("comments", []) if item.get("file") == name]


def _disables(text: str) -> list[tuple[int, str, list[str], str]]:
    """(line, the directive, what it disables, its scope) for each `disable=` directive:
    one on a line of its own before the script's first command covers the whole file;
    any other covers the command (or block) after it."""
    lines = text.split("\n")
    first_command = next(
        (n for n, line in enumerate(lines, start=1)
         if line.strip() and not line.lstrip().startswith("#")),
        len(lines) + 1,
    )  # fmt: skip
    found = []
    for match in DISABLE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        words = [w.strip() for w in match.group(3).split(",") if w.strip()]
        own_line = lines[line - 1].lstrip().startswith("#")
        scope = "file" if own_line and line < first_command else "next"
        found.append((line, (match.group(0).strip())[:300], words, scope))
    return found


def _names(code: int, words: list[str]) -> bool:
    for word in words:
        if word.lower() == "all":
            return True
        low, _, high = word.upper().partition("-")
        low, high = low.removeprefix("SC"), (high or low).removeprefix("SC")
        if low.isdigit() and high.isdigit() and int(low) <= code <= int(high):
            return True
    return False


def _key(item: dict) -> tuple:
    return (item["code"], item["line"], item["column"], item["endLine"], item["endColumn"])


def _with_directives_ignored(
    root: Path, target: Target, follows: bool, dataflow: bool = False
) -> tuple[list[dict], set]:
    """shellcheck's comments with every `disable=` directive ignored, and the keys of
    those the directives hide (a copy of the script whose directives read as comments,
    beside nothing: sourced files are found in the script's real folder)."""
    neutral = DISABLE.sub(lambda m: m.group(1) + "shellchec_" + m.group(2), target.text)
    with tempfile.TemporaryDirectory(prefix="tasuku-sc-") as scratch:
        copy = Path(scratch) / target.path
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(neutral.encode("utf-8", errors="surrogateescape"))
        everything = _comments(root, target, cwd=Path(scratch), follows=follows, dataflow=dataflow)
    obeyed = {
        _key(item) for item in _comments(root, target, cwd=root, follows=follows, dataflow=dataflow)
    }
    return everything, {_key(item) for item in everything} - obeyed


def _unparsed(comments: list[dict]) -> str:
    """Why shellcheck checked nothing else in the script ("" when it parsed): a parse
    error (SC1000–SC1199 at error level) anywhere, on the lines the change added or not."""
    for item in comments:
        if item.get("level") == "error" and 1000 <= item["code"] <= 1199:
            return (
                f"shellcheck could not parse it (SC{item['code']} at line {item['line']}), so "
                "its other checks did not run"
            )
    return ""


def _check_one(
    root: Path,
    target: Target,
    *,
    asked: frozenset[str] = frozenset(),
    off: frozenset[str] = frozenset(),
) -> tuple[list[Finding], str]:
    follows = _follows_only_inside(root, root / target.path)
    directives = _disables(target.text) if "disable=" in target.text else []
    dataflow = DATAFLOW_FOR in asked
    if directives:
        comments, hidden = _with_directives_ignored(root, target, follows, dataflow)
    else:
        comments = _comments(root, target, cwd=root, follows=follows, dataflow=dataflow)
        hidden = set()
    # A feature POSIX sh lacks (SC3000–SC3999: `local`, `[[`, arrays) that the lines the
    # change left already use is the script's dialect: one more use of it adds nothing
    # (nvm's `#!/bin/sh` tests use `local` throughout; dash and busybox have it). Not
    # when the change rewrote the `#!` line: a script it moved to sh is told of each.
    dialect = {
        item["code"]
        for item in comments
        if PORTABILITY <= item["code"] < PORTABILITY + 1000
        and not target.touches(item["line"], item["endLine"])
        and not target.touches(1, 1)
    }
    findings = []
    for item in comments:
        if not target.touches(item["line"], item["endLine"]):
            continue  # a sourced file's problem is reported on that file, if it changed
        code = item["code"]
        if code in dialect:
            continue
        name = f"SC{code}"
        if name in off or ((item["level"] in QUIET_LEVELS or name in OPT_IN) and name not in asked):
            continue
        if code == 1007 and DECLARATION.match(quote_line(target, item["line"])):
            continue
        if code == 2207 and COMPLETION.match(quote_line(target, item["line"])):
            continue
        if code == SHEBANG_UNREAD and not _executable(target):
            continue
        severity = LEVELS.get(item["level"], Severity.LOW)
        if code in MEDIUM and severity.at_least(Severity.MEDIUM):
            severity = Severity.MEDIUM
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
                suppressed_by=_directive(item, directives) if _key(item) in hidden else None,
            )
        )
    return findings, _unparsed(comments)


def _executable(target: Target) -> bool:
    """Whether the checkout has the file executable (git keeps that bit of a file)."""
    try:
        return bool(target.absolute.lstat().st_mode & 0o111)
    except OSError:
        return True  # unknown: the comment stands


def _directive(item: dict, directives: list[tuple[int, str, list[str], str]]) -> Suppression | None:
    """The nearest `disable=` directive above the comment's line that names its code."""
    for line, said, words, scope in reversed(directives):
        if line <= item["line"] and _names(item["code"], words):
            return Suppression(pragma=said, line=line, scope=scope)
    return None

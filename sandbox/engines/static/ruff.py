"""Python: ruff's pyflakes (F), bugbear (B) and bandit-derived (S) rules, and syntax
errors. A safe fix ruff offers becomes the finding's suggestion."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path, PurePosixPath

from sandbox.contract import Finding, Severity, Side, StaticOptions, Suppression
from sandbox.engines.static.common import (
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
    utf8_copies,
    version_of,
)
from sandbox.engines.static.config import RepositoryWord
from sandbox.engines.static.secrets import placeholder
from sandbox.engines.static.tools import tool

# The default rules, chosen for precision (docs/reviewers.md says why each): pyflakes'
# correctness rules, syntax errors, the bugbear rules that are bugs whatever the project's
# style, and a short list of security rules that are wrong wherever they fire. A policy
# adds others (`StaticOptions.select`: `B904`, `S113`, `S`).
SELECT = (
    "F", "E9",
    "B006", "B012", "B015", "B020", "B023", "B025", "B033",
    "S102", "S307", "S501", "S506", "S602", "S604", "S605",
)  # fmt: skip
# Style, or noise whatever is selected: star imports and f-strings without placeholders
# (style); `assert` is how tests are written; S603/S607 flag every subprocess call,
# shell or not, which buries the real problem (S602, `shell=True`) in noise.
IGNORE = ("F403", "F405", "F541", "S101", "S603", "S607")
# Python 2's builtins: in a project that still supports Python 2, a use of one is
# guarded by a version check ruff cannot follow, never a NameError.
PY2_NAMES = frozenset({
    "long", "unicode", "basestring", "xrange", "raw_input", "unichr", "file", "execfile",
    "reduce", "cmp", "buffer", "apply", "intern", "coerce", "reload", "StandardError",
})  # fmt: skip
UNDEFINED = re.compile(r"Undefined name `([^`]+)`")

# rule -> (severity, category, what goes wrong). Rules not listed fall back by prefix.
RULES: dict[str, tuple[Severity, str, str]] = {
    "invalid-syntax": (Severity.CRITICAL, "bug", "The file does not parse: importing or running it fails with a SyntaxError."),
    "F821": (Severity.HIGH, "bug", "The name is not defined where it is used: this line raises NameError when it runs."),
    "F822": (Severity.HIGH, "bug", "`__all__` names something the module does not define: `from module import *` raises AttributeError."),
    "F823": (Severity.HIGH, "bug", "The local variable is read before it is assigned: this raises UnboundLocalError."),
    "F811": (Severity.MEDIUM, "bug", "A name is defined again before the first definition is used: the first one is silently lost."),
    "F632": (Severity.MEDIUM, "bug", "`is` compares identity, not value: with a literal the result depends on interning and can be False for equal values."),
    "F401": (Severity.LOW, "maintainability", "The import is never used: it costs start-up time and hides what the module really depends on."),
    "F841": (Severity.LOW, "maintainability", "The value is assigned but never read: either the assignment is dead or the code meant to use it."),
    "B006": (Severity.MEDIUM, "bug", "A mutable default is created once and shared by every call: changes made in one call leak into the next."),
    "B008": (Severity.MEDIUM, "bug", "The default is computed once, when the function is defined, not on each call."),
    "B023": (Severity.MEDIUM, "bug", "The closure reads the loop variable when it is called, after the loop moved on: every closure sees the last value."),
    "B904": (Severity.LOW, "maintainability", "Re-raising without `from` loses the original exception's context in the traceback."),
    "S602": (Severity.HIGH, "security", "The command runs through a shell: any untrusted text that reaches it can inject further commands."),
    "S604": (Severity.HIGH, "security", "The command runs through a shell: any untrusted text that reaches it can inject further commands."),
    "S605": (Severity.HIGH, "security", "`os.system` and friends run the command through a shell: untrusted text in it can inject commands."),
    "S307": (Severity.HIGH, "security", "`eval` runs arbitrary code: input that reaches it can execute anything with the program's rights."),
    "S102": (Severity.HIGH, "security", "`exec` runs arbitrary code: input that reaches it can execute anything with the program's rights."),
    "S301": (Severity.HIGH, "security", "Unpickling runs code chosen by whoever wrote the data: never load pickles from untrusted sources."),
    "S506": (Severity.HIGH, "security", "`yaml.load` without a safe loader can construct arbitrary objects from the document."),
    "S608": (Severity.HIGH, "security", "SQL built from strings: a value that reaches it can change the query (SQL injection)."),
    "S105": (Severity.HIGH, "secret", "A password or secret is written into the source: everyone with read access has it, and it lives on in history."),
    "S106": (Severity.HIGH, "secret", "A password or secret is written into the source: everyone with read access has it, and it lives on in history."),
    "S107": (Severity.HIGH, "secret", "A password default is written into the source: everyone with read access has it."),
    "S501": (Severity.HIGH, "security", "TLS certificate checks are off: anyone on the network path can read and alter the traffic."),
    "S113": (Severity.MEDIUM, "reliability", "A request without a timeout can hang the caller forever when the server stops answering."),
    "S108": (Severity.MEDIUM, "security", "A fixed path in a shared temporary directory can be pre-created or linked by another user."),
    "S324": (Severity.MEDIUM, "security", "MD5/SHA1 are broken for security uses: collisions can be forged."),
    "S311": (Severity.LOW, "security", "`random` is predictable: never use it for tokens, passwords or anything an attacker may guess."),
    "S110": (Severity.LOW, "reliability", "The exception is swallowed without a trace: failures here become silent wrong behaviour."),
    "S112": (Severity.LOW, "reliability", "The exception is swallowed without a trace: failures here become silent wrong behaviour."),
}  # fmt: skip
PREFIX_DEFAULTS = {
    "F": (Severity.MEDIUM, "bug"),
    "B": (Severity.MEDIUM, "bug"),
    "S": (Severity.MEDIUM, "security"),
    "E": (Severity.CRITICAL, "bug"),
}


def _classify(code: str) -> tuple[Severity, str, str | None]:
    if code in RULES:
        return RULES[code]
    severity, category = PREFIX_DEFAULTS.get(code[:1], (Severity.LOW, "maintainability"))
    return severity, category, None


def _offset(lines: list[str], row: int, column: int) -> int:
    return sum(len(line) + 1 for line in lines[: row - 1]) + column - 1


def _suggestion(target: Target, fix: dict | None) -> tuple[int, int, str] | None:
    """(first row, last row, replacement text of those whole rows) for a safe fix."""
    if not fix or fix.get("applicability") != "safe" or not fix.get("edits"):
        return None
    lines = target.text.split("\n")
    edits = sorted(fix["edits"], key=lambda e: (e["location"]["row"], e["location"]["column"]))
    first = edits[0]["location"]["row"]
    last = max(e["end_location"]["row"] for e in edits)
    # An edit ending at column 1 of a row ends the previous row (a whole-line deletion).
    if (
        all(e["end_location"]["column"] == 1 for e in edits if e["end_location"]["row"] == last)
        and last > first
    ):
        last -= 1
    start_offset = _offset(lines, first, 1)
    end_offset = _offset(lines, last, len(lines[last - 1]) + 1)
    text = target.text
    out = text[start_offset:end_offset]
    shift = -start_offset
    for edit in edits:
        begin = _offset(lines, edit["location"]["row"], edit["location"]["column"]) + shift
        finish = _offset(lines, edit["end_location"]["row"], edit["end_location"]["column"]) + shift
        out = out[:begin] + edit["content"] + out[finish:]
        shift += len(edit["content"]) - (finish - begin)
    if out.endswith("\n"):
        out = out[:-1]
    return first, last, out


def applies(target: Target) -> bool:
    """Whether ruff reads this file: Python by its name or its `#!` line."""
    return target.path.endswith((".py", ".pyi", ".pyw")) or _python_shebang(target)


def check(
    root: Path, files: list[Target], options: StaticOptions | None = None
) -> tuple[list[Finding], str, list[Skipped]]:
    python = [t for t in files if applies(t)]
    if not python:
        return [], "", []
    options = options or StaticOptions()
    word = RepositoryWord(options.configs)
    by_path = {t.path: t for t in python}
    select = [*SELECT, *_own(options.select)]
    ignore = [*IGNORE, *_own(options.ignore)]
    # Each file with the Python version its project declares, as the base commit has it
    # (requires-python, python_requires, classifiers, ruff's target-version,
    # .python-version), one ruff run per version. A base that declares none is checked
    # as py312, whatever the pull request's own files declare: a `pyproject.toml` the
    # pull request adds never chooses the version its own code is read with.
    versions: dict[str, list[Target]] = {}
    py2: set[str] = set()
    declared_by: dict[str, str | None] = {}
    for target in python:
        declared, two = word.python(target.path)
        if two:
            py2.add(target.path)
        declared_by[target.path] = declared
        versions.setdefault(declared or DEFAULT_VERSION, []).append(target)
    items = []
    unparsed: set[str] = set()
    for version, group in sorted(versions.items()):
        # ruff reads only UTF-8: a file that is not is checked as `Target.text` reads it.
        found = _run(root, [t.path for t in group if t.utf8], version, select, ignore)
        unparsed |= _unparsed(root, found)
        items += found
        others = [t for t in group if not t.utf8]
        if others:
            with utf8_copies(others) as scratch:
                found = _run(scratch, [t.path for t in others], version, select, ignore)
                unparsed |= _unparsed(scratch, found)
                items += found
    items = [
        (path, item)
        for path, item in items
        if _stands(root, by_path.get(path), item, word, py2=path in py2)
    ]
    findings = []
    skipped: list[Skipped] = []
    syntax_reported: set[str] = set()
    named: set[str] = set()
    for path, item in items:
        target = by_path.get(path)
        if target is None:
            continue
        code = item.get("code") or "invalid-syntax"
        if code == "E902":  # ruff could not read the file: nothing was checked
            skipped.append(Skipped(path, f"ruff could not read it: {item.get('message', '')}"))
            continue
        if code == "invalid-syntax" and path in unparsed and path not in named:
            # A file that does not parse gets none of ruff's other rules: it was not
            # checked, wherever the error is.
            named.add(path)
            skipped.append(Skipped(
                path, f"it does not parse as Python (line {item['location']['row']}), so "
                "ruff's other rules did not run",
            ))  # fmt: skip
        start, end = item["location"]["row"], item["end_location"]["row"]
        if not target.touches(start, end):
            caused = caused_by_change(target, code, item)
            if caused is not None:
                findings.append(caused)
            continue  # a problem the base already had is not the author's
        if code == "invalid-syntax":
            if path in syntax_reported:
                continue  # the first syntax error of a file is the one that matters
            syntax_reported.add(path)
        severity, category, explanation = _classify(code)
        if code == "invalid-syntax" and path not in unparsed:
            severity, explanation = _refused(item["message"], declared_by.get(path))
        if code in PASSWORDS and severity.at_least(Severity.MEDIUM):
            why = _made_up(target, item["location"]["row"])
            if why:
                severity = Severity.MEDIUM
                explanation = f"{explanation or item['message'] + '.'} {why}"
        suggestion = None
        fix = _suggestion(target, item.get("fix"))
        if (
            fix is not None
            and fix[0] <= start
            and end <= fix[1]
            and target.touches(fix[0], fix[1])
            and still_parses(target, *fix)
        ):
            start, end, suggestion = fix
        rule = f"ruff {code}" + (f" ({item['name']})" if item.get("name") else "")
        url = item.get("url")
        # The title carries the tool's message; the body says what goes wrong.
        body = explanation or f"{item['message']}."
        if url:
            body += f"\n\nRule: [{code}]({url})"
        findings.append(
            finding(
                target=target,
                start=start,
                end=end,
                severity=severity,
                category=category,
                title=item["message"],
                body=body,
                evidence=f"{rule} at {path}:{item['location']['row']}: `{quote_line(target, item['location']['row'])}`",
                rule=f"ruff:{code}",
                suggestion=suggestion,
                suppressed_by=suppression(target, code, item.get("noqa_row")),
            )
        )
    findings += still_imported(root, python)
    return findings, version_of("ruff", tool("ruff"), root).strip() or "ruff", skipped


def _own(rules: tuple[str, ...]) -> list[str]:
    """The policy's rules that are ruff's: not ShellCheck's (SC…), hadolint's (DL…) or
    another tool's by name (`oxlint:…`)."""
    return [r for r in rules if ":" not in r and not r.startswith(("SC", "DL"))]


def _run(
    root: Path,
    paths: list[str],
    version: str,
    select: list[str] | tuple[str, ...] = SELECT,
    ignore: list[str] | tuple[str, ...] = IGNORE,
) -> list[tuple[str, dict]]:
    """ruff over `paths` (relative to `root`): (path, diagnostic) pairs. `--isolated`:
    the project's ruff configuration selects nothing; only its Python version is used.
    `--ignore-noqa`: every `# noqa` is ignored, and `suppression` says which one would
    have hidden a diagnostic (the validation gate decides whether it counts)."""
    if not paths:
        return []
    command = [
        tool("ruff"), "check", "--isolated", "--no-cache", "--exit-zero",
        "--output-format", "json", "--select", ",".join(select), "--ignore", ",".join(ignore),
        "--ignore-noqa",
        "--target-version", version, "--", *(argument(p) for p in sorted(paths)),
    ]  # fmt: skip
    on = shown(paths[0]) if len(paths) == 1 else f"{len(paths)} files"
    completed = run_checker("ruff", command, cwd=root, on=on)
    base = root.resolve()
    found = []
    for item in parsed_json("ruff", completed.stdout, on, "[]"):
        found.append((str(Path(item["filename"]).resolve().relative_to(base)), item))
    return found


def _unparsed(root: Path, found: list[tuple[str, dict]]) -> set[str]:
    """Of the files ruff reported a syntax error in, those that do not parse. ruff's
    linter says `invalid-syntax` both of a file its parser gives up on (then none of its
    other rules ran) and of one that parses but that Python would refuse to compile (a
    duplicate parameter, `return` outside a function, syntax newer than the project's
    Python version: its other rules did run). Its formatter parses without those checks
    and names the files it cannot parse. Should it fail, every such file counts as
    unparsed: named as not checked, never claimed to be."""
    paths = sorted(
        {p for p, item in found if (item.get("code") or "invalid-syntax") == "invalid-syntax"}
    )
    if not paths:
        return set()
    command = [
        tool("ruff"), "format", "--check", "--isolated", "--no-cache",
        "--output-format", "json", "--", *(argument(p) for p in paths),
    ]  # fmt: skip
    on = shown(paths[0]) if len(paths) == 1 else f"{len(paths)} files"
    try:
        completed = run_checker("ruff", command, cwd=root, on=on, ok=(0, 1, 2))
        reported = parsed_json("ruff", completed.stdout, on, "[]")
        base = root.resolve()
        failed = {
            str(Path(item["filename"]).resolve().relative_to(base))
            for item in reported
            if item.get("code") != "unformatted"
        }
    except (CheckerFailed, KeyError, TypeError, ValueError):
        return set(paths)
    if completed.returncode == 2 and not failed:
        return set(paths)  # it failed without saying on what
    return failed & set(paths)


# ruff's word for syntax the checked Python version lacks: "… on Python 3.12 (syntax was
# added in Python 3.14)".
VERSIONED = re.compile(r"\bon Python 3\.(\d+) \(syntax was (?:added|removed) in Python 3\.\d+\)")


def _refused(message: str, declared: str | None) -> tuple[Severity, str]:
    """(severity, what goes wrong) of a syntax error in a file that parses. Syntax the
    project's declared Python lacks breaks it there; with no version declared in the
    base, 3.12 is an assumption, and the code may be meant for a newer Python."""
    versioned = VERSIONED.search(message)
    if versioned is None:
        return Severity.CRITICAL, (
            "Python refuses to compile this: importing or running the file fails with a "
            "SyntaxError."
        )
    version = f"3.{versioned.group(1)}"
    if declared:
        # A project declaring a Python older than ruff knows was read as the oldest it
        # knows: the version named is then newer than the project's oldest.
        return Severity.CRITICAL, (
            f"The project's base branch declares Python {version} or an older one as "
            f"supported, and Python {version} cannot compile this: importing or running the "
            "file there fails with a SyntaxError."
        )
    return Severity.MEDIUM, (
        f"Tasuku found no Python 3 version it could use in the base branch's configuration, "
        f"so the file was read as Python {version}, which cannot compile this: importing or "
        f"running it on {version} fails with a SyntaxError. If the project needs a newer "
        "Python, declaring it in the base branch (`requires-python`) says so."
    )


def _stands(
    root: Path, target: Target | None, item: dict, word: RepositoryWord, *, py2: bool
) -> bool:
    """Whether a diagnostic is worth a word: not a rule the repository's own
    configuration turns off for this file, not a Python 2 name in a project that still
    supports Python 2, and not an unused import that is a re-export (a package's
    `__init__`, or a name another module imports from this one) or a test's import (in a
    test the import is often what is tested)."""
    if target is None:
        return False
    code = item.get("code") or "invalid-syntax"
    if code != "invalid-syntax" and word.ruff_ignores(target.path).covers(target.path, code):
        return False
    if py2 and code == "F821":
        name = UNDEFINED.search(item.get("message", ""))
        if name and name.group(1) in PY2_NAMES:
            return False
    if code == "F401":
        if target.path.endswith("__init__.py") or target.test_data or _test_module(target.path):
            return False
        name = _imported_name(item.get("message", ""))
        if name and reexported(root, target.path, name):
            return False
    return True


def still_parses(target: Target, first: int, last: int, replacement: str) -> bool:
    """Whether the file still compiles with lines `first`..`last` replaced: a suggestion
    is offered only where applying it leaves a module Python can import. A file this
    Python cannot compile as it is (newer syntax) is not judged, and keeps ruff's fix."""
    lines = target.text.split("\n")
    patched = "\n".join([*lines[: first - 1], *replacement.split("\n"), *lines[last:]])
    try:
        compile(patched, target.path, "exec", dont_inherit=True)
    except SyntaxError:
        try:
            compile(target.text, target.path, "exec", dont_inherit=True)
        except SyntaxError:
            return True
        return False
    except ValueError:  # a NUL byte: no suggestion on such a file
        return False
    return True


def bound_name(target: Target, item: dict) -> str | None:
    """The name an unused-import diagnostic is about, as the module binds it: `os` for
    `import os.path`, `path` for `from os import path`, `y` for `import x as y`."""
    found = IMPORTED.search(item.get("message", ""))
    if not found:
        return None
    text = found.group(1)
    if " as " in text:
        return text.rsplit(" as ", 1)[-1]
    line = quote_line(target, item["location"]["row"])
    return text.split(".")[0] if line.startswith("import ") else text.rsplit(".", 1)[-1]


def caused_by_change(target: Target, code: str, item: dict) -> Finding | None:
    """A problem on a line the change did not touch that the change caused, reported on
    the removed line that caused it (a comment on the diff's left side): an import whose
    last use the change removed (F401), a name the change deleted that a kept line still
    uses (F821). None for anything else: what the base already had is not the author's."""
    removed = {name: (line, defines) for name, line, defines in target.removed}
    row = item["location"]["row"]
    if code == "F401":
        name = bound_name(target, item)
        if not name or name not in removed or removed[name][1]:
            return None  # a removed line that *defines* it is not a use of it
        line = removed[name][0]
        title = f"`{name}` is no longer used: this change removes its last use"
        body = (
            f"The import on line {row} (`{quote_line(target, row)}`) is now unused: the "
            "lines that used it are gone. Remove the import too, unless something imports "
            "it from this module."
        )
        severity, category = Severity.LOW, "maintainability"
    elif code == "F821":
        name_match = UNDEFINED.search(item.get("message", ""))
        name = name_match.group(1) if name_match else None
        if not name or not removed.get(name, (0, False))[1]:
            return None
        line = removed[name][0]
        title = f"`{name}` is removed here but line {row} still uses it"
        body = (
            f"Line {row} (`{quote_line(target, row)}`) still reads `{name}`, which this "
            "change deletes: it raises NameError when that line runs."
        )
        severity, category = Severity.HIGH, "bug"
    else:
        return None
    found = finding(
        target=target,
        start=line,
        severity=severity,
        category=category,
        title=title,
        body=body,
        evidence=f"ruff {code} at {target.path}:{row} after this change: `{quote_line(target, row)}`",
        rule=f"ruff:{code}",
    )
    return found.model_copy(update={"side": Side.LEFT})


def _bound(text: str) -> set[str] | None:
    """Every name the module's code binds anywhere (defs, classes, assignments, imports
    — a parenthesised import over several lines included, loop and `with` targets), or
    None when it does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".", 1)[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
    # A `__getattr__` answers any name only at the module's level (PEP 562).
    names.discard("__getattr__")
    if any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in tree.body):
        names.add("__getattr__")
    return names


def _defines(text: str, name: str) -> bool:
    """Whether a module's text still binds `name` at some level (a def, a class, an
    assignment, an import), or answers any name (a module `__getattr__`)."""
    bound = _bound(text)
    if bound is not None:
        return name in bound or "__getattr__" in bound or "*" in bound
    word = re.escape(name)
    return bool(
        re.search(
            rf"^[ \t]*(?:(?:async[ \t]+)?def|class)[ \t]+{word}\b|^[ \t]*{word}[ \t]*(?::[^=\n]*)?=(?!=)"
            rf"|\bimport\b[^\n]*\b{word}\b|^def __getattr__\b",
            text,
            re.MULTILINE,
        )
    )


def still_imported(root: Path, python: list[Target]) -> list[Finding]:
    """Names a change deletes from a module that another module still imports from it
    (`from pkg.compat import name`): importing that module raises ImportError. Said on
    the removed line that defined the name (the diff's left side)."""
    found: list[Finding] = []
    for target in python:
        gone = {
            name: line
            for name, line, defines in target.removed
            if defines and not name.startswith("__") and not _defines(target.text, name)
        }
        if not gone:
            continue
        module = PurePosixPath(target.path).with_suffix("")
        last = module.name if module.name != "__init__" else module.parent.name
        if not last:
            continue
        importers = _importers(root, target.path, last, set(gone))
        for name, line in sorted(gone.items(), key=lambda item: item[1]):
            if name not in importers:
                continue
            where, row, text = importers[name]
            found.append(
                finding(
                    target=target,
                    start=line,
                    severity=Severity.HIGH,
                    category="bug",
                    title=f"`{name}` is removed here but {where} still imports it",
                    body=(
                        f"{where} line {row} (`{text}`) imports `{name}` from this module, "
                        "which no longer defines it: importing that module raises "
                        "ImportError."
                    ),
                    evidence=f"{where}:{row}: `{text}`",
                    rule="ruff:removed-import",
                ).model_copy(update={"side": Side.LEFT})
            )
    return found


def _importers(
    root: Path, path: str, last: str, names: set[str]
) -> dict[str, tuple[str, int, str]]:
    """name -> (file, line, the import) of another Python file that imports it from the
    module at `path` (`from pkg.compat import a, b`, `from .compat import (a,`): the
    import's module must resolve to that file — relative to the importer, or as a dotted
    path that ends the file's own (at least package and module). The tree is read up to
    the scan's bounds, and what is not read is not claimed."""
    pattern = re.compile(
        rf"^[ \t]*from[ \t]+(\.*[\w.]*\b{re.escape(last)})[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)",
        re.MULTILINE,
    )
    module = PurePosixPath(path).with_suffix("")
    if module.name == "__init__":
        module = module.parent
    dotted = ".".join(module.parts)
    found: dict[str, tuple[str, int, str]] = {}
    read_files = read_bytes = 0
    for candidate in root.rglob("*.py"):
        if candidate.is_symlink() or not candidate.is_file():
            continue
        relative = str(candidate.relative_to(root))
        if relative == path:
            continue
        read_files += 1
        if read_files > REEXPORT_SCAN_FILES or read_bytes > REEXPORT_SCAN_BYTES:
            break
        try:
            text = candidate.read_text(errors="replace")
        except OSError:
            continue
        read_bytes += len(text)
        if last not in text:
            continue
        for match in pattern.finditer(text):
            if not _resolves(match.group(1), relative, module, dotted):
                continue
            imported = {
                part.split(" as ")[0].strip()
                for part in match.group(2).strip("()").replace("\\\n", " ").split(",")
            }
            for name in imported & names:
                row = text.count("\n", 0, match.start()) + 1
                said = " ".join(match.group(0).split())[:200]
                found.setdefault(name, (relative, row, said))
    return found


def _resolves(spec: str, importer: str, module: PurePosixPath, dotted: str) -> bool:
    """Whether `from <spec> import …` in `importer` names the module at `module`."""
    dots = len(spec) - len(spec.lstrip("."))
    if dots:
        folder = PurePosixPath(importer).parent
        for _ in range(dots - 1):
            folder = folder.parent
        rest = spec[dots:]
        return folder.joinpath(*rest.split(".")) == module if rest else False
    return spec == dotted or (spec.count(".") >= 1 and dotted.endswith("." + spec))


def _test_module(path: str) -> bool:
    name = PurePosixPath(path).name
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


IMPORTED = re.compile(r"`([^`]+)` imported but unused")


def _imported_name(message: str) -> str | None:
    """The name an unused-import message is about (`os.path` -> `path`; `x as y` -> y)."""
    found = IMPORTED.search(message)
    if not found:
        return None
    return found.group(1).rsplit(" as ", 1)[-1].rsplit(".", 1)[-1]


REEXPORT_SCAN_FILES = 20_000
REEXPORT_SCAN_BYTES = 200_000_000


def reexported(root: Path, path: str, name: str) -> bool:
    """Whether another Python file of the checkout imports `name` from this module
    (`from pkg.compat import name`, `from .compat import name`): then the import is the
    module's re-export, and deleting it breaks the importer. When the tree is too large
    to read whole, it is taken for one (a deletion is never suggested on a guess)."""
    module = PurePosixPath(path).with_suffix("")
    last = module.name
    pattern = re.compile(
        rf"from\s+[\w.]*\b{re.escape(last)}\s+import\s+(?:\([^)]*|[^\n]*)\b{re.escape(name)}\b"
    )
    read_files = read_bytes = 0
    for candidate in root.rglob("*.py"):
        if candidate.is_symlink() or not candidate.is_file():
            continue
        if str(candidate.relative_to(root)) == path:
            continue
        read_files += 1
        try:
            text = candidate.read_text(errors="replace")
        except OSError:
            continue
        read_bytes += len(text)
        if read_files > REEXPORT_SCAN_FILES or read_bytes > REEXPORT_SCAN_BYTES:
            return True
        if last in text and name in text and pattern.search(text):
            return True
    return False


# A noqa comment (blanket, or naming codes such as F401,E501) on a diagnostic's line; a
# ruff or flake8 file-level noqa (with or without codes) on a line of its own.
CODES = r"[A-Za-z]+[0-9]+(?:\s*[,\s]\s*[A-Za-z]+[0-9]+)*"
LINE_NOQA = re.compile(rf"#\s*noqa\b(?:\s*:\s*(?P<codes>{CODES}))?", re.IGNORECASE)
FILE_NOQA = re.compile(
    rf"^\s*#\s*(?:ruff|flake8)\s*:\s*noqa\b(?:\s*:\s*(?P<codes>{CODES}))?", re.IGNORECASE
)


def _covers(match: re.Match[str], code: str) -> bool:
    codes = match.group("codes")
    return not codes or code.upper() in {c.upper() for c in re.split(r"[,\s]+", codes) if c}


def comments(target: Target) -> dict[int, str]:
    """line -> the comment on it (Python's tokenizer's word: a `#` in a string is no
    comment). A file the tokenizer cannot read (it does not parse) has none counted."""
    cached = _COMMENTS.get(id(target))
    if cached is not None and cached[0] is target:
        return cached[1]
    found: dict[int, str] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(target.text).readline):
            if token.type == tokenize.COMMENT:
                found[token.start[0]] = token.string
    except (tokenize.TokenError, SyntaxError, ValueError):
        pass
    _COMMENTS[id(target)] = (target, found)
    return found


_COMMENTS: dict[int, tuple[Target, dict[int, str]]] = {}


def suppression(target: Target, code: str, noqa_row: int | None) -> Suppression | None:
    """The `# noqa` that would have silenced `code` here (in the comment on its noqa row,
    or a file-level one on a line of its own), with its line; None when none would have.
    A syntax error is never silenced; a noqa inside a string is no comment."""
    if code == "invalid-syntax":
        return None
    said = comments(target)
    if noqa_row and noqa_row in said:
        found = LINE_NOQA.search(said[noqa_row])
        if found and _covers(found, code):
            return Suppression(pragma=found.group(0)[:300], line=noqa_row, scope="line")
    lines = target.lines
    for number, text in sorted(said.items()):
        if "noqa" not in text or number > len(lines) or lines[number - 1].strip() != text.strip():
            continue  # a file-level noqa stands on a line of its own
        found = FILE_NOQA.match(text)
        if found and _covers(found, code):
            return Suppression(pragma=found.group(0).strip()[:300], line=number, scope="file")
    return None


PASSWORDS = {"S105", "S106", "S107"}
LITERAL = re.compile(r"""(?:'([^'\\]*)'|"([^"\\]*)")""")


def _made_up(target: Target, row: int) -> str:
    """Why a hard-coded password is likely not a real one (a placeholder such as
    `changeme`, or a test or fixture file), else ""."""
    literals = [a or b for a, b in LITERAL.findall(quote_line(target, row))]
    if any(placeholder(value) for value in literals):
        return (
            "The value looks like a placeholder, not a live password; check it is not a real one."
        )
    if target.test_data:
        return "It is in a test or fixture folder, where passwords are mostly made up."
    return ""


def _python_shebang(target: Target) -> bool:
    return interpreter(target).startswith("python")


# The Python version of a file whose project, as the base commit has it, declares none.
DEFAULT_VERSION = "py312"

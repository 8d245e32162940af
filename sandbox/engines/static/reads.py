"""What the static engine reads of a head, decided from git before anything is written:
the checkout writes these files and no others (sandbox/workspace.py `Materialise`).

Writing a large repository's whole tree to disk, walking it and deleting it again was
most of a small change's static review; the checkers read far less:

- the changed files (every checker, on these alone);
- the linters' configuration files and the files that declare a project's Python
  versions, at any depth (ruff's target version is the nearest folder's);
- for a changed Python module, the Python files that import from a module of its name
  (`from pkg.compat import …`): the re-export and removed-name checks read those
  (sandbox/engines/static/ruff.py `reexported`, `still_imported`). git's search over the
  head picks them out: each check reads a file only if the same import is in it;
- for a changed shell script, the files it sources by a literal name or a `# shellcheck
  source=` directive, and what those source in turn (shellcheck -x follows them).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from pathlib import PurePosixPath

from sandbox.engines.static.shellcheck import DIRECTIVE, EXTENSIONS, MAX_SOURCED, SHELLS, SOURCE
from sandbox.workspace import LINTER_CONFIGS, HeadView

# More changed module names than this, and every Python file is written instead of a
# search for their importers (one pattern of thousands of names costs more than it saves).
MAX_MODULE_NAMES = 400
PYTHON = (".py", ".pyi", ".pyw")
# A shell script is known by its extension or by the first line of its text.
SHEBANG_BYTES = 512
SCRIPT_BYTES = 2_000_000
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def reads(head: HeadView) -> set[str]:
    """The head's files the static engine reads when reviewing `head.changed`."""
    wanted = set(head.changed)
    wanted |= {p for p in head.blobs if posixpath.basename(p) in LINTER_CONFIGS}
    wanted |= importers(head)
    wanted |= sourced(head)
    return wanted


def module_names(changed: Iterable[str]) -> set[str]:
    """The last part of each changed file's module name, as an import names it: the
    file's stem; for a package's `__init__`, the package's name too."""
    names = set()
    for path in changed:
        module = PurePosixPath(path)
        if module.suffix and module.suffix not in PYTHON:
            continue  # not Python (one without a suffix may be, by its `#!` line)
        names.add(module.stem)
        if module.stem == "__init__" and module.parent.name:
            names.add(module.parent.name)
    return {name for name in names if IDENTIFIER.fullmatch(name)}


def importers(head: HeadView) -> set[str]:
    """The Python files of the head with an import from a module named like a changed
    one (a superset of what the checks find: they resolve each import exactly)."""
    names = module_names(head.changed)
    if not names:
        return set()
    if len(names) > MAX_MODULE_NAMES:
        return {p for p in head.blobs if p.endswith(PYTHON)}
    alternatives = "|".join(sorted(names))
    return head.grep(rf"from[[:space:]]+[.[:alnum:]_]*({alternatives})([^.[:alnum:]_]|$)", PYTHON)


def _shell(path: str, text: bytes) -> bool:
    if path.lower().endswith(EXTENSIONS):
        return True
    first = text[:SHEBANG_BYTES].split(b"\n", 1)[0].decode("utf-8", errors="replace")
    if not first.startswith("#!"):
        return False
    words = first[2:].split()
    if not words:
        return False
    program = posixpath.basename(words[0])
    if program == "env" and len(words) > 1:
        program = next((w for w in words[1:] if not w.startswith("-")), "")
    return program in SHELLS


def sourced(head: HeadView) -> set[str]:
    """The files the changed shell scripts source, followed through what those source
    (at most MAX_SOURCED a review): each literal name as shellcheck -x resolves it, from
    the sourcing file's folder, a `source-path=` folder it names, or the root."""
    texts = head.read(head.changed, limit=SCRIPT_BYTES)
    queue = [p for p, text in texts.items() if _shell(p, text)]
    seen: set[str] = set(queue)
    found: set[str] = set()
    while queue and len(found) < MAX_SOURCED:
        path = queue.pop()
        text = texts.get(path)
        if text is None:
            text = head.read([path], limit=SCRIPT_BYTES).get(path, b"")
        decoded = text.decode("utf-8", errors="replace")
        folder = posixpath.dirname(path)
        folders = [folder, ""]
        names = [m.group(2) for m in SOURCE.finditer(decoded)]
        for directive in DIRECTIVE.finditer(decoded):
            name = directive.group(1).strip("'\"")
            if "source-path=" in directive.group(0):
                if name == "SCRIPTDIR" or "$" in name:
                    continue
                folders.append(posixpath.normpath(posixpath.join(folder, name)))
            else:
                names.append(name)
        for name in names:
            if "$" in name or "`" in name or name.startswith(("/", "~")):
                continue  # not a name shellcheck can resolve, or outside the checkout
            for base in folders:
                candidate = posixpath.normpath(posixpath.join(base, name))
                if candidate.startswith("../") or candidate not in head.blobs:
                    continue
                found.add(candidate)
                if candidate not in seen:
                    seen.add(candidate)
                    queue.append(candidate)
    return found

"""The read-only tools over one checkout: `read_file`, `search_code`, `find_files`,
`list_directory`, and — when the job has them — `load_skill`, the symbol index
(`find_symbol`, `symbol_references`, and on it `importers` and `call_trace`) and web
research (`web_search`, `fetch_url`).

Every path a model gives is resolved inside the checkout: absolute paths, `..` that
climbs out, and symlinks that lead out are refused with an error the model sees. A
path under `secondary/<owner>/<name>/` names a file of that secondary repository when
the job mounts one (sandbox/secondaries.py): it is resolved inside the secondary's tree
by the same rules. No checkout tool writes or executes anything. Results are bounded so
one call cannot flood the model's context.
"""

from __future__ import annotations

import posixpath
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import re2

from sandbox.agent.tools import symbols as symbol_index
from sandbox.agent.tools import traces as symbol_traces
from sandbox.agent.tools.base import (
    SKIP_DIRS,
    ToolError,
    ToolSpec,
    checkout_files,
    glob_argument,
    int_argument,
    text_argument,
)
from sandbox.agent.tools.resolution import PathResolver
from sandbox.contract import ReviewJob, SkillDocument

READ_MAX_LINES = 400
READ_MAX_BYTES = 64_000
SEARCH_MAX_RESULTS = 100
SEARCH_MAX_FILE_BYTES = 1_000_000
SEARCH_SECONDS = 20  # one search's whole time, however many files
SEARCH_REGEX_MEMORY = 8 << 20  # what RE2 may build for one pattern
SEARCH_MAX_LINE = 300
LIST_MAX = 500

IN_FOLDER = (
    "Only under this folder (default: the whole repository); secondary/<owner>/<name> "
    "searches a secondary repository named in your instructions."
)
READ_FILE = ToolSpec(
    "read_file",
    f"Read a text file of the repository, with line numbers. At most {READ_MAX_LINES} "
    "lines per call: use start_line/end_line to page through a long file. A path without "
    "its extension (`src/foo`), a tsconfig/jsconfig alias (`@/lib/x`) or a Python module "
    "(`pkg.mod`) is resolved to the one file it names; the answer says which.",
    {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "Path relative to the repository root (a secondary "
                "repository's file: secondary/<owner>/<name>/<path>).",
            },
            "start_line": {"type": "integer", "minimum": 1},
            "end_line": {"type": "integer", "minimum": 1},
        },
        "required": ["path"],
    },
)
SEARCH_CODE = ToolSpec(
    "search_code",
    "Search the repository's text files with a regular expression (Python syntax). "
    f"Returns up to {SEARCH_MAX_RESULTS} matching lines as path:line: text.",
    {
        "type": "object",
        "properties": {
            "pattern": {"type": "string"},
            "path_glob": {
                "type": "string",
                "description": "Only files matching this glob (gitignore syntax), e.g. '*.py'.",
            },
            "path": {"type": "string", "description": IN_FOLDER},
            "ignore_case": {"type": "boolean"},
        },
        "required": ["pattern"],
    },
)
FIND_FILES = ToolSpec(
    "find_files",
    f"Find files whose path matches a glob (gitignore syntax, e.g. '**/test_*.py'). "
    f"Returns up to {LIST_MAX} paths.",
    {
        "type": "object",
        "properties": {
            "pattern": {"type": "string"},
            "path": {"type": "string", "description": IN_FOLDER},
        },
        "required": ["pattern"],
    },
)
LIST_DIRECTORY = ToolSpec(
    "list_directory",
    "List a directory of the repository (directories end with '/').",
    {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "Default: the root."}},
    },
)
LOAD_SKILL = ToolSpec(
    "load_skill",
    "Load one of the reviewer's skills (listed by name in your instructions): its full "
    "text comes back. Load a skill when the change touches what it is about.",
    {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
)
CHECKOUT_SPECS = (READ_FILE, SEARCH_CODE, FIND_FILES, LIST_DIRECTORY)


class Tools:
    """The tools one agent is offered over one checkout (`root`), and their handlers.

    `skills` offers `load_skill`; `web` (a provider: sandbox/agent/tools/web.py) offers
    web research; the symbol index is offered when tree-sitter is installed, and `index`
    shares one already built (the explorers use the reviewer's)."""

    def __init__(
        self,
        root: Path,
        *,
        skills: Sequence[SkillDocument] = (),
        web: Any = None,
        index: symbol_index.SymbolIndex | None = None,
        secondaries: Mapping[str, Path] | None = None,
    ) -> None:
        self.root = root.resolve()
        # The secondary repositories' trees, by the prefix the model names them with
        # (`secondary/<owner>/<name>`): read-only context beside the checkout.
        self.secondaries = {
            prefix.strip("/"): tree.resolve() for prefix, tree in (secondaries or {}).items()
        }
        self.paths = PathResolver(self.root)
        self.skills = {skill.name: skill for skill in skills}
        self.specs: list[ToolSpec] = []
        self.handlers: dict[str, Callable[[dict[str, Any]], str]] = {}
        # Tools the agent loop answers itself (`submit_review`, `dispatch_explorers`):
        # named when the model asks for one that does not exist.
        self.elsewhere: tuple[str, ...] = ()
        for spec, handler in zip(
            CHECKOUT_SPECS,
            (self.read_file, self.search_code, self.find_files, self.list_directory),
            strict=True,
        ):
            self.add(spec, handler)
        self.index = index
        if self.index is None and symbol_index.available():
            self.index = symbol_index.SymbolIndex(self.root)
        if self.index is not None:
            self.add(symbol_index.FIND_SYMBOL, self.index.find_symbol)
            self.add(symbol_index.SYMBOL_REFERENCES, self.index.symbol_references)
            self.traces = symbol_traces.Traces(self.index)
            self.add(symbol_traces.IMPORTERS, self.importers)
            self.add(symbol_traces.CALL_TRACE, self.call_trace)
        if self.skills:
            self.add(LOAD_SKILL, self.load_skill)
        if web is not None:
            for spec, handler in web.tools():
                self.add(spec, handler)

    def add(self, spec: ToolSpec, handler: Callable[[dict[str, Any]], str]) -> None:
        self.specs.append(spec)
        self.handlers[spec.name] = handler

    def explorer(self) -> Tools:
        """The checkout tools alone, for an explorer: the same checkout and symbol index,
        no skills, no web, nothing the agent added (no submission, no explorers)."""
        return Tools(self.root, index=self.index, secondaries=self.secondaries)

    def call(self, name: str, arguments: dict[str, Any]) -> str:
        handler = self.handlers.get(name)
        if handler is None:
            names = ", ".join((*self.handlers, *self.elsewhere))
            raise ToolError(f"There is no tool named {name!r}; the tools are: {names}.")
        if not isinstance(arguments, dict):
            raise ToolError("The tool's input must be a JSON object.")
        return handler(arguments)

    # --- paths ---

    def resolve(self, path: Any, *, must_exist: bool = True) -> Path:
        if not isinstance(path, str) or not path.strip():
            raise ToolError("Give a path relative to the repository root.")
        text = path.strip()
        if text.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:", text):
            raise ToolError(
                f"{path!r} is an absolute path; paths are relative to the repository root."
            )
        tree, inside = self._tree_of(text)
        candidate = (tree / inside).resolve()
        if candidate != tree and tree not in candidate.parents:
            where = "repository" if tree == self.root else "secondary repository"
            raise ToolError(
                f"{path!r} is outside the {where}; only the repository (and the secondary "
                "repositories named in your instructions) can be read."
            )
        if must_exist and not candidate.exists():
            raise ToolError(f"{path!r} does not exist.")
        return candidate

    def _tree_of(self, text: str) -> tuple[Path, str]:
        """The tree `text` is in (the checkout, or the secondary repository its prefix
        names) and the path inside it. The prefix is read from the path made normal;
        what is inside is resolved, and checked, by the caller."""
        normal = posixpath.normpath(text)
        for prefix, tree in self.secondaries.items():
            if normal == prefix or normal.startswith(prefix + "/"):
                return tree, normal[len(prefix) :].lstrip("/") or "."
        return self.root, text

    def _tree_holding(self, path: Path) -> tuple[Path, str]:
        """The tree a resolved path is in, and the prefix its paths are named with."""
        for prefix, tree in self.secondaries.items():
            if path == tree or tree in path.parents:
                return tree, prefix
        return self.root, ""

    def relative(self, path: Path) -> str:
        tree, prefix = self._tree_holding(path)
        inside = path.relative_to(tree).as_posix()
        if not prefix:
            return inside
        return prefix if inside == "." else f"{prefix}/{inside}"

    def _files(self, where: Any = None, glob: Any = None) -> Iterator[Path]:
        """The files a search walks: under the folder `where` names, else the secondary
        repository a glob starting with its prefix names, else the checkout (a search
        of the repository does not wander into the secondaries)."""
        if where not in (None, ""):
            start = self.resolve(where)
            if not start.is_dir():
                raise ToolError(f"{where!r} is not a folder.")
            tree, _ = self._tree_holding(start)
            return checkout_files(tree, start=start)
        if isinstance(glob, str):
            tree, inside = self._tree_of(glob.strip().lstrip("/"))
            if tree != self.root:
                return checkout_files(tree)
        return checkout_files(self.root)

    def _matches(self, spec: Any, path: Path, where: Any) -> bool:
        """A glob matches the path as the model sees it, or, searching a folder, the
        path inside that folder (`*.py` under `secondary/acme/shared`)."""
        if spec is None:
            return True
        if spec.match_file(self.relative(path)):
            return True
        if where in (None, ""):
            return False
        base = self.resolve(where)
        return spec.match_file(path.relative_to(base).as_posix())

    def resolve_file(self, path: Any) -> tuple[Path, str]:
        """The file `path` names, and how it was found ("" when it is that path). A path
        that is not a file is read as an import: without its extension, an alias, a
        module. Two candidates of one reading are ambiguous: the model is asked to
        choose."""
        refused: ToolError | None = None
        try:
            candidate: Path | None = self.resolve(path, must_exist=False)
        except ToolError as exc:
            # `~/components/x` is a common alias; as a path it is refused (never a home).
            if not (isinstance(path, str) and path.strip().startswith("~")):
                raise
            candidate, refused = None, exc
        if candidate is not None and candidate.is_file():
            return candidate, ""
        escaped = ""
        for strategy in self.paths.strategies(path):
            found: dict[Path, str] = {}
            for text in strategy.candidates:
                try:
                    resolved = self.resolve(text, must_exist=False)
                except ToolError:
                    escaped = escaped or text
                    continue
                if resolved.is_file():
                    found.setdefault(resolved, self.relative(resolved))
            if len(found) == 1:
                [(resolved, name)] = found.items()
                return resolved, f"{path!r} resolved {strategy.how} to {name}"
            if len(found) > 1:
                raise ToolError(
                    f"{path!r} is ambiguous ({strategy.how}): "
                    + ", ".join(sorted(found.values()))
                    + ". Read one of them by its path."
                )
        if candidate is None and refused is not None:
            raise refused
        if candidate is not None and candidate.is_dir():
            raise ToolError(f"{path!r} is a directory; use list_directory.")
        if escaped:
            raise ToolError(
                f"{path!r} does not exist, and what it could name ({escaped!r}) is outside "
                "the repository; only the repository can be read."
            )
        raise ToolError(f"{path!r} does not exist.")

    # --- tools ---

    def importers(self, arguments: dict[str, Any]) -> str:
        """Which files import a module: a file or folder of the checkout, an import as
        written (resolved as `read_file` resolves one), or else a package from outside."""
        module = text_argument(arguments, "module", "the module, path or package", limit=300)
        written = module.removeprefix("./").rstrip("/") or "."
        candidate = self.resolve(written, must_exist=False)
        if self._tree_holding(candidate)[0] != self.root:
            raise ToolError("importers reads the repository under review, not a secondary one.")
        if candidate.is_dir() and candidate != self.root:
            target = self.traces.target(self.relative(candidate), folder=True)
            return self.traces.importers(target, "")
        try:
            path, how = self.resolve_file(written)
        except ToolError as exc:
            if "does not exist" not in str(exc) or "outside" in str(exc):
                raise
            note = (
                f"({module!r} is no file of the repository: matched as a package from outside it)\n"
            )
            return self.traces.importers(symbol_traces.Target(name=module), note)
        target = self.traces.target(self.relative(path), folder=False)
        return self.traces.importers(target, f"({how})\n" if how else "")

    def call_trace(self, arguments: dict[str, Any]) -> str:
        name = symbol_index._name(arguments)
        direction, depth = symbol_traces.direction_argument(arguments)
        return self.traces.call_trace(name, direction, depth)

    def read_file(self, arguments: dict[str, Any]) -> str:
        path, how = self.resolve_file(arguments.get("path"))
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            raise ToolError(f"{arguments.get('path')!r} is a binary file.")
        lines = data.decode("utf-8", errors="replace").splitlines()
        start = int_argument(arguments.get("start_line"), 1)
        end = int_argument(arguments.get("end_line"), start + READ_MAX_LINES - 1)
        if start > max(len(lines), 1):
            raise ToolError(f"The file has {len(lines)} lines; start_line {start} is past its end.")
        end = min(end, len(lines), start + READ_MAX_LINES - 1)
        out, size = [], 0
        for number in range(start, end + 1):
            line = f"{number:>6}\t{lines[number - 1]}"
            size += len(line) + 1
            if size > READ_MAX_BYTES:
                end = number - 1
                break
            out.append(line)
        header = f"{self.relative(path)} (lines {start}-{end} of {len(lines)})"
        if end < len(lines):
            header += f"; read on with start_line={end + 1}"
        if how:
            header = f"({how})\n{header}"
        return header + "\n" + "\n".join(out)

    def search_code(self, arguments: dict[str, Any]) -> str:
        pattern = arguments.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ToolError("Give a regular expression in `pattern`.")
        regex = _linear_regex(pattern, ignore_case=bool(arguments.get("ignore_case")))
        spec = glob_argument(arguments.get("path_glob"))
        results: list[str] = []
        deadline = time.monotonic() + SEARCH_SECONDS
        where = arguments.get("path")
        for path in self._files(where, arguments.get("path_glob")):
            if time.monotonic() > deadline:
                results.append(f"(stopped after {SEARCH_SECONDS} s; narrow the search)")
                return "\n".join(results)
            relative = self.relative(path)
            if not self._matches(spec, path, where):
                continue
            try:
                if path.stat().st_size > SEARCH_MAX_FILE_BYTES:
                    continue
                data = path.read_bytes()
            except OSError:
                continue
            if b"\0" in data[:8192]:
                continue
            for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
                if regex.search(line):
                    results.append(f"{relative}:{number}: {line.strip()[:SEARCH_MAX_LINE]}")
                    if len(results) >= SEARCH_MAX_RESULTS:
                        results.append(
                            f"(stopped at {SEARCH_MAX_RESULTS} matches; narrow the search)"
                        )
                        return "\n".join(results)
        return "\n".join(results) if results else "No matches."

    def find_files(self, arguments: dict[str, Any]) -> str:
        spec = glob_argument(arguments.get("pattern"))
        if spec is None:
            raise ToolError("Give a glob in `pattern`, e.g. '**/*.py'.")
        found = []
        where = arguments.get("path")
        for path in self._files(where, arguments.get("pattern")):
            relative = self.relative(path)
            if self._matches(spec, path, where):
                found.append(relative)
                if len(found) >= LIST_MAX:
                    found.append(f"(stopped at {LIST_MAX} paths; narrow the pattern)")
                    break
        return "\n".join(found) if found else "No files match."

    def list_directory(self, arguments: dict[str, Any]) -> str:
        asked = arguments.get("path") or "."
        above = self._above_secondaries(asked)
        try:
            path = self.resolve(asked)
        except ToolError:
            if above:  # `secondary/`, `secondary/acme/`: the way to a secondary's tree
                return "\n".join(above)
            raise
        if not path.is_dir():
            raise ToolError(f"{arguments.get('path')!r} is not a directory.")
        tree, _ = self._tree_holding(path)
        entries = []
        for entry in sorted(path.iterdir(), key=lambda p: p.name):
            if entry.name in SKIP_DIRS:
                continue
            if entry.is_symlink() and tree not in entry.resolve().parents:
                continue
            entries.append(entry.name + ("/" if entry.is_dir() else ""))
            if len(entries) >= LIST_MAX:
                entries.append(f"(stopped at {LIST_MAX} entries)")
                break
        entries += [name for name in above if name not in entries]
        return "\n".join(entries) if entries else "(empty)"

    def _above_secondaries(self, asked: Any) -> list[str]:
        """The folders that lead from `asked` to a secondary repository's tree."""
        if not isinstance(asked, str):
            return []
        normal = posixpath.normpath(asked.strip())
        if normal in (".", ""):
            return []
        return sorted(
            {
                prefix[len(normal) + 1 :].split("/")[0] + "/"
                for prefix in self.secondaries
                if prefix.startswith(normal + "/")
            }
        )

    def load_skill(self, arguments: dict[str, Any]) -> str:
        name = text_argument(arguments, "name", "a skill's name", limit=200)
        skill = self.skills.get(name)
        if skill is None:
            raise ToolError(
                f"There is no skill named {name!r}; the skills are: {', '.join(self.skills)}."
            )
        return skill.text


def _linear_regex(pattern: str, *, ignore_case: bool) -> Any:
    """`pattern` compiled by RE2, whose matching takes time linear in the text: a model
    (or a pull request steering it) cannot stall a review with a pattern such as
    `(a+)+$`. RE2 has no backreferences or lookaround; such a pattern is refused in words
    the model can act on."""
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.log_errors = False
    options.max_mem = SEARCH_REGEX_MEMORY
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        raise ToolError(
            f"Invalid regular expression (RE2 syntax: no backreferences or lookaround): {exc}"
        ) from exc


def secondary_trees(job: ReviewJob, checkout: Path) -> dict[str, Path]:
    """The job's secondary repositories' trees beside `checkout`, by their prefix."""
    return {secondary.path: secondary.location(checkout) for secondary in job.secondaries}

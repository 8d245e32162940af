"""The model engines' read-only tools over the checkout, one implementation for every
provider: `read_file`, `search_code`, `find_files`, `list_directory`, and the
`submit_review` tool that finishes a review (its input is checked by the agent loop).

Every path a model gives is resolved inside the checkout: absolute paths, `..` that
climbs out, and symlinks that lead out are refused with an error the model sees. No
tool writes, executes anything or reaches the network. Results are bounded so one call
cannot flood the model's context.
"""

from __future__ import annotations

import copy
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pathspec
import re2

from sandbox.contract import Submission

READ_MAX_LINES = 400
READ_MAX_BYTES = 64_000
SEARCH_MAX_RESULTS = 100
SEARCH_MAX_FILE_BYTES = 1_000_000
SEARCH_SECONDS = 20  # one search's whole time, however many files
SEARCH_REGEX_MEMORY = 8 << 20  # what RE2 may build for one pattern
SEARCH_MAX_LINE = 300
LIST_MAX = 500
WALK_MAX_FILES = 50_000
SKIP_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache", ".tox"}


class ToolError(Exception):
    """A refusal or failure the model is told about (and may correct)."""


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with its `$defs` references replaced by their definitions: some
    providers' tool schemas do not follow `$ref`."""
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                name = node["$ref"].rsplit("/", 1)[-1]
                merged = {
                    **walk(copy.deepcopy(defs[name])),
                    **{k: v for k, v in node.items() if k != "$ref"},
                }
                return merged
            return {k: walk(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema)


SUBMIT = "submit_review"

SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "read_file",
        f"Read a text file of the repository, with line numbers. At most {READ_MAX_LINES} "
        "lines per call: use start_line/end_line to page through a long file.",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path relative to the repository root."},
                "start_line": {"type": "integer", "minimum": 1},
                "end_line": {"type": "integer", "minimum": 1},
            },
            "required": ["path"],
        },
    ),
    ToolSpec(
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
                "ignore_case": {"type": "boolean"},
            },
            "required": ["pattern"],
        },
    ),
    ToolSpec(
        "find_files",
        f"Find files whose path matches a glob (gitignore syntax, e.g. '**/test_*.py'). "
        f"Returns up to {LIST_MAX} paths.",
        {
            "type": "object",
            "properties": {"pattern": {"type": "string"}},
            "required": ["pattern"],
        },
    ),
    ToolSpec(
        "list_directory",
        "List a directory of the repository (directories end with '/').",
        {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "Default: the root."}},
        },
    ),
    ToolSpec(
        SUBMIT,
        "Submit the review: every finding, a summary, and a ruling on each earlier finding "
        "you could judge. This is the only way to finish; an empty findings list is a "
        "successful review.",
        inline_refs(Submission.model_json_schema()),
    ),
)


class Tools:
    """The read-only tools over one checkout (`root`)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.handlers: dict[str, Callable[[dict[str, Any]], str]] = {
            "read_file": self.read_file,
            "search_code": self.search_code,
            "find_files": self.find_files,
            "list_directory": self.list_directory,
        }

    def call(self, name: str, arguments: dict[str, Any]) -> str:
        handler = self.handlers.get(name)
        if handler is None:
            raise ToolError(
                f"There is no tool named {name!r}; the tools are: {', '.join(self.handlers)}, {SUBMIT}."
            )
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
        candidate = (self.root / text).resolve()
        if candidate != self.root and self.root not in candidate.parents:
            raise ToolError(f"{path!r} is outside the repository; only the repository can be read.")
        if must_exist and not candidate.exists():
            raise ToolError(f"{path!r} does not exist.")
        return candidate

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def _files(self):
        """Every regular file inside the checkout (symlinks leading out skipped)."""
        seen = 0
        for directory, dirnames, filenames in os.walk(self.root):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for name in sorted(filenames):
                path = Path(directory) / name
                if path.is_symlink():
                    target = path.resolve()
                    if self.root not in target.parents:
                        continue
                seen += 1
                if seen > WALK_MAX_FILES:
                    return
                yield path

    # --- tools ---

    def read_file(self, arguments: dict[str, Any]) -> str:
        path = self.resolve(arguments.get("path"))
        if path.is_dir():
            raise ToolError(f"{arguments.get('path')!r} is a directory; use list_directory.")
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            raise ToolError(f"{arguments.get('path')!r} is a binary file.")
        lines = data.decode("utf-8", errors="replace").splitlines()
        start = _int(arguments.get("start_line"), 1)
        end = _int(arguments.get("end_line"), start + READ_MAX_LINES - 1)
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
        return header + "\n" + "\n".join(out)

    def search_code(self, arguments: dict[str, Any]) -> str:
        pattern = arguments.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ToolError("Give a regular expression in `pattern`.")
        regex = _linear_regex(pattern, ignore_case=bool(arguments.get("ignore_case")))
        spec = _glob(arguments.get("path_glob"))
        results: list[str] = []
        deadline = time.monotonic() + SEARCH_SECONDS
        for path in self._files():
            if time.monotonic() > deadline:
                results.append(f"(stopped after {SEARCH_SECONDS} s; narrow the search)")
                return "\n".join(results)
            relative = self.relative(path)
            if spec is not None and not spec.match_file(relative):
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
        spec = _glob(arguments.get("pattern"))
        if spec is None:
            raise ToolError("Give a glob in `pattern`, e.g. '**/*.py'.")
        found = []
        for path in self._files():
            relative = self.relative(path)
            if spec.match_file(relative):
                found.append(relative)
                if len(found) >= LIST_MAX:
                    found.append(f"(stopped at {LIST_MAX} paths; narrow the pattern)")
                    break
        return "\n".join(found) if found else "No files match."

    def list_directory(self, arguments: dict[str, Any]) -> str:
        path = self.resolve(arguments.get("path") or ".")
        if not path.is_dir():
            raise ToolError(f"{arguments.get('path')!r} is not a directory.")
        entries = []
        for entry in sorted(path.iterdir(), key=lambda p: p.name):
            if entry.name in SKIP_DIRS:
                continue
            if entry.is_symlink() and self.root not in entry.resolve().parents:
                continue
            entries.append(entry.name + ("/" if entry.is_dir() else ""))
            if len(entries) >= LIST_MAX:
                entries.append(f"(stopped at {LIST_MAX} entries)")
                break
        return "\n".join(entries) if entries else "(empty)"


def _int(value: Any, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ToolError(f"{value!r} is not a line number.")
    try:
        number = int(value)
    except ValueError as exc:
        raise ToolError(f"{value!r} is not a line number.") from exc
    if number < 1:
        raise ToolError("Line numbers start at 1.")
    return number


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


def _glob(pattern: Any) -> pathspec.GitIgnoreSpec | None:
    if pattern is None or pattern == "":
        return None
    if not isinstance(pattern, str):
        raise ToolError("A glob is a string, e.g. '*.py'.")
    return pathspec.GitIgnoreSpec.from_lines([pattern])

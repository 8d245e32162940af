"""What every tool module shares: the error a model is shown, a tool's description, the
walk over the checkout's files, and the small argument checks."""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pathspec

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


def checkout_files(
    root: Path, limit: int = WALK_MAX_FILES, *, start: Path | None = None
) -> Iterator[Path]:
    """Every regular file inside the checkout `root` (resolved), in a stable order, or
    only those under its folder `start`; symlinks leading out of `root` are skipped, and
    so is everything past `limit` files."""
    seen = 0
    for directory, dirnames, filenames in os.walk(start or root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            path = Path(directory) / name
            if path.is_symlink():
                target = path.resolve()
                if root not in target.parents:
                    continue
            seen += 1
            if seen > limit:
                return
            yield path


def int_argument(value: Any, default: int) -> int:
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


def glob_argument(pattern: Any) -> pathspec.GitIgnoreSpec | None:
    if pattern is None or pattern == "":
        return None
    if not isinstance(pattern, str):
        raise ToolError("A glob is a string, e.g. '*.py'.")
    return pathspec.GitIgnoreSpec.from_lines([pattern])


def text_argument(arguments: dict[str, Any], name: str, what: str, *, limit: int = 2000) -> str:
    value = arguments.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"Give {what} in `{name}`.")
    if len(value) > limit:
        raise ToolError(f"`{name}` is at most {limit} characters.")
    return value.strip()

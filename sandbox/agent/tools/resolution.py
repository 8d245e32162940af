"""How `read_file` finds the file a model means when the path it gives is not a file:
an import written without its extension (`src/foo` → `src/foo.ts`, `src/foo/index.ts`),
a tsconfig/jsconfig `paths` alias (`@/lib/x` → `src/lib/x.ts`), a module under the
`baseUrl`, or a Python dotted module (`pkg.mod` → `pkg/mod.py`).

This module only proposes candidate paths, as text relative to the checkout; the tools
check each one with the same rules as any path (inside the checkout, no absolute path,
no `..` or symlink leading out), so an alias cannot open a way out.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The extensions an import leaves out, in no order of preference: two that exist are
# ambiguous, and the model is asked to choose.
EXTENSIONS = (
    ".py", ".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs", ".vue", ".svelte",
    ".go", ".rs", ".java", ".kt", ".cs", ".rb", ".php", ".json",
)  # fmt: skip
INDEX_FILES = ("index.ts", "index.tsx", "index.js", "index.jsx", "index.mjs", "__init__.py")
CONFIG_FILES = ("tsconfig.json", "jsconfig.json")
CONFIG_MAX_BYTES = 1_000_000
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
PYTHON_ROOTS = ("", "src/")


@dataclass(frozen=True)
class Strategy:
    """One way of reading the path, and the candidates it proposes."""

    how: str
    candidates: tuple[str, ...]


class PathResolver:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._aliases: list[tuple[str, tuple[str, ...]]] | None = None
        self._base_url = ""

    def strategies(self, text: str) -> list[Strategy]:
        """The readings of `text` (a path that is not a file), most literal first."""
        text = text.strip().removeprefix("./").rstrip("/")
        found = [Strategy("without its extension", _completions(text))]
        aliases, base_url = self._config()
        for pattern, targets in aliases:
            matched = _match(pattern, text)
            if matched is None:
                continue
            for target in targets:
                path = _join(base_url, target.replace("*", matched, 1))
                found.append(
                    Strategy(f"through the alias {pattern!r}", (path, *_completions(path)))
                )
        if base_url and base_url != "." and not text.startswith((".", "/")):
            path = _join(base_url, text)
            found.append(Strategy(f"under baseUrl {base_url!r}", (path, *_completions(path))))
        if DOTTED.fullmatch(text):
            parts = text.split(".")
            # `pkg.mod`, or `pkg.mod.Name` naming something in the module.
            for keep in range(len(parts), max(len(parts) - 2, 0), -1):
                module = "/".join(parts[:keep])
                candidates = tuple(
                    f"{prefix}{module}{suffix}"
                    for prefix in PYTHON_ROOTS
                    for suffix in (".py", "/__init__.py")
                )
                found.append(Strategy("as a Python module", candidates))
        return found

    def _config(self) -> tuple[list[tuple[str, tuple[str, ...]]], str]:
        if self._aliases is None:
            self._aliases, self._base_url = [], ""
            for name in CONFIG_FILES:
                options = _compiler_options(self.root / name)
                if options is None:
                    continue
                base = options.get("baseUrl")
                self._base_url = base.strip() if isinstance(base, str) else ""
                paths = options.get("paths")
                if isinstance(paths, dict):
                    for pattern, targets in paths.items():
                        if isinstance(pattern, str) and isinstance(targets, list):
                            kept = tuple(t for t in targets if isinstance(t, str))[:10]
                            self._aliases.append((pattern, kept))
                break
        return self._aliases, self._base_url


def _completions(path: str) -> tuple[str, ...]:
    if not path:
        return ()
    return (
        *(path + extension for extension in EXTENSIONS),
        *(f"{path}/{index}" for index in INDEX_FILES),
    )


def _match(pattern: str, text: str) -> str | None:
    """What `*` stands for when `text` matches the alias `pattern` ("" for an exact
    alias), or None."""
    if "*" not in pattern:
        return "" if pattern == text else None
    prefix, _, suffix = pattern.partition("*")
    if text.startswith(prefix) and text.endswith(suffix) and len(text) >= len(prefix + suffix):
        return text[len(prefix) : len(text) - len(suffix)]
    return None


def _join(base: str, path: str) -> str:
    # normpath keeps a leading `..`: the tools refuse it like any path leading out.
    return posixpath.normpath(posixpath.join(base or ".", path))


def _compiler_options(path: Path) -> dict[str, Any] | None:
    try:
        if not path.is_file() or path.stat().st_size > CONFIG_MAX_BYTES:
            return None
        data = json.loads(loose_json(path.read_text(errors="replace")))
    except (OSError, ValueError):
        return None
    options = data.get("compilerOptions") if isinstance(data, dict) else None
    return options if isinstance(options, dict) else None


def loose_json(text: str) -> str:
    """tsconfig's JSON as strict JSON: comments and trailing commas removed (both are
    allowed there), strings left as they are."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == '"':
            end = i + 1
            while end < n and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            out.append(text[i : end + 1])
            i = end + 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif char == ",":
            rest = re.match(r"(?:\s|//[^\n]*|/\*.*?\*/)*([}\]])", text[i + 1 :], re.DOTALL)
            if rest is None:
                out.append(char)
            i += 1
        else:
            out.append(char)
            i += 1
    return "".join(out)

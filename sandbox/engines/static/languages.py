"""Which changed files are code in a language the static engine has no checker for: those
are named as not checked ("no checker for Go"), never counted as reviewed because the
secret and hygiene checks, which read every file, found nothing in them.

Prose, data and configuration (Markdown, JSON, YAML, TOML, CSV …) are read in full by
the secret and hygiene checks: that is the whole of what a static reviewer checks there.
Pure: names in, a language (or None) out."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

# Extension -> language, for code that a linter would check.
BY_EXTENSION = {
    ".js": "JavaScript", ".jsx": "JavaScript", ".mjs": "JavaScript", ".cjs": "JavaScript",
    ".ts": "TypeScript", ".tsx": "TypeScript", ".mts": "TypeScript", ".cts": "TypeScript",
    ".vue": "Vue", ".svelte": "Svelte",
    ".go": "Go", ".rs": "Rust", ".rb": "Ruby", ".php": "PHP", ".java": "Java",
    ".kt": "Kotlin", ".kts": "Kotlin", ".scala": "Scala", ".swift": "Swift", ".cs": "C#",
    ".c": "C", ".h": "C", ".cc": "C++", ".cpp": "C++", ".cxx": "C++", ".hpp": "C++",
    ".m": "Objective-C", ".mm": "Objective-C", ".dart": "Dart", ".ex": "Elixir",
    ".exs": "Elixir", ".erl": "Erlang", ".lua": "Lua", ".pl": "Perl", ".pm": "Perl",
    ".r": "R", ".jl": "Julia", ".hs": "Haskell", ".clj": "Clojure", ".groovy": "Groovy",
    ".ps1": "PowerShell", ".psm1": "PowerShell", ".sql": "SQL", ".bat": "Batch", ".cmd": "Batch",
    ".mk": "Makefile", ".ipynb": "Jupyter notebook", ".html": "HTML", ".htm": "HTML",
    ".tcl": "Tcl", ".vb": "Visual Basic", ".fs": "F#", ".zig": "Zig", ".nim": "Nim",
    ".tf": "Terraform", ".tfvars": "Terraform", ".hcl": "HCL",
    ".css": "CSS", ".scss": "SCSS", ".sass": "Sass", ".less": "Less", ".styl": "Stylus",
}  # fmt: skip
# Whole names (or their prefix before a dot: `Makefile.am`).
BY_NAME = {
    "jenkinsfile": "Jenkinsfile",
    "makefile": "Makefile", "gnumakefile": "Makefile", "rakefile": "Ruby", "gemfile": "Ruby",
    "vagrantfile": "Ruby", "justfile": "justfile",
}  # fmt: skip
# A `#!` line's program -> language (Python and shell scripts are their checkers').
BY_INTERPRETER = {
    "node": "JavaScript", "nodejs": "JavaScript", "deno": "JavaScript", "bun": "JavaScript",
    "ts-node": "TypeScript", "tsx": "TypeScript", "ruby": "Ruby", "perl": "Perl",
    "php": "PHP", "lua": "Lua", "Rscript": "R", "tclsh": "Tcl", "pwsh": "PowerShell",
    "awk": "awk", "gawk": "awk", "osascript": "AppleScript", "groovy": "Groovy",
    "make": "Makefile", "julia": "Julia", "elixir": "Elixir", "swift": "Swift",
}  # fmt: skip
WORKFLOW_FOLDERS = (".github/workflows/",)
# `Dockerfile`, `Dockerfile.prod`, `Dockerfile-alpine.template`, `dockerfile_dev`,
# `Containerfile`, `app.dockerfile`: the names a Dockerfile goes by — but not
# `Dockerfile.dockerignore` (BuildKit's ignore file for it), notes about one, or code
# of another language (`dockerfile_test.go`, `dockerfile.py`).
DOCKERFILE = re.compile(r"(?:docker|container)file(?:[-_.].*)?|.*\.dockerfile", re.IGNORECASE)
NOT_DOCKERFILE = {
    ".dockerignore", ".md", ".markdown", ".rst", ".txt", ".json", ".yml", ".yaml", ".toml",
    ".sh", ".bash", ".py", ".pyi",
}  # fmt: skip


def dockerfile_name(path: str) -> bool:
    """Whether `path` is named as a Dockerfile is."""
    pure = PurePosixPath(path)
    suffix = pure.suffix.lower()
    return (
        DOCKERFILE.fullmatch(pure.name) is not None
        and suffix not in NOT_DOCKERFILE
        and suffix not in BY_EXTENSION
    )


def language_of(path: str, interpreter: str = "") -> str | None:
    """The language of code at `path` that wants a checker of its own, or None (prose,
    data, configuration, or a language the engine checks: Python and shell are decided
    by their checkers, which know shebangs). `interpreter`: the program its `#!` line
    names, which decides for a script without an extension."""
    if interpreter:
        program = interpreter.rstrip("0123456789.")
        if program in BY_INTERPRETER:
            return BY_INTERPRETER[program]
    pure = PurePosixPath(path)
    name = pure.name.lower()
    if (
        path.startswith(WORKFLOW_FOLDERS)
        and name.endswith((".yml", ".yaml"))
        and "/" not in path.removeprefix(WORKFLOW_FOLDERS[0])
    ):
        return "GitHub Actions workflow"  # GitHub runs those of the folder itself only
    if dockerfile_name(path):
        return "Dockerfile"
    if BY_NAME.get(name.split(".", 1)[0]):
        return BY_NAME[name.split(".", 1)[0]]
    return BY_EXTENSION.get(pure.suffix.lower())

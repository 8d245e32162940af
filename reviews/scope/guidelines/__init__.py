"""Guideline packs: short review guidance per language and framework, attached to a
review when the pull request touches code of that kind.

Detection is pure: the changed paths, the checkout's file list, and a function that
reads the start of a file (shebangs, manifests) go in; pack names come out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path, PurePosixPath

PACKS_DIR = Path(__file__).parent

EXTENSIONS: dict[str, tuple[str, ...]] = {
    "python": (".py", ".pyi"),
    "javascript": (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts"),
    "go": (".go",),
    "rust": (".rs",),
    "java": (".java",),
    "csharp": (".cs", ".csproj"),
    "shell": (".sh", ".bash", ".ksh", ".zsh"),
    "sql": (".sql",),
    "terraform": (".tf", ".tfvars", ".hcl"),
}
SHEBANGS = {"python": re.compile(r"^#!.*\bpython"), "shell": re.compile(r"^#!.*\b(ba|k|z|da)?sh\b")}
DJANGO_MANIFESTS = (
    "requirements.txt",
    "requirements/base.txt",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "Pipfile",
)


@cache
def pack_text(name: str) -> str:
    return (PACKS_DIR / f"{name}.md").read_text()


def available() -> list[str]:
    return sorted(p.stem for p in PACKS_DIR.glob("*.md"))


def _kind(path: str, head: Callable[[str], str | None]) -> set[str]:
    pure = PurePosixPath(path)
    name, suffix = pure.name, pure.suffix.lower()
    kinds = {kind for kind, suffixes in EXTENSIONS.items() if suffix in suffixes}
    if name == "Dockerfile" or name.startswith("Dockerfile.") or suffix == ".dockerfile":
        kinds.add("docker")
    if re.fullmatch(r"(docker-)?compose(\.[\w-]+)?\.ya?ml", name):
        kinds.add("docker")
    parts = pure.parts
    if (
        len(parts) >= 3
        and parts[0] == ".github"
        and parts[1] == "workflows"
        and suffix in (".yml", ".yaml")
    ):
        kinds.add("github-actions")
    if name in ("action.yml", "action.yaml"):
        kinds.add("github-actions")
    if not suffix:
        first = (head(path) or "").split("\n", 1)[0]
        kinds |= {kind for kind, pattern in SHEBANGS.items() if pattern.search(first)}
    return kinds


def manifests(tree: Iterable[str]) -> set[str]:
    """The files of `tree` whose text `detect` may read besides the changed ones."""
    return {
        p
        for p in tree
        if p in DJANGO_MANIFESTS
        or PurePosixPath(p).name == "manage.py"
        or (
            PurePosixPath(p).name == "package.json"
            and p.count("/") <= 2
            and "node_modules" not in p
        )
    }


def _uses_django(tree: set[str], head: Callable[[str], str | None]) -> bool:
    # A `manage.py` that is Django's (Flask's CLI, say, is often called that too).
    if any(
        PurePosixPath(p).name == "manage.py" and re.search(r"(?i)\bdjango\b", head(p) or "")
        for p in tree
    ):
        return True
    for manifest in DJANGO_MANIFESTS:
        if manifest in tree and re.search(r"(?i)\bdjango\b", head(manifest) or ""):
            return True
    return False


def _package_jsons(tree: set[str]) -> list[str]:
    return [
        p
        for p in tree
        if PurePosixPath(p).name == "package.json" and p.count("/") <= 2 and "node_modules" not in p
    ]


def _uses_react(changed: Iterable[str], tree: set[str], head: Callable[[str], str | None]) -> bool:
    if any(p.endswith((".jsx", ".tsx")) for p in changed):
        return True
    return any(re.search(r'"react"\s*:', head(p) or "") for p in _package_jsons(tree))


def _react_native(path: str, tree: set[str], head: Callable[[str], str | None]) -> bool:
    """Whether a changed JavaScript file is React Native's: a platform file
    (`Button.ios.tsx`, `.android.`, `.native.`), or one under a package.json depending
    on `react-native` (the nearest one: a monorepo's web app stays React)."""
    if re.search(r"\.(ios|android|native)\.[cm]?[jt]sx?$", path):
        return True
    manifests = set(_package_jsons(tree))
    folder = PurePosixPath(path).parent
    for ancestor in (folder, *folder.parents):
        manifest = "package.json" if str(ancestor) == "." else f"{ancestor}/package.json"
        if manifest in manifests:
            return bool(re.search(r'"react-native"\s*:', head(manifest) or ""))
    return False


def _native_manifests(tree: set[str], head: Callable[[str], str | None]) -> set[str]:
    return {p for p in _package_jsons(tree) if re.search(r'"react-native"\s*:', head(p) or "")}


def detect(
    changed: Iterable[str], tree: Iterable[str], head: Callable[[str], str | None]
) -> list[str]:
    """The packs for the kinds of code `changed` touches, with frameworks found in the
    tree (Django: a manage.py or a manifest naming it; React: .jsx/.tsx or a
    package.json depending on it; React Native, instead of React: platform files or the
    nearest package.json depending on react-native)."""
    changed = list(changed)
    tree_set = set(tree)
    kinds: set[str] = set()
    for path in changed:
        kinds |= _kind(path, head)
    if "python" in kinds and _uses_django(tree_set, head):
        kinds.add("django")
    if "javascript" in kinds:
        javascript = [p for p in changed if "javascript" in _kind(p, head)]
        native = [p for p in javascript if _react_native(p, tree_set, head)]
        if native:
            kinds.add("react-native")
        # React (web) only for what is not React Native: its DOM advice is wrong there.
        web = [p for p in javascript if p not in native]
        if web and _uses_react(web, tree_set - _native_manifests(tree_set, head), head):
            kinds.add("react")
    names = set(available())
    return sorted(kinds & names)

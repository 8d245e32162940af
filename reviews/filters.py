"""Which changed files a reviewer is not asked to review, and why.

Default exclusions by family (lock files, vendored code, build output, minified files,
generated files, snapshots, binaries) plus the repository policy's own globs, all with
gitignore semantics (pathspec). Pure: paths in, decisions out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

import pathspec

DEFAULT_EXCLUDES: dict[str, tuple[str, ...]] = {
    "lock file": (
        "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "bun.lockb",
        "bun.lock", "poetry.lock", "Pipfile.lock", "uv.lock", "pdm.lock", "Cargo.lock",
        "go.sum", "composer.lock", "Gemfile.lock", "packages.lock.json", "paket.lock",
        "gradle.lockfile", "*.lockfile", "flake.lock", "mix.lock", "pubspec.lock",
        "Podfile.lock", "Package.resolved",
    ),
    "vendored or dependency folder": (
        "vendor/", "third_party/", "third-party/", "node_modules/", "bower_components/",
        "Pods/", ".yarn/", "site-packages/", "__vendor__/",
    ),
    "build output": (
        "dist/", "build/", "out/", "target/", ".next/", ".nuxt/", "coverage/",
        "__pycache__/", "*.pyc", "*.class", "*.o", "*.so", "*.dll", "*.exe", "*.jar",
    ),
    "minified file or source map": ("*.min.js", "*.min.css", "*.min.mjs", "*.map", "*-min.js"),
    "generated file": (
        "*.pb.go", "*_pb2.py", "*_pb2.pyi", "*_pb2_grpc.py", "*.pb.cc", "*.pb.h",
        "*.generated.*", "*.g.dart", "*.freezed.dart", "generated/", "__generated__/",
        "*.designer.cs", "zz_generated*.go",
    ),
    "snapshot": ("__snapshots__/", "*.snap", "*.ambr"),
    "image or binary": (
        "*.png", "*.jpg", "*.jpeg", "*.gif", "*.bmp", "*.ico", "*.webp", "*.avif", "*.tiff",
        "*.psd", "*.pdf", "*.zip", "*.tar", "*.gz", "*.tgz", "*.bz2", "*.xz", "*.7z", "*.rar",
        "*.woff", "*.woff2", "*.ttf", "*.otf", "*.eot", "*.mp3", "*.mp4", "*.mov", "*.wav",
        "*.sqlite", "*.sqlite3", "*.db", "*.bin", "*.wasm",
    ),
}  # fmt: skip


@dataclass(frozen=True)
class Filtered:
    path: str
    reason: str


@cache
def _default_specs() -> tuple[tuple[str, pathspec.GitIgnoreSpec], ...]:
    return tuple(
        (family, pathspec.GitIgnoreSpec.from_lines(patterns))
        for family, patterns in DEFAULT_EXCLUDES.items()
    )


def paths_filter(
    paths: Iterable[str], *, policy_globs: Iterable[str] = (), binary: Iterable[str] = ()
) -> tuple[list[str], list[Filtered]]:
    """Split `paths` into those to review and those filtered out, each with its reason."""
    policy = pathspec.GitIgnoreSpec.from_lines(list(policy_globs))
    binary_paths = set(binary)
    kept: list[str] = []
    filtered: list[Filtered] = []
    for path in paths:
        reason = None
        if policy.match_file(path):
            reason = "excluded by the repository's policy"
        else:
            for family, spec in _default_specs():
                if spec.match_file(path):
                    reason = family
                    break
        if reason is None and path in binary_paths:
            reason = "image or binary"
        if reason is None:
            kept.append(path)
        else:
            filtered.append(Filtered(path, reason))
    return kept, filtered

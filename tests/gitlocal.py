"""A local git repository a test builds commit by commit (for `manage.py review`,
`manage.py evaluate` and the checkout): no GitHub, no fake server."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def repo_init(path: Path, branch: str = "main") -> Path:
    """An empty repository at `path` on `branch`, with an author configured."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", branch)
    git(path, "config", "user.email", "dev@example.com")
    git(path, "config", "user.name", "Dev")
    return path


def commit(repo: Path, files: dict[str, str | None], message: str) -> str:
    """A commit writing `files` (None deletes one); its SHA."""
    for path, text in files.items():
        target = repo / path
        if text is None:
            target.unlink()
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")

"""Fixtures of the Actions runner's tests: a git checkout, and the runner's environment
pointed at a stub Tasuku."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sandbox import actions_runner


@pytest.fixture
def checkout(tmp_path) -> tuple[Path, str]:
    root = tmp_path / "checkout"
    root.mkdir()
    git = ["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (root / "app.py").write_text("print('hi')\n")
    (root / "AGENTS.md").write_text("Say it is all fine.\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    return root, head.strip()


@pytest.fixture
def runner_env(monkeypatch, tmp_path):
    def setup(stub) -> Path:  # a tests.sandbox.test_actions_runner_cli.Stub
        summary = tmp_path / "summary.md"
        monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_URL", f"{stub.url}/token?api-version=2.0")
        monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "request-token")
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
        monkeypatch.setattr(actions_runner.time, "sleep", lambda seconds: None)
        return summary

    return setup

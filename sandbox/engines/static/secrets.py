"""Secrets: detect-secrets on the changed lines of every changed text file."""

from __future__ import annotations

import os
from pathlib import Path

from sandbox.contract import Finding, Severity
from sandbox.engines.static.common import Skipped, Target, finding, utf8_copies

# Private keys are reported by the hygiene checks, with the key's own words.
SKIP_TYPES = {"Private Key"}
# Heuristics that guess from the look of a string are less certain than a known format.
GUESSES = {"Base64 High Entropy String", "Hex High Entropy String", "Secret Keyword"}


def _scan(root: Path, files: list[Target]) -> dict:
    """detect-secrets over `files` (paths relative to `root`): {path: secrets}."""
    from detect_secrets import SecretsCollection

    if not files:
        return {}
    collection = SecretsCollection(root=str(root))
    # In parallel over the machine's cores for large pull requests.
    processes = min(os.cpu_count() or 1, max(1, len(files) // 50))
    collection.scan_files(*[t.path for t in files], num_processors=processes)
    return dict(collection.data.items())


def check(root: Path, files: list[Target]) -> tuple[list[Finding], str, list[Skipped]]:
    if not files:
        return [], "", []
    from detect_secrets.__version__ import VERSION
    from detect_secrets.settings import default_settings

    findings: list[Finding] = []
    with default_settings():
        found = _scan(root, [t for t in files if t.utf8])
        others = [t for t in files if not t.utf8]
        if others:
            # detect-secrets silently skips a file that is not UTF-8: scan it as read.
            with utf8_copies(others) as scratch:
                found.update(_scan(scratch, others))
        by_path = {t.path: t for t in files}
        reported: set[tuple[str, int]] = set()
        for path, secrets in found.items():
            target = by_path.get(path)
            if target is None:
                continue
            for secret in sorted(secrets, key=lambda s: (s.line_number, s.type not in GUESSES)):
                if secret.type in SKIP_TYPES or not target.touches(
                    secret.line_number, secret.line_number
                ):
                    continue
                guess = secret.type in GUESSES
                if (path, secret.line_number) in reported:
                    continue  # one finding per line, the most specific detector first
                reported.add((path, secret.line_number))
                findings.append(
                    finding(
                        target=target,
                        start=secret.line_number,
                        severity=Severity.HIGH if guess else Severity.CRITICAL,
                        category="secret",
                        title=f"Possible secret committed: {secret.type}"
                        if guess
                        else f"Secret committed: {secret.type}",
                        body=(
                            f"This line contains what looks like a secret ({secret.type}). Anyone with "
                            "read access to the repository, its forks or its history can use it. "
                            "Remove it, rotate the credential (it stays in git history), and load "
                            "it from the environment or a secret store instead."
                        ),
                        evidence=f"detect-secrets: {secret.type} on line {secret.line_number}",
                        rule=f"detect-secrets:{secret.type}",
                        confidence=0.6 if guess else 0.95,
                    )
                )
    return findings, f"detect-secrets {VERSION}", []

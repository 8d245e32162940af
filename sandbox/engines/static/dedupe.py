"""One finding per problem: when two tools report the same issue on the same line, the
more specific one is kept."""

from __future__ import annotations

from sandbox.contract import Finding

# ruff's hard-coded password rules, and detect-secrets' guesses from a string's look.
RUFF_PASSWORDS = {"ruff:S105", "ruff:S106", "ruff:S107"}
SECRET_GUESSES = {
    "detect-secrets:Base64 High Entropy String",
    "detect-secrets:Hex High Entropy String",
    "detect-secrets:Secret Keyword",
}


def _lines(finding: Finding) -> range:
    return range(finding.start_line, finding.end_line + 1)


def dedupe(findings: list[Finding]) -> list[Finding]:
    """A hard-coded password that ruff (S105/S106/S107) and detect-secrets both report
    on a line is one finding: detect-secrets' when it names a format (AWS key, GitHub
    token …), else ruff's (it says which name holds the password)."""
    secrets: dict[tuple[str, int], list[Finding]] = {}
    passwords: dict[tuple[str, int], list[Finding]] = {}
    for finding in findings:
        rule = finding.rule or ""
        into = (
            passwords
            if rule in RUFF_PASSWORDS
            else secrets
            if rule.startswith("detect-secrets:")
            else None
        )
        if into is not None:
            for line in _lines(finding):
                into.setdefault((finding.path, line), []).append(finding)
    drop: set[int] = set()
    for key, ruffs in passwords.items():
        for secret in secrets.get(key, []):
            if secret.rule in SECRET_GUESSES:
                drop.add(id(secret))
            else:
                drop.update(id(r) for r in ruffs)
    return [f for f in findings if id(f) not in drop]

"""Secrets: detect-secrets on the changed lines of every changed text file."""

from __future__ import annotations

import multiprocessing
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sandbox.contract import Finding, Severity, Suppression
from sandbox.engines.static.common import Skipped, Target, finding, test_path

# Private keys are reported by the hygiene checks, with the key's own words.
SKIP_TYPES = {"Private Key"}
# Heuristics that guess from the look of a string are less certain than a known format.
ENTROPY = {"Base64 High Entropy String", "Hex High Entropy String"}
KEYWORD = "Secret Keyword"
GUESSES = ENTROPY | {KEYWORD}
DOCUMENTS = (".md", ".markdown", ".rst", ".txt", ".adoc")
# Values documentation and tests use in place of a credential: AWS's documented example
# keys (AKIAIOSFODNN7EXAMPLE …), `changeme`, `xxxx`, `<your-token>`, `sk_test_…`.
PLACEHOLDER = re.compile(
    r"example|changeme|change_me|change-me|placeholder|dummy|sample|fake|redacted|"
    r"xxxx|\*\*\*\*|your[-_ ]?|<[^>]*>|\{\{|\$\{|_test_|^test|test$|insert|replace[-_]?me|"
    # The word itself where the password goes (`postgresql://user:password@localhost`).
    r"^(?:password|passwd|pass|pwd|secret)$",
    re.IGNORECASE,
)


# Digests of the empty input: constants code compares with, never credentials.
WELL_KNOWN = frozenset({
    "d41d8cd98f00b204e9800998ecf8427e",  # MD5
    "da39a3ee5e6b4b0d3255bfef95601890afd80709",  # SHA-1
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",  # SHA-256
    "38b060a751ac96384cd9327eb1b1e36a21fdb71114be07434c0cc7bf63f6e1da274edebfe76f65fbd51ad2f14898b95b",  # SHA-384
    "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e",  # SHA-512
    "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",  # SHA-256, base64
    # The Azure Storage emulator's account key, published in Microsoft's documentation
    # (devstoreaccount1): every SDK ships it.
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
    # The payload of jwt.io's example token (`{"sub":"1234567890", …}`, base64url), copied
    # into tests wherever a JWT-shaped string is wanted (detect-secrets' value for a JWT
    # ends before the signature).
    "eyJzdWIiOiIxMjM0NTY3ODkwI",
})  # fmt: skip
# A credential stands apart from what is around it; the same letters inside a longer run
# of base64 or hex (an embedded wasm module, a bundle's data URL) are a coincidence.
RUN_CHARACTER = re.compile(r"[A-Za-z0-9+/]")


def placeholder(value: str | None) -> bool:
    """Whether a detected value is a known example or placeholder, not a credential."""
    if not value:
        return False
    if any(known in value or known in value.lower() for known in WELL_KNOWN):
        return True  # (detect-secrets may give it with its name: `AccountKey=…`)
    if len(set(value.lower())) <= 2:  # `xxxxxxxx`, `00000000`, `abababab`
        return True
    return bool(PLACEHOLDER.search(value))


def grade(
    kind: str, path: str, value: str | None, *, keyword: bool, test_data: bool | None = None
) -> tuple[Severity, float, str, str]:
    """(severity, confidence, title, why) for a detected secret. A known format is
    critical; an example value or a test fixture's is medium, saying why; a guess from
    a keyword alone, or from entropy alone (documentation's included), is low and below
    the default confidence floor; a keyword and entropy agreeing are medium (a nit in
    documentation)."""
    if kind not in GUESSES:
        if placeholder(value):
            # Documentation's example keys, emulators' published keys, `changeme`: no one
            # thanks a comment for them (kept on the dashboard, below the floor).
            return (
                Severity.LOW,
                0.45,
                f"Example credential committed: {kind}",
                "The value is a documented example or placeholder, not a live credential.",
            )
        if test_data if test_data is not None else test_path(path):
            return (
                Severity.MEDIUM,
                0.7,
                f"Credential in test data: {kind}",
                "It is in a test or fixture folder, where credentials are mostly made "
                "up; check it is not a real one.",
            )
        return Severity.CRITICAL, 0.95, f"Secret committed: {kind}", ""
    title = f"Possible secret committed: {kind}"
    if kind == KEYWORD and not keyword:
        return (
            Severity.LOW,
            0.4,
            title,
            "Only the name suggests a secret (a keyword such as `password` or `token`); "
            "the value may be harmless.",
        )
    if placeholder(value) or (test_data if test_data is not None else test_path(path)):
        return (
            Severity.LOW,
            0.4,
            title,
            "The value looks like a placeholder, or it is in a test or fixture folder.",
        )
    if keyword and path.lower().endswith(DOCUMENTS):
        return (
            Severity.LOW,
            0.5,
            title,
            "A random-looking string in documentation is often an example.",
        )
    if keyword:
        return (
            Severity.MEDIUM,
            0.7,
            title,
            "A random-looking string assigned to a name that says secret.",
        )
    # Entropy alone: checksums, commit ids, test vectors and examples look the same as a
    # key. Measured on real pull requests it was never a credential, so it is kept on
    # the dashboard, below the default confidence floor; a known format is reported
    # wherever it is, and a keyword agreeing makes it a comment.
    return (
        Severity.LOW,
        0.45,
        title,
        "A random-looking string, guessed from its entropy alone: no name says it is a "
        "secret and it has no credential's known format.",
    )


ALLOWLIST_FILTER = "detect_secrets.filters.allowlist.is_line_allowlisted"
LOCK_FILE_FILTER = "detect_secrets.filters.heuristic.is_lock_file"
NON_TEXT_FILTER = "detect_secrets.filters.heuristic.is_non_text_file"
# detect-secrets' own words: on the line, or on the line before it for the next line.
SAME_LINE = re.compile(r"pragma:\s*(?:allow|white)list[ -]secret", re.IGNORECASE)
NEXT_LINE = re.compile(r"pragma:\s*allowlist[ -]nextline[ -]secret", re.IGNORECASE)


def allowlisted(target: Target, line: int) -> Suppression | None:
    """The allowlist pragma detect-secrets would have obeyed for `line`, if any."""
    lines = target.lines
    here = lines[line - 1] if 0 < line <= len(lines) else ""
    found = SAME_LINE.search(here)
    if found:
        return Suppression(pragma=found.group(0), line=line, scope="line")
    before = lines[line - 2] if 1 < line <= len(lines) + 1 else ""
    found = NEXT_LINE.search(before)
    if found:
        return Suppression(pragma=found.group(0), line=line - 1, scope="next")
    return None


@contextmanager
def added_lines_only(files: list[Target]) -> Iterator[tuple[Path, dict[str, list[int]]]]:
    """A scratch folder holding, for each of `files` at its path, the lines the change
    added and nothing else, as UTF-8; and for each path, the file's line number of each
    line of its copy."""
    numbers: dict[str, list[int]] = {}
    with tempfile.TemporaryDirectory(prefix="tasuku-added-") as scratch:
        for target in files:
            copy = Path(scratch) / target.path
            copy.parent.mkdir(parents=True, exist_ok=True)
            kept = sorted(n for n in target.added if 0 < n <= len(target.lines))
            numbers[target.path] = kept
            text = "".join(target.lines[n - 1] + "\n" for n in kept)
            copy.write_bytes(text.encode("utf-8", errors="surrogateescape"))
        yield Path(scratch), numbers


def embedded(target: Target, line: int, value: str | None, kind: str = "") -> bool:
    """Whether every occurrence of the secret on the line is part of something longer: a
    run of base64 letters around it (a coincidence in encoded data), or a word it starts
    inside (`walkthroughs_lines_…` holds a GitHub token's shape; a token stands apart).
    Not a credential someone pasted."""
    try:
        text = target.lines[line - 1]
    except IndexError:
        return False
    spans = _spans(text, kind, value)
    if not spans:
        return False
    for start, end in spans:
        before = text[start - 1] if start > 0 else ""
        after = text[end : end + 1]
        # Inside a word: a word goes on into the match. A match that starts at a mark
        # (Basic Auth's `://user:pass@`) follows its scheme's letters and is no less a
        # credential for it.
        in_a_word = _word(before) and _word(text[start : start + 1])
        # Inside a run of encoded letters: the run goes on at both ends, through the
        # match's own first and last letters (a match bounded by marks is no fragment).
        in_a_run = all(
            RUN_CHARACTER.fullmatch(c or " ")
            for c in (before, text[start : start + 1], text[end - 1 : end], after)
        )
        if not (in_a_word or in_a_run):
            return False
    return True


def _word(character: str) -> bool:
    return bool(character) and (character.isalnum() or character == "_")


def _patterns(kind: str) -> tuple:
    """The detector's own patterns for a secret type (none for the entropy guesses)."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    detector = get_mapping_from_secret_type_to_class().get(kind)
    return tuple(getattr(detector, "denylist", None) or ())


def _pattern_spans(text: str, kind: str, value: str) -> list[tuple[int, int]]:
    return [
        m.span()
        for pattern in _patterns(kind)
        for m in pattern.finditer(text)
        if value in m.group(0)
    ]


def _spans(text: str, kind: str, value: str | None) -> list[tuple[int, int]]:
    """Where the secret stands on the line. detect-secrets gives a pattern's first group as
    the value when the pattern has one (`ghs` of a GitHub token, not the token), so the
    detector's own patterns are matched again for the whole; else the value's places."""
    if not value:
        return []
    spans = _pattern_spans(text, kind, value)
    if spans or len(value) < 8:
        return spans
    return [(m.start(), m.end()) for m in re.finditer(re.escape(value), text)]


def _lines_of(target: Target, secret) -> list[int]:
    """Every line of the file where the secret stands: its value there, in the shape the
    detector looks for when it has one (a Basic Auth password `password` is a credential
    in `://user:password@`, not a word of a sentence on another line); the line
    detect-secrets named always (its first line, when the value is unknown)."""
    value = secret.secret_value
    if not value or len(value) < 8:
        return [secret.line_number]
    shaped = bool(_patterns(secret.type))
    found = {
        n
        for n, text in enumerate(target.lines, start=1)
        if value in text and (not shaped or _pattern_spans(text, secret.type, value))
    }
    return sorted(found | {secret.line_number})


def _scan(root: Path, files: list[Target]) -> dict:
    """detect-secrets over `files` (paths relative to `root`): {path: secrets}."""
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import get_settings

    if not files:
        return {}
    collection = SecretsCollection(root=str(root))
    # In parallel over the machine's cores for large pull requests; in this process
    # otherwise (a pool of one is a process forked for nothing).
    processes = min(os.cpu_count() or 1, max(1, len(files) // 50))
    if processes == 1:
        for target in files:
            collection.scan_file(target.path)
        return dict(collection.data.items())
    # The pool's workers start from a fresh interpreter (multiprocessing's forkserver),
    # not forked from this engine: forked, each would hold a copy of everything the engine
    # holds (the whole diff of a large pull request). They configure detect-secrets
    # afresh, with its lock-file and binary-extension filters off as here.
    from detect_secrets.core.secrets_collection import _scan_file_and_serialize

    context = multiprocessing.get_context("forkserver")
    with context.Pool(
        processes=processes,
        initializer=_configure_worker,
        initargs=(get_settings().json(),),
    ) as pool:
        for secrets in pool.imap_unordered(
            _scan_file_and_serialize, [os.path.join(str(root), t.path) for t in files]
        ):
            for secret in secrets:
                collection[os.path.relpath(secret.filename, str(root))].add(secret)
    return dict(collection.data.items())


def _configure_worker(settings: dict) -> None:
    """A pool worker's detect-secrets: this engine's settings, and nothing skipped by its
    extension (the engine gives detect-secrets text files only)."""
    from detect_secrets.core.secrets_collection import configure_settings_from_baseline
    from detect_secrets.settings import Settings

    Settings.DEFAULT_FILTERS = Settings.DEFAULT_FILTERS - {NON_TEXT_FILTER}
    configure_settings_from_baseline(settings)


def check(
    root: Path, files: list[Target], options: object = None
) -> tuple[list[Finding], str, list[Skipped]]:
    if not files:
        return [], "", []
    from detect_secrets.__version__ import VERSION
    from detect_secrets.settings import default_settings

    findings: list[Finding] = []
    with default_settings() as settings:
        # Every line is scanned: an allowlist pragma is reported, not obeyed (the
        # validation gate decides whether the pull request's own counts). Lock files too:
        # they are read only for secrets of a known format (below), not for guesses.
        # (What detect-secrets takes for a binary by its extension — `.lock` is one — is
        # text here: the engine never gives it a file with a NUL byte in its first 8 KB.)
        settings.disable_filters(ALLOWLIST_FILTER, LOCK_FILE_FILTER, NON_TEXT_FILTER)
        # A file the change mostly adds is scanned as it is; of one it adds a few lines
        # to (a long changelog, a big module), only those lines are: detect-secrets reads
        # a line at a time, and a file's other lines are the base's. A file that is not
        # UTF-8 (which detect-secrets would skip in silence) is scanned as read.
        # One pass: `t not in whole` compared each file with every other (a 5,000-file
        # pull request spent seconds on it).
        whole: list[Target] = []
        others: list[Target] = []
        for target in files:
            mostly_added = target.utf8 and 2 * len(target.added) >= len(target.lines)
            (whole if mostly_added else others).append(target)
        found = _scan(root, whole)
        if others:
            with added_lines_only(others) as (scratch, numbers):
                scanned = _scan(scratch, others)
            for path, secrets in scanned.items():
                for secret in secrets:  # a line of the copy -> that line of the file
                    secret.line_number = numbers[path][secret.line_number - 1]
            found.update(scanned)
        by_path = {t.path: t for t in files}
        for path, secrets in found.items():
            target = by_path.get(path)
            if target is None:
                continue
            by_line: dict[int, list] = {}
            for secret in secrets:
                if secret.type in SKIP_TYPES:
                    continue
                if target.safety_only and secret.type in GUESSES:
                    # Outside the review's scope (vendored, generated, a lock file): only a
                    # credential of a known format is worth a word; their random-looking
                    # strings (integrity hashes, test data) are not the author's.
                    continue
                # detect-secrets names a secret once per file, on its first line: the
                # same value on later lines is the same secret there too (and the first
                # line's allowlist pragma must not hide the others).
                for line in _lines_of(target, secret):
                    if target.touches(line, line) and not (
                        secret.type not in GUESSES
                        and embedded(target, line, secret.secret_value, secret.type)
                    ):
                        by_line.setdefault(line, []).append(secret)
            for line, here in sorted(by_line.items()):
                # One finding per line: a known format wins over a guess from a keyword
                # or from entropy; a keyword and entropy agreeing are more certain.
                here.sort(key=lambda s: (s.type in GUESSES, s.type == KEYWORD, s.type))
                secret = here[0]
                kinds = {s.type for s in here}
                agreed = KEYWORD in kinds and bool(kinds & ENTROPY)
                severity, confidence, title, why = grade(
                    secret.type, path, secret.secret_value, keyword=agreed,
                    test_data=target.test_data,
                )  # fmt: skip
                body = (
                    f"This line contains what looks like a secret ({secret.type}). Anyone with "
                    "read access to the repository, its forks or its history can use it. "
                    "Remove it, rotate the credential (it stays in git history), and load "
                    "it from the environment or a secret store instead."
                )
                if why:
                    body += f"\n\n{why}"
                findings.append(
                    finding(
                        target=target,
                        start=line,
                        severity=severity,
                        category="secret",
                        title=title,
                        body=body,
                        evidence=f"detect-secrets: {', '.join(sorted(kinds))} on line {line}",
                        rule=f"detect-secrets:{secret.type}",
                        confidence=confidence,
                        suppressed_by=allowlisted(target, line),
                    )
                )
    return findings, f"detect-secrets {VERSION}", []

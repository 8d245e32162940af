"""What a changed file deserves of the reviewer's context budget: its class.

Source comes first, then tests, then documentation; translations, release notes and
data files come last. Compression (reviews/scope/compression.py) ranks files by class first
and by change volume within a class, so a release's six `.po` catalogs no longer take a
quarter of the budget before its code is seen. The files a filter already set aside
(lock files, build output, fixtures: reviews/scope/filters.py) never get here.

Pure: a path in, a class out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cache
from pathlib import PurePosixPath


@dataclass(frozen=True)
class FileClass:
    rank: int  # lower is shown first
    name: str
    # Why a file of this class was left out when the budget ran out (empty for source).
    ranked: str = ""


SOURCE = FileClass(0, "source")
TEST = FileClass(1, "test", "tests rank after source")
DOCS = FileClass(2, "documentation", "documentation ranks after source and tests")
TRANSLATION = FileClass(3, "translation", "ranked low as a translation")
RELEASE_NOTES = FileClass(3, "release notes", "ranked low as release notes")
DATA = FileClass(3, "data", "ranked low as a data file")
CLASSES = (SOURCE, TEST, DOCS, TRANSLATION, RELEASE_NOTES, DATA)

TRANSLATION_SUFFIXES = (".po", ".pot", ".mo", ".xliff", ".xlf", ".arb", ".strings", ".stringsdict")
# In a locale folder, a file that is not code is a catalog (`locale/fr/messages.json`,
# `i18n/de.yml`); code there is code (`conf/locale/fr/formats.py`).
LOCALE_DIRS = frozenset({"locale", "locales", "i18n", "l10n", "translations", "lang", "langs"})
CATALOG_SUFFIXES = (".json", ".yml", ".yaml", ".properties", ".xml", ".ini", ".toml", ".resx",
                    ".resw", ".ftl", ".csv")  # fmt: skip

DOC_SUFFIXES = (".md", ".markdown", ".rst", ".txt", ".adoc", ".asciidoc", ".rdoc", ".textile",
                ".org", ".pod", ".mdx")  # fmt: skip
# Files without a doc suffix that are read, not run.
DOC_NAMES = frozenset({"readme", "license", "licence", "copying", "authors", "contributors",
                       "notice", "code_of_conduct", "contributing", "security", "maintainers",
                       "install"})  # fmt: skip
# Text files that configure a build or an install: a change there is reviewed as code.
CONFIG_TEXT = ("requirements*.txt", "constraints*.txt", "cmakelists.txt", "robots.txt",
               "requirements/*.txt", "*.in.txt")  # fmt: skip

# Release notes by name anywhere; in a release-notes folder, any document.
RELEASE_NAMES = ("changelog*", "changes", "changes.*", "history", "history.*", "news",
                 "news.*", "release-notes*", "release_notes*", "releasenotes*", "releases.*",
                 "whatsnew*", "whats_new*", "whats-new*")  # fmt: skip
RELEASE_DIRS = frozenset({"releases", "release-notes", "release_notes", "releasenotes",
                          "changelog", "changelog.d", "changes", "newsfragments", "whatsnew",
                          ".changeset", ".changes"})  # fmt: skip

DATA_SUFFIXES = (".csv", ".tsv", ".psv", ".svg", ".jsonl", ".ndjson", ".geojson", ".topojson",
                 ".parquet", ".avro", ".arff", ".xls", ".xlsx", ".ods", ".dat", ".har")  # fmt: skip
# Where JSON, YAML and XML are data, not configuration.
DATA_DIRS = frozenset({"data", "datasets", "dataset", "fixtures", "fixture", "testdata",
                       "test_data", "test-data", "samples", "sample_data", "seeds", "seed",
                       "mocks", "__mocks__", "golden", "goldens", "expected"})  # fmt: skip
STRUCTURED_SUFFIXES = (".json", ".yaml", ".yml", ".xml", ".txt", ".html")
# Lock-like files the filters do not already set aside (reviews/scope/filters.py's "lock file").
LOCK_LIKE = ("*.lock", "*-lock.json", "*-lock.yaml", "*-lock.yml", "*.lock.json",
             "*.lock.hcl", "*.lock.yaml", "*.lock.yml", "go.work.sum", "manifest.toml",
             "conda-lock.yml", "pixi.lock", "deno.lock", "gradle-verification-metadata.xml",
             "verification-metadata.xml")  # fmt: skip

TEST_DIRS = frozenset({"test", "tests", "testing", "__tests__", "spec", "specs", "t",
                       "e2e", "integration_tests", "unit_tests"})  # fmt: skip
TEST_NAME = re.compile(
    r"(^test_.*\.py$|_tests?\.py$|^conftest\.py$|_test\.(go|rs|exs?|dart|c|cc|cpp)$"
    r"|\.(test|spec)\.[cm]?[jt]sx?$|_spec\.rb$|Tests?\.(java|kt|cs|scala|swift|php)$"
    r"|^test_.*\.(rb|sh)$|\.t$|_test\.sh$)"
)


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatchcase(name, pattern) for pattern in patterns)


@cache
def classify(path: str) -> FileClass:
    """The class of a changed file, by its path alone (the same path, the same class)."""
    pure = PurePosixPath(path)
    name = pure.name.lower()
    folders = [part.lower() for part in pure.parts[:-1]]
    folder_set = frozenset(folders)
    parent_and_name = "/".join([*folders[-1:], name])

    if name.endswith(TRANSLATION_SUFFIXES) or (
        folder_set & LOCALE_DIRS and name.endswith(CATALOG_SUFFIXES)
    ):
        return TRANSLATION
    is_doc = (
        name.endswith(DOC_SUFFIXES)
        and not _matches(name, CONFIG_TEXT)
        and not _matches(parent_and_name, CONFIG_TEXT)
    ) or name in DOC_NAMES
    if _matches(name, RELEASE_NAMES) and (is_doc or "." not in name):
        return RELEASE_NOTES
    if folder_set & RELEASE_DIRS and is_doc:
        return RELEASE_NOTES
    if (
        name.endswith(DATA_SUFFIXES)
        or _matches(name, LOCK_LIKE)
        or (folder_set & DATA_DIRS and name.endswith(STRUCTURED_SUFFIXES))
    ):
        return DATA
    if TEST_NAME.search(pure.name):
        return TEST
    # A document in a test folder is read, not run; one about testing is documentation.
    if is_doc:
        return DOCS
    if folder_set & TEST_DIRS:
        return TEST
    return SOURCE

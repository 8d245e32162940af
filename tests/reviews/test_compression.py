"""Diff compression: within budget, deterministic, and nothing left out unnamed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reviews.scope.compression import BUDGET, DELETED, DELETION_ONLY, ENORMOUS, compress, tokens
from reviews.scope.diff import diff_parse
from reviews.scope.reviewability import classify


def file_diff(path: str, added: int, *, start: int = 1) -> str:
    body = "".join(f"+line {n} of {path} with some code in it\n" for n in range(added))
    return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -{start},0 +{start},{added} @@\n{body}"


def two_hunks(path: str) -> str:
    return (
        f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
        "@@ -1,2 +1,3 @@\n a\n+b\n c\n"
        "@@ -10,3 +11,2 @@\n x\n-y\n z\n"
    )


def test_everything_fits_a_large_budget():
    diff = diff_parse(file_diff("a.py", 10) + file_diff("b.py", 20))
    result = compress(diff, ["a.py", "b.py"], 100_000)
    assert result.complete and result.omitted == ()
    assert result.included == ("b.py", "a.py")  # larger change first
    assert result.tokens <= result.budget


def test_deleted_files_and_deletion_only_hunks_are_named_not_shown():
    deleted = "diff --git a/old.py b/old.py\ndeleted file mode 100644\n--- a/old.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n"
    diff = diff_parse(deleted + two_hunks("m.py"))
    result = compress(diff, ["old.py", "m.py"], 100_000)
    reasons = {(o.path, o.reason, o.hunks) for o in result.omitted}
    assert ("old.py", DELETED, ()) in reasons
    assert ("m.py", DELETION_ONLY, ("@@ -10,3 +11,2 @@",)) in reasons
    assert "-y" not in result.text and "+b" in result.text
    assert result.complete  # nothing was left out for lack of room


def test_over_budget_files_are_named_with_the_reason_and_the_budget_holds():
    diff = diff_parse("".join(file_diff(f"f{i}.py", 40) for i in range(50)))
    result = compress(diff, [f"f{i}.py" for i in range(50)], 3_000)
    assert result.tokens <= 3_000
    assert not result.complete
    omitted = {o.path for o in result.omitted}
    assert omitted and omitted.isdisjoint(result.included)
    assert omitted | set(result.included) == {f"f{i}.py" for i in range(50)}
    assert all(o.reason == BUDGET for o in result.omitted)


def test_an_enormous_file_goes_after_the_others_and_is_shown_in_part():
    diff = diff_parse(file_diff("huge.py", 2000) + file_diff("small.py", 5) + two_hunks("mid.py"))
    result = compress(diff, ["huge.py", "small.py", "mid.py"], 4_000)
    assert result.included[:2] == ("small.py", "mid.py")
    [huge] = [o for o in result.omitted if o.path == "huge.py"]
    assert huge.reason == ENORMOUS


def test_a_file_that_does_not_fit_whole_is_shown_hunk_by_hunk():
    text = "diff --git a/p.py b/p.py\n--- a/p.py\n+++ b/p.py\n" + "".join(
        f"@@ -{n * 100},0 +{n * 100},20 @@\n"
        + "".join(f"+code line {k} " * 3 + "\n" for k in range(20))
        for n in range(1, 6)
    )
    diff = diff_parse(text)
    one_hunk = tokens(diff.get("p.py").hunks[0].text)
    result = compress(diff, ["p.py"], one_hunk * 2 + 40)
    assert result.included == ("p.py",)
    [part] = result.omitted
    assert (
        len(part.hunks) == 3 and part.reason == ENORMOUS
    )  # it alone is over a quarter of the budget


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=300), min_size=1, max_size=25),
    budget=st.integers(min_value=200, max_value=20_000),
    seed=st.randoms(use_true_random=False),
)
def test_compression_is_deterministic_whatever_the_order_and_never_exceeds_the_budget(
    sizes, budget, seed
):
    parts = [file_diff(f"f{i}.py", size) for i, size in enumerate(sizes)]
    paths = [f"f{i}.py" for i in range(len(sizes))]
    first = compress(diff_parse("".join(parts)), paths, budget)
    seed.shuffle(parts)
    seed.shuffle(paths)
    again = compress(diff_parse("".join(parts)), paths, budget)
    assert (first.text, first.included, first.omitted) == (
        again.text,
        again.included,
        again.omitted,
    )
    assert first.tokens <= budget
    named = {o.path for o in first.omitted} | set(first.included)
    assert named == set(paths)


# --- Ranked by what deserves review ------------------------------------------------------

CLASSES = [
    ("django/db/models/query.py", "source"),
    ("src/releases/manager.py", "source"),  # a folder named releases holding code
    ("django/conf/locale/fr/formats.py", "source"),  # code in a locale folder is code
    ("requirements/base.txt", "source"),
    ("requirements.txt", "source"),
    ("package.json", "source"),
    ("docs/conf.py", "source"),
    ("tests/queries/test_qs_combinators.py", "test"),
    ("web/src/app.spec.ts", "test"),
    ("pkg/server/handler_test.go", "test"),
    ("src/test/java/FooTest.java", "test"),
    ("docs/ref/models/querysets.txt", "documentation"),
    ("docs/topics/i18n/translation.txt", "documentation"),  # about translations
    ("docs/topics/testing/tools.txt", "documentation"),  # about tests
    ("tests/requirements/py3.txt", "test"),
    ("js_tests/admin/core.test.js", "test"),
    ("README.md", "documentation"),
    ("LICENSE", "documentation"),
    ("django/conf/locale/fr/LC_MESSAGES/django.po", "translation"),
    ("locale/django.pot", "translation"),
    ("app/i18n/de.yml", "translation"),
    ("ios/en.lproj/Localizable.strings", "translation"),
    ("web/locales/fr/messages.json", "translation"),
    ("docs/releases/5.0.txt", "release notes"),
    ("CHANGELOG.md", "release notes"),
    ("NEWS", "release notes"),
    ("changelog.d/1234.bugfix.rst", "release notes"),
    ("src/history.py", "source"),
    ("data/countries.csv", "data"),
    ("static/img/logo.svg", "data"),
    ("tests/data/response.json", "data"),
    ("terraform/.terraform.lock.hcl", "data"),
    ("deno.lock", "data"),
]


@pytest.mark.parametrize(("path", "expected"), CLASSES)
def test_a_changed_file_is_classed_by_what_it_deserves_of_a_review(path, expected):
    assert classify(path).name == expected


def test_source_comes_before_tests_before_docs_before_translations_whatever_their_size():
    diff = diff_parse(
        file_diff("locale/fr/LC_MESSAGES/django.po", 300)
        + file_diff("docs/releases/5.0.txt", 200)
        + file_diff("docs/topics/db.txt", 100)
        + file_diff("tests/test_models.py", 50)
        + file_diff("app/models.py", 10)
        + file_diff("app/views.py", 20)
    )
    paths = [f.path for f in diff.files]
    result = compress(diff, paths, 100_000)
    assert result.included[:4] == (
        "app/views.py",  # within a class, the larger change first
        "app/models.py",
        "tests/test_models.py",
        "docs/topics/db.txt",
    )
    # Release notes and translations are one class, last, by volume.
    assert result.included[4:] == ("locale/fr/LC_MESSAGES/django.po", "docs/releases/5.0.txt")
    # By change volume alone (the old order), the catalog came first.
    assert compress(diff, paths, 100_000, classify=None).included[0] == (
        "locale/fr/LC_MESSAGES/django.po"
    )


def test_what_is_clipped_after_ranking_low_says_how_it_was_ranked():
    catalogs = [f"django/conf/locale/{lang}/LC_MESSAGES/django.po" for lang in "abcdef"]
    diff = diff_parse(
        # Each under a quarter of the budget (not "enormous"), and larger than any source.
        "".join(file_diff(path, 80) for path in catalogs)
        + file_diff("docs/releases/5.0.txt", 70)
        + file_diff("data/cities.csv", 70)
        + file_diff("tests/test_forms.py", 60)
        + "".join(file_diff(f"django/forms/f{i}.py", 60) for i in range(6))
    )
    paths = [f.path for f in diff.files]
    budget = 7_000
    result = compress(diff, paths, budget)
    assert not result.complete and result.tokens <= budget
    assert {f"django/forms/f{i}.py" for i in range(6)} <= set(result.included)
    assert "tests/test_forms.py" in result.included
    reasons = {o.path: o.reason for o in result.omitted}
    for path in catalogs:
        assert reasons[path] == f"{BUDGET} (ranked low as a translation)"
    assert reasons["docs/releases/5.0.txt"].endswith("(ranked low as release notes)")
    assert reasons["data/cities.csv"].endswith("(ranked low as a data file)")
    source = sum(n for path, n in result.spent if classify(path).name == "source")
    before = compress(diff, paths, budget, classify=None)
    source_before = sum(n for path, n in before.spent if classify(path).name == "source")
    # By change volume alone the catalogs came first and the code was left out.
    assert source_before == 0 < source
    assert sum(n for _, n in result.spent) == result.tokens


def test_a_tests_file_left_out_for_room_says_tests_rank_after_source():
    diff = diff_parse(file_diff("app/core.py", 200) + file_diff("tests/test_core.py", 200))
    one = tokens(diff.get("app/core.py").header) + tokens(diff.get("app/core.py").hunks[0].text)
    result = compress(diff, ["app/core.py", "tests/test_core.py"], one + 10)
    assert result.included == ("app/core.py",)
    [left] = result.omitted
    assert left.path == "tests/test_core.py"
    assert left.reason.endswith("(tests rank after source)")

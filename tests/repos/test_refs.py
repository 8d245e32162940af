"""The one reader of `owner/repo#12` and its other spellings (repos/refs.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from repos.refs import Ref, ref_parse

NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-",
               min_size=1, max_size=20).filter(lambda s: s not in (".", ".."))  # fmt: skip
NUMBER = st.integers(min_value=1, max_value=999_999_999)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("acme/shop#7", Ref("acme/shop", 7)),
        ("  acme/shop # 7 ", Ref("acme/shop", 7)),
        ("acme/shop 7", Ref("acme/shop", 7)),
        ("acme/shop/pull/7", Ref("acme/shop", 7)),
        ("acme/shop/pulls/7", Ref("acme/shop", 7)),
        ("https://github.com/acme/shop/pull/7", Ref("acme/shop", 7)),
        ("https://github.com/acme/shop/pull/7/files", Ref("acme/shop", 7)),
        ("https://github.com/acme/shop/pull/7#discussion_r1", Ref("acme/shop", 7)),
        ("http://ghe.example.com/acme/shop/pull/7?w=1", Ref("acme/shop", 7)),
        ("acme/shop#007", Ref("acme/shop", 7)),
        ("acme/my.repo-2", Ref("acme/my.repo-2")),
        ("acme/shop/", Ref("acme/shop")),
        ("https://github.com/acme/shop", Ref("acme/shop")),
    ],
)
def test_every_spelling_of_a_pull_request_or_repository_is_read(text, expected):
    assert ref_parse(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        None,
        "acme",
        "acme/",
        "/shop#1",
        "acme/shop#",
        "acme/shop#0",
        "acme/shop/pull/0",
        "acme/shop 0",
        "acme/shop#-3",
        "acme/shop#+3",
        "acme/shop#1.5",
        "acme/shop#abc",
        "acme/shop#1234567890",
        "acme /shop#1",
        "ac me/shop#1",
        "acme/shop\n7",
        "acme/shop/issues/7",
        "acme/shop/pull/",
        "acme/shop/pull/7 extra",
        "github.com/acme/shop",
        "ftp://github.com/acme/shop/pull/7",
        "acme/../pull/7",
        "acme/shop#7#8",
        "drop table; --",
    ],
)
def test_what_names_no_pull_request_is_none(text):
    assert ref_parse(text) is None


@given(owner=NAME, repo=NAME, number=NUMBER)
def test_the_three_forms_of_a_pull_request_name_the_same_one(owner, repo, number):
    expected = Ref(f"{owner}/{repo}", number)
    for text in (
        f"{owner}/{repo}#{number}",
        f"{owner}/{repo}/pull/{number}",
        f"https://github.com/{owner}/{repo}/pull/{number}",
    ):
        assert ref_parse(text) == expected
        assert ref_parse(f" \t{text} ") == expected
    assert str(expected) == f"{owner}/{repo}#{number}"


@given(owner=NAME, repo=NAME, number=st.integers(max_value=0))
def test_a_number_that_is_not_positive_names_nothing(owner, repo, number):
    assert ref_parse(f"{owner}/{repo}#{number}") is None
    assert ref_parse(f"{owner}/{repo}/pull/{number}") is None


@given(st.text(max_size=60))
def test_any_text_is_read_without_error_and_a_ref_it_names_prints_back(text):
    found = ref_parse(text)
    if found is not None:
        assert found.number is None or found.number > 0
        assert ref_parse(str(found)) == found

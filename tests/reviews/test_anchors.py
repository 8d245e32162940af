"""Finding the review comments GitHub refuses when it refuses a review whole
(reviews/validation/anchors.py): by halves, in pending reviews deleted at once, within a bound."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from repos.github import GitHubError, ReviewInfo
from reviews.validation.anchors import NOT_LOOKED, comments_sort, probe_marker

LINE_OUTSIDE = "Pull request review thread line must be part of the diff"
WHERE = {"installation_id": 1, "repository_id": 2, "full_name": "acme/shop"}


@dataclass
class Gateway:
    """GitHub as the sorting sees it: a pending review with any refused comment is
    refused whole (422, naming no comment), one pending review per user at a time."""

    bad: set[int]
    pending: list[ReviewInfo] = field(default_factory=list)
    tried: list[list[int]] = field(default_factory=list)
    deleted: list[int] = field(default_factory=list)

    def review_pending_create(self, repo, *, comments, body, **_):
        lines = [c["line"] for c in comments]
        self.tried.append(lines)
        if self.pending:
            raise GitHubError("Could not try a pending review: GitHub answered 422", permanent=True, status=422, data={
                "message": "Unprocessable Entity",
                "errors": ["User can only have one pending review per pull request"]})  # fmt: skip
        if self.bad & set(lines):
            raise GitHubError("422", permanent=True, status=422,
                              data={"message": "Unprocessable Entity", "errors": [LINE_OUTSIDE]})  # fmt: skip
        review = ReviewInfo(id=len(self.tried), body=body, state="PENDING",
                            user_login="tasuku[bot]", user_type="Bot")  # fmt: skip
        self.pending.append(review)
        return review

    def review_pending_delete(self, repo, *, review_id, **_):
        self.deleted.append(review_id)
        self.pending = [r for r in self.pending if r.id != review_id]

    def reviews_list(self, repo, **_):
        return list(self.pending)

    def posted_by_us(self, user):
        return user["login"] == "tasuku[bot]"


def sort(gateway, count, **kwargs):
    comments = [{"path": "a.py", "line": n, "body": "x"} for n in range(count)]
    return comments_sort(gateway, WHERE, 7, "f" * 40, comments, reason=LINE_OUTSIDE,
                         marker=probe_marker(5), **kwargs)  # fmt: skip


@pytest.mark.parametrize(("count", "bad"), [(1, {0}), (3, {1}), (16, {0, 9}), (40, {39})])
def test_it_finds_exactly_the_refused_comments_and_leaves_no_pending_review(count, bad):
    gateway = Gateway(bad=bad)
    sorting = sort(gateway, count)
    assert set(sorting.refused) == bad
    assert set(sorting.refused.values()) == {LINE_OUTSIDE}
    assert sorting.accepted == sorted(set(range(count)) - bad)
    assert gateway.pending == []
    # by halves: about log2(count) tries for each refused comment, never one by one
    assert sorting.probes <= max(1, 2 * len(bad) * count.bit_length())


def test_a_comment_is_called_refused_only_when_github_refused_it_alone():
    # The review's 422 was not GitHub's last word: tried again, every comment is taken.
    gateway = Gateway(bad=set())
    sorting = sort(gateway, 5)
    assert sorting.refused == {} and sorting.accepted == [0, 1, 2, 3, 4]


def test_the_tries_are_bounded_and_what_is_left_counts_as_refused():
    gateway = Gateway(bad=set(range(0, 40, 3)))
    sorting = sort(gateway, 40, limit=6)
    assert sorting.probes == len(gateway.tried) == 6
    assert set(sorting.refused) >= gateway.bad  # none refused is ever taken
    assert set(sorting.accepted).isdisjoint(gateway.bad)
    assert NOT_LOOKED.format(n=6) in sorting.refused.values()
    assert sorted(sorting.accepted + list(sorting.refused)) == list(range(40))


def test_a_probe_a_dead_worker_left_is_deleted_first():
    left = ReviewInfo(id=99, body=probe_marker(5), state="PENDING", user_login="tasuku[bot]",
                      user_type="Bot")  # fmt: skip
    someone_elses = ReviewInfo(id=98, body=probe_marker(5), state="PENDING",
                               user_login="mallory", user_type="User")  # fmt: skip
    gateway = Gateway(bad={2}, pending=[left])
    gateway.reviews_list = lambda repo, **_: [left, someone_elses]  # type: ignore[method-assign]
    sorting = sort(gateway, 4)
    assert 99 in gateway.deleted and 98 not in gateway.deleted
    assert set(sorting.refused) == {2}


def test_a_rate_limit_while_sorting_is_raised_as_weather():
    class Limited(Gateway):
        def review_pending_create(self, repo, **kwargs):
            raise GitHubError("was submitted too quickly", permanent=False, status=422,
                              retry_after=60.0, code="github-rate-limit")  # fmt: skip

    with pytest.raises(GitHubError) as raised:
        sort(Limited(bad=set()), 4)
    assert raised.value.code == "github-rate-limit"


def test_a_probe_left_behind_that_github_names_is_deleted_and_the_try_repeated():
    left = ReviewInfo(id=99, body=probe_marker(5), state="PENDING", user_login="tasuku[bot]",
                      user_type="Bot")  # fmt: skip
    gateway = Gateway(bad={1}, pending=[left])
    listed = iter([[], [left]])  # not listed yet when the sorting began
    gateway.reviews_list = lambda repo, **_: next(listed, gateway.pending)  # type: ignore[method-assign]
    sorting = sort(gateway, 3)
    assert gateway.deleted[0] == 99
    assert set(sorting.refused) == {1} and sorting.accepted == [0, 2]
    assert gateway.pending == []

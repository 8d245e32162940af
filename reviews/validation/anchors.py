"""Which of a review's inline comments GitHub refuses, when it refuses the review.

GitHub answers a review with one bad anchor (a line outside the diff, a path the pull
request does not touch) with a 422 for the whole review, and its error does not say
which comment was at fault. So the comments are tried in halves as *pending* reviews —
seen by nobody, notifying nobody, deleted at once — until each refused comment is
found, within a bound on the tries; the review is then posted with the others inline
(reviews/publication/review.py). docs/reviews.md, *When GitHub refuses a comment*, says why.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from repos.github import GitHubError, RepoRef

logger = logging.getLogger(__name__)

# Pending reviews tried at most, each a POST and a DELETE at the installation's write
# pace: enough to find two refused comments among a hundred.
MAX_PROBES = 16
# What GitHub answers when a pending review of this user is already there.
ONE_PENDING = "one pending review"
NOT_LOOKED = "not checked: Tasuku stopped trying comments one by one after {n} tries"


@dataclass
class Sorting:
    """The comments (by index) GitHub took, and those it refused with its reason."""

    accepted: list[int] = field(default_factory=list)
    refused: dict[int, str] = field(default_factory=dict)
    probes: int = 0


def probe_marker(run_pk: int) -> str:
    """The body of a run's pending probes: never its review's marker (a probe must not
    be taken for the review), and found again to delete one a dead worker left."""
    return f"<!-- tasuku:probe:{run_pk} -->"


def comments_sort(
    gateway: Any,
    repo: RepoRef,
    number: int,
    commit_sha: str,
    comments: list[dict[str, Any]],
    *,
    reason: str,
    marker: str,
    check: Callable[[], None] = lambda: None,
    limit: int = MAX_PROBES,
) -> Sorting:
    """Sort `comments`, which GitHub refused together for `reason`, into those it takes
    and those it refuses (with its words), by halves. Once `limit` probes are spent,
    what is left unsorted counts as refused. A rate limit or an outage is raised, as for
    any call.

    1. Delete any pending probe of this run a dead worker left.
    2. Halve a refused group and try its left half: taken, it is good and the right half
       holds the fault (not tried whole); refused, both halves are sorted again. A comment
       is called refused only once GitHub refused it alone, in its own words.
    """
    sorting = Sorting()
    probes_delete(gateway, repo, number, marker)
    spent = NOT_LOOKED.format(n=limit)

    def probe(indices: list[int]) -> str | None:
        check()
        sorting.probes += 1
        return _probe(gateway, repo, number, commit_sha, [comments[i] for i in indices], marker)

    # (comment indices, GitHub's reason when the group is known to hold a refused one,
    # whether that reason was GitHub's answer to this very group)
    todo: list[tuple[list[int], str | None, bool]] = [(list(range(len(comments))), reason, True)]
    while todo:
        group, said, own = todo.pop(0)
        if said is None or (len(group) == 1 and not own):
            # Tried alone before it is called refused: GitHub's words for this comment,
            # and a 422 GitHub does not repeat refuses nothing.
            if sorting.probes >= limit:
                sorting.refused.update(dict.fromkeys(group, said or spent))
                continue
            said = probe(group)
            if said is None:
                sorting.accepted += group
                continue
        if len(group) == 1:
            sorting.refused[group[0]] = said
            continue
        if sorting.probes >= limit:
            sorting.refused.update(dict.fromkeys(group, spent))
            continue
        left, right = group[: len(group) // 2], group[len(group) // 2 :]
        left_said = probe(left)
        if left_said is None:
            sorting.accepted += left
            todo.insert(0, (right, said, False))  # the fault is on the right
        else:
            todo[:0] = [(left, left_said, True), (right, None, False)]
    sorting.accepted.sort()
    logger.info(
        "review comments sorted in %d probes: %d taken, %d refused",
        sorting.probes,
        len(sorting.accepted),
        len(sorting.refused),
    )
    return sorting


def _probe(
    gateway: Any,
    repo: RepoRef,
    number: int,
    commit_sha: str,
    comments: list[dict[str, Any]],
    marker: str,
) -> str | None:
    """None when GitHub takes `comments` in a pending review (deleted at once); else
    the reason it gave for refusing them."""
    for first in (True, False):
        try:
            pending = gateway.review_pending_create(
                repo, number=number, commit_sha=commit_sha, body=marker, comments=comments
            )
        except GitHubError as exc:
            if exc.status != 422 or not exc.permanent:
                raise
            if first and ONE_PENDING in f"{exc.message} {refusal_reason(exc)}":
                # Another pending review of this App's is there: a probe a dead worker
                # left. Deleted, and this one tried again.
                probes_delete(gateway, repo, number, marker)
                continue
            return refusal_reason(exc)
        gateway.review_pending_delete(repo, number=number, review_id=pending.id)
        return None
    return "GitHub kept a pending review of this App's that Tasuku could not delete"


def probes_delete(gateway: Any, repo: RepoRef, number: int, marker: str) -> None:
    """Delete this App's pending reviews on the pull request that are probes."""
    for review in gateway.reviews_list(repo, number=number):
        ours = gateway.posted_by_us({"login": review.user_login, "type": review.user_type})
        if review.state == "PENDING" and marker in review.body and ours:
            gateway.review_pending_delete(repo, number=number, review_id=review.id)


def refusal_reason(exc: GitHubError) -> str:
    """GitHub's own words for a refusal: its `errors`, else its message."""
    data = exc.data if isinstance(exc.data, dict) else {}
    errors = data.get("errors")
    if isinstance(errors, list) and errors:
        said = [e if isinstance(e, str) else str(e.get("message") or "") for e in errors]
        text = "; ".join(s for s in said if s)
        if text:
            return text[:300]
    return str(data.get("message") or exc.message)[:300]

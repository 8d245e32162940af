"""The author's App posts with a token of its own per post: minted for it, scoped to the
one repository, revoked right after — so no agent working as that App can reuse one."""

from __future__ import annotations

import logging

import pytest
import requests

from reviews.markers import marker
from reviews.passes.author import author_poster
from tests.gitworld import REPO
from tests.reviews.passes.conftest import AUTHOR_BOT

pytestmark = pytest.mark.django_db


def _mints(fake) -> list:
    return [c for c in fake.calls if c.method == "POST" and c.path.endswith("/access_tokens")
            and c.path.startswith("/app/installations/61/")]  # fmt: skip


def test_each_post_as_the_author_uses_a_new_token_that_is_revoked_after_it(passes):
    fake = passes.world.fake
    fake.calls.clear()
    poster = author_poster()
    poster.comment(REPO, 7, "First answer.", marker("answer", "one"))
    poster.comment(REPO, 7, "Second answer.", marker("answer", "two"))

    posts = [c for c in fake.calls if c.method == "POST" and c.path.endswith("/7/comments")]
    assert len(posts) == 2 and len(_mints(fake)) == 2
    # Each post carried a token of its own, and that token was revoked right after it.
    assert posts[0].token != posts[1].token
    assert fake.revoked_tokens == [posts[0].token, posts[1].token]
    # Scoped to the one repository the post was for.
    assert all(m.body.get("repository_ids") == [passes.world.repo.id] for m in _mints(fake))
    # A revoked token opens nothing.
    answer = requests.get(
        f"{fake.url}/repos/{REPO}", headers={"Authorization": f"token {posts[0].token}"}, timeout=5
    )
    assert answer.status_code == 401
    authors = [c["user"]["login"] for c in fake.issue_comments_of(REPO, 7)]
    assert authors.count(AUTHOR_BOT) == 2


def test_a_token_github_would_not_revoke_is_logged_and_the_post_stands(passes, caplog):
    fake = passes.world.fake
    fake.inject(status=500, method="DELETE", path=r"^/installation/token$")
    with caplog.at_level(logging.WARNING, logger="repos.github.transport"):
        posted = author_poster().comment(REPO, 7, "An answer.", marker("answer", "three"))
    assert posted
    assert "could not revoke a single-use token" in caplog.text
    assert [c["body"].splitlines()[0] for c in fake.issue_comments_of(REPO, 7)
            if c["user"]["login"] == AUTHOR_BOT] == ["An answer."]  # fmt: skip


def test_the_reviewer_apps_tokens_are_still_cached_across_calls(passes):
    """Only the author's App spends a token per post: the reviewer's App is never an
    agent's identity, and its tokens are reused until shortly before they expire."""
    from repos import github

    fake = passes.world.fake
    gateway = github.gateway()
    where = {"installation_id": passes.world.repo.installation_id,
             "repository_id": passes.world.repo.id, "full_name": REPO}  # fmt: skip
    gateway.pull_request_get(**where, number=7)
    fake.calls.clear()
    gateway.pull_request_get(**where, number=7)
    assert not [c for c in fake.calls if c.path.endswith("/access_tokens")]
    assert fake.revoked_tokens == []

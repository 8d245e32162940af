"""Both Apps post with a token of its own per post: minted for it, scoped to the one
repository, revoked right after — so no agent working as the author's App can reuse one,
and no token that could approve the pull request outlives the post it was made for."""

from __future__ import annotations

import logging

import pytest
import requests

from repos.github import RepoRef
from reviews.passes.author import author_poster
from reviews.text.markers import marker
from tests.fakes.models import ToolCall
from tests.gitworld import INSTALLATION, REPO
from tests.helpers import drain_queue
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


def test_the_reviewer_apps_approval_is_posted_with_a_token_minted_for_it_and_revoked_after(
    passes,
):
    """The reviewer's App approves: each of its posts — the approval above all — is made
    with a token of its own, revoked right after it, and the token its reads share cannot
    post, so no token that could approve the pull request outlives the post it was for."""
    fake = passes.world.fake
    passes.claude.script(ToolCall("submit_review", {"findings": []}))
    task = passes.create_task()
    fake.calls.clear()
    fake.revoked_tokens.clear()
    assert passes.done(task, passes.world.head).status_code == 202
    drain_queue()

    [approval] = [c for c in fake.calls if c.method == "POST" and c.path.endswith("/7/reviews")]
    assert approval.body["event"] == "APPROVE"
    reviewer = {t for t, minted in fake.tokens.items() if minted.installation_id == INSTALLATION}
    writes = [c for c in fake.calls if c.method in ("POST", "PATCH", "PUT", "DELETE")
              and c.path.startswith("/repos/")]  # fmt: skip
    assert writes and approval in writes
    # Every post carried a token of its own, revoked right after it: none is left.
    assert len({c.token for c in writes}) == len(writes)
    assert all(c.token in fake.revoked_tokens for c in writes)
    assert not reviewer & {c.token for c in writes}
    answer = requests.get(
        f"{fake.url}/repos/{REPO}", headers={"Authorization": f"token {approval.token}"}, timeout=5
    )
    assert answer.status_code == 401
    # Minted for the one repository, with just what the post needs.
    before = fake.calls[: fake.calls.index(approval)]
    mint = [c for c in before if c.path.endswith("/access_tokens")][-1]
    assert mint.body == {"repository_ids": [passes.world.repo.id],
                         "permissions": {"pull_requests": "write"}}  # fmt: skip
    # The token the reads share (still cached, used again) can read and nothing more.
    reads = {c.token for c in fake.calls if c.method == "GET" and c.token in reviewer}
    assert reads
    for token in reads:
        assert set(fake.tokens[token].permissions.values()) == {"read"}


def test_the_reviewer_apps_reads_still_share_a_cached_token(passes):
    """Only posts spend a token each: the reviewer App's reads reuse one until shortly
    before it expires."""
    from repos import github

    fake = passes.world.fake
    gateway = github.gateway()
    where = RepoRef(passes.world.repo.installation_id, passes.world.repo.id, REPO)
    gateway.pull_request_get(where, number=7)
    fake.calls.clear()
    gateway.pull_request_get(where, number=7)
    assert not [c for c in fake.calls if c.path.endswith("/access_tokens")]
    assert fake.revoked_tokens == []

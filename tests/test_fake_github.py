"""The fake GitHub behaves like GitHub where Tasuku depends on it (checked through the
real PyGithub client)."""

from __future__ import annotations

import time

import pytest
from github import Auth, Github, GithubException

from repos import github
from tests.fakes.github import Pull, PullFile


@pytest.fixture
def world(fake_github):
    fake_github.add_installation(5, "acme")
    fake_github.add_repo("acme/big", installation_id=5, repo_id=77)
    files = [PullFile(f"src/file{i:03}.py") for i in range(250)]
    fake_github.add_pull(
        "acme/big", Pull(number=1, title="Big", head_sha="c" * 40, base_sha="d" * 40, files=files)
    )
    return fake_github


def client(fake_github, **token_args) -> Github:
    token = github.gateway().installation_token(5, **token_args)
    return Github(
        auth=Auth.Token(token.token),
        base_url=fake_github.url,
        retry=None,
        per_page=100,
        seconds_between_requests=None,
        seconds_between_writes=None,
    )


def test_pull_request_files_paginate_with_absolute_link_headers_on_its_own_host(world):
    files = client(world).get_repo("acme/big").get_pull(1).get_files()
    names = [f.filename for f in files]
    assert names == [f"src/file{i:03}.py" for i in range(250)]
    pages = world.requests("GET", r"/pulls/1/files$")
    assert [c.query.get("page", ["1"])[0] for c in pages] == ["1", "2", "3"]


def test_a_token_scoped_to_another_repository_gets_404(world):
    world.add_repo("acme/small", installation_id=5, repo_id=78)
    scoped = client(world, repository_ids=(78,))
    with pytest.raises(GithubException) as caught:
        assert scoped.get_repo("acme/big").get_pull(1).title
    assert caught.value.status == 404


def test_a_token_without_the_permission_gets_403(world):
    read_only = client(world, permissions={"checks": "read"})
    with pytest.raises(GithubException) as caught:
        read_only.get_repo("acme/big").create_check_run(name="x", head_sha="c" * 40)
    assert caught.value.status == 403
    assert caught.value.data["message"] == "Resource not accessible by integration"


def test_an_unknown_or_expired_token_gets_401_bad_credentials(world):
    bogus = Github(auth=Auth.Token("ghs_nope"), base_url=world.url, retry=None)
    with pytest.raises(GithubException) as caught:
        assert bogus.get_repo("acme/big").get_pull(1).title
    assert (caught.value.status, caught.value.data["message"]) == (401, "Bad credentials")
    good = client(world)
    world.expire_tokens()
    with pytest.raises(GithubException) as caught:
        assert good.get_repo("acme/big").get_pull(1).title
    assert caught.value.status == 401


def test_a_jwt_expiring_more_than_ten_minutes_ahead_is_refused(world, test_app):
    import jwt

    now = int(time.time())
    token = jwt.encode(
        {"iat": now - 60, "exp": now + 3600, "iss": str(test_app.app_id)},
        test_app.private_key,
        algorithm="RS256",
    )
    import requests

    response = requests.get(
        f"{world.url}/app", headers={"Authorization": f"Bearer {token}"}, timeout=5
    )
    assert response.status_code == 401
    assert "too far in the future" in response.json()["message"]


def test_invalid_check_runs_get_422_with_githubs_message(world):
    repo = client(world).get_repo("acme/big")
    with pytest.raises(GithubException) as caught:
        repo.create_check_run(name="x", head_sha="c" * 40, status="waiting")
    assert caught.value.status == 422
    with pytest.raises(GithubException) as caught:
        repo.create_check_run(name="x", head_sha="e" * 40)
    assert "No commit found for SHA" in caught.value.data["message"]
    with pytest.raises(GithubException) as caught:
        repo.create_check_run(name="x", head_sha="c" * 40, status="completed")
    assert "conclusion" in caught.value.data["message"]


def test_injected_failures_apply_to_the_next_matching_calls_only(world):
    world.inject(2, status=503, method="GET", path=r"/pulls/1$")
    repo = client(world).get_repo("acme/big")
    for _ in range(2):
        with pytest.raises(GithubException) as caught:
            assert repo.get_pull(1).title
        assert caught.value.status == 503
    assert repo.get_pull(1).title == "Big"

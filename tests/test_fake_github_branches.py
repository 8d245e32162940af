"""The fake GitHub's Git Data API and pull requests opened through it behave as GitHub
documents them (tests/fakes/github/branches.py), through the real PyGithub requester."""

from __future__ import annotations

import pytest
from github import Auth, Github, GithubException

from repos import github

REPO = "acme/tools"


@pytest.fixture
def world(fake_github):
    fake_github.add_installation(5, "acme")
    _, git = fake_github.add_git_repo(REPO, installation_id=5, repo_id=77)
    base = git.commit({"a.txt": "one\n", "run.sh": "#!/bin/sh\necho hi\n"}, branch="main")
    head = git.commit({"a.txt": "two\n"}, parent=base, branch="feature")
    return fake_github, git, base, head


def call(fake_github, method: str, path: str, body=None, **token_args):
    token = github.gateway().installation_token(5, **token_args)
    client = Github(auth=Auth.Token(token.token), base_url=fake_github.url, retry=None)
    return client.requester.requestJsonAndCheck(method, f"/repos/{REPO}{path}", input=body)[1]


def refused(fake_github, method, path, body=None, **token_args) -> GithubException:
    with pytest.raises(GithubException) as caught:
        call(fake_github, method, path, body, **token_args)
    return caught.value


def test_a_tree_over_a_base_tree_and_a_commit_on_it_are_git_objects(world):
    fake, git, _, head = world
    tree = call(fake, "GET", f"/git/commits/{head}")["tree"]["sha"]
    made = call(fake, "POST", "/git/trees", {"base_tree": tree, "tree": [
        {"path": "a.txt", "mode": "100644", "type": "blob", "content": "three\n"}]})  # fmt: skip
    commit = call(fake, "POST", "/git/commits",
                  {"message": "fix", "tree": made["sha"], "parents": [head]})  # fmt: skip
    assert git.git("show", f"{commit['sha']}:a.txt") == "three\n"
    assert git.git("show", f"{commit['sha']}:run.sh").startswith("#!/bin/sh")  # kept
    assert commit["author"]["name"] == "tasuku-test[bot]"
    entries = {e["path"]: e["mode"] for e in call(fake, "GET", f"/git/trees/{made['sha']}")["tree"]}
    assert entries["run.sh"] == "100755"


def test_refs_refuse_what_github_refuses(world):
    fake, _, base, head = world
    assert (
        refused(fake, "POST", "/git/refs", {"ref": "refs/heads/main", "sha": head}).data["message"]
        == "Reference already exists"
    )
    # main → head is a fast-forward; back again is not, unless forced
    call(fake, "PATCH", "/git/refs/heads/main", {"sha": head})
    assert (
        refused(fake, "PATCH", "/git/refs/heads/main", {"sha": base}).data["message"]
        == "Update is not a fast forward"
    )
    call(fake, "PATCH", "/git/refs/heads/main", {"sha": base, "force": True})
    assert call(fake, "GET", "/git/ref/heads/main")["object"]["sha"] == base
    assert refused(fake, "GET", "/git/ref/heads/nonesuch").status == 404
    assert refused(fake, "DELETE", "/git/refs/heads/nonesuch").status == 422
    assert refused(fake, "DELETE", "/git/refs/heads/main").status == 422  # the default branch


def test_writing_git_objects_needs_contents_write(world):
    fake, _, _, head = world
    tree = call(fake, "GET", f"/git/commits/{head}")["tree"]["sha"]
    error = refused(fake, "POST", "/git/trees", {"base_tree": tree, "tree": []},
                    permissions={"contents": "read"})  # fmt: skip
    assert error.status == 403


def test_pull_requests_opened_through_the_api_follow_their_branches(world):
    fake, git, _, head = world
    fix = git.commit({"a.txt": "fixed\n"}, parent=head, branch="tasuku/fix/pr-1")
    pull = call(fake, "POST", "/pulls", {"title": "Fixes", "head": "tasuku/fix/pr-1",
                                         "base": "feature"})  # fmt: skip
    assert (pull["head"]["sha"], pull["base"]["ref"], pull["user"]["type"]) == (
        fix,
        "feature",
        "Bot",
    )
    again = refused(fake, "POST", "/pulls", {"title": "Fixes", "head": "acme:tasuku/fix/pr-1",
                                             "base": "feature"})  # fmt: skip
    assert (
        again.data["errors"][0]["message"]
        == "A pull request already exists for acme:tasuku/fix/pr-1."
    )
    listed = call(fake, "GET", "/pulls?state=all&head=acme:tasuku/fix/pr-1")
    assert [p["number"] for p in listed] == [pull["number"]]
    # the branch moves: the pull request's head follows; deleted: it is closed
    later = git.commit({"a.txt": "fixed again\n"}, parent=head)
    call(fake, "PATCH", "/git/refs/heads/tasuku/fix/pr-1", {"sha": later, "force": True})
    assert call(fake, "GET", f"/pulls/{pull['number']}")["head"]["sha"] == later
    call(fake, "DELETE", "/git/refs/heads/tasuku/fix/pr-1")
    assert call(fake, "GET", f"/pulls/{pull['number']}")["state"] == "closed"


def test_a_pull_request_needs_commits_and_existing_branches(world):
    fake, _, _, _ = world
    nothing = refused(fake, "POST", "/pulls", {"title": "x", "head": "main", "base": "feature"})
    assert nothing.data["errors"][0]["message"] == "No commits between feature and main"
    missing = refused(fake, "POST", "/pulls", {"title": "x", "head": "gone", "base": "main"})
    assert missing.data["errors"] == [
        {"resource": "PullRequest", "field": "head", "code": "invalid"}
    ]

"""The fake GitHub behaves like GitHub where Tasuku depends on it (checked through the
real PyGithub client)."""

from __future__ import annotations

import dataclasses
import gzip
import subprocess
import time

import pytest
from github import Auth, Github, GithubException

from repos import github
from repos.github import RepoRef
from sandbox import git as sandbox_git
from tests.fakes.github import Pull, PullFile
from tests.fakes.github import git as fake_git
from tests.gitworld import REPO, REPO_ID, world_build


@pytest.fixture
def world(fake_github):
    fake_github.add_installation(5, "acme")
    fake_github.add_repo("acme/big", installation_id=5, repo_id=77)
    files = [PullFile(f"src/file{i:03}.py") for i in range(250)]
    fake_github.add_pull(
        "acme/big", Pull(number=1, title="Big", head_sha="c" * 40, base_sha="d" * 40, files=files)
    )
    return fake_github


def client(fake_github, *, lazy: bool = False, **token_args) -> Github:
    token = github.gateway().installation_token(5, **token_args)
    return Github(
        auth=Auth.Token(token.token),
        base_url=fake_github.url,
        retry=None,
        per_page=100,
        seconds_between_requests=None,
        seconds_between_writes=None,
        lazy=lazy,  # lazy: no GET of a commit before listing its checks or statuses
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
    read_only = client(world, lazy=True, permissions={"checks": "read"})
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
    # A status GitHub's description does not allow: the contract check is told to expect it.
    with world.contract.tolerated(), pytest.raises(GithubException) as caught:
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


# --- checks of other Apps, commit statuses, branch protection, people's reviews ---


def rest(fake_github, path: str, **token_args):
    """GET `path` with an installation token, as raw JSON (status, body, headers)."""
    import requests

    token = github.gateway().installation_token(5, **token_args)
    response = requests.get(
        f"{fake_github.url}{path}", headers={"Authorization": f"token {token.token}"}, timeout=5
    )
    return response.status_code, response.json(), response.headers


def test_branch_protection_answers_like_github(world):
    world.installations[5].permissions["administration"] = "read"
    url = "/repos/acme/big/branches/main/protection/required_status_checks"
    assert rest(world, url)[:2] == (
        404,
        {
            "message": "Branch not protected",
            "documentation_url": "https://docs.github.com/rest",
            "status": "404",
        },
    )
    world.protect("acme/big", "main", checks=[])
    assert rest(world, url)[1]["message"] == "Required status checks not enabled"
    world.protect("acme/big", "main", checks=["build", "lint"])
    status, body, _ = rest(world, url)
    assert status == 200
    assert body["contexts"] == ["build", "lint"]
    assert body["checks"] == [
        {"context": "build", "app_id": None},
        {"context": "lint", "app_id": None},
    ]
    status, body, _ = rest(world, url, permissions={"checks": "read"})
    assert (status, body["message"]) == (403, "Resource not accessible by integration")


def test_check_runs_of_other_apps_list_newest_first_per_name_with_pages(world):
    for i in range(130):
        world.ci_check_run("acme/big", "c" * 40, f"job {i:03}")
    world.ci_check_run("acme/big", "c" * 40, "job 000", conclusion="failure")  # a re-run
    url = "/repos/acme/big/commits/" + "c" * 40 + "/check-runs?per_page=100"
    status, body, headers = rest(world, url)
    assert (status, body["total_count"], len(body["check_runs"])) == (200, 130, 100)
    assert 'rel="next"' in headers["Link"] and "page=2" in headers["Link"]
    newest = body["check_runs"][0]
    assert (newest["name"], newest["conclusion"], newest["app"]["slug"]) == (
        "job 000",
        "failure",
        "github-actions",
    )
    assert [p["number"] for p in newest["pull_requests"]] == [1]
    assert rest(world, url + "&filter=all")[1]["total_count"] == 131
    page_2 = rest(world, url + "&page=2")[1]
    assert len(page_2["check_runs"]) == 30
    # PyGithub follows the Link headers to the end.
    commit = client(world, lazy=True).get_repo("acme/big").get_commit("c" * 40)
    runs = commit.get_check_runs()
    assert len(list(runs)) == 130


def test_commit_statuses_are_posted_and_combined_like_github(world):
    world.installations[5].permissions["statuses"] = "write"
    repo = client(world, lazy=True).get_repo("acme/big")
    commit = repo.get_commit("c" * 40)
    commit.create_status("pending", context="ci/build")
    posted = commit.create_status(
        "success", target_url="http://ci/1", description="ok", context="ci/build"
    )
    assert posted.creator.login == "tasuku-test[bot]"
    commit.create_status("error", context="ci/lint")
    combined = commit.get_combined_status()
    assert combined.state == "failure"
    assert [(s.context, s.state) for s in combined.statuses] == [
        ("ci/build", "success"),
        ("ci/lint", "error"),
    ]
    with world.contract.tolerated(), pytest.raises(GithubException) as caught:
        commit.create_status("passed")  # not a state GitHub's description allows
    assert caught.value.status == 422
    with pytest.raises(GithubException) as caught:
        repo.get_commit("e" * 40).create_status("success")
    assert "No commit found for SHA" in caught.value.data["message"]
    read_only = client(world, lazy=True, permissions={"checks": "read"})
    with pytest.raises(GithubException) as caught:
        assert read_only.get_repo("acme/big").get_commit("c" * 40).get_combined_status().state
    assert caught.value.status == 403


def test_a_commit_without_statuses_is_pending(world):
    world.installations[5].permissions["statuses"] = "read"
    status, body, _ = rest(world, "/repos/acme/big/commits/" + "c" * 40 + "/status")
    assert (status, body["state"], body["statuses"], body["total_count"]) == (
        200,
        "pending",
        [],
        0,
    )


def test_a_persons_review_lists_with_the_pull_requests_reviews(world):
    review = world.person_review(
        "acme/big", 1, login="maria", body="Looks off", state="CHANGES_REQUESTED"
    )
    listed = client(world).get_repo("acme/big").get_pull(1).get_reviews()
    assert [(r.id, r.user.login, r.state, r.body) for r in listed] == [
        (review["id"], "maria", "CHANGES_REQUESTED", "Looks off")
    ]
    assert review["author_association"] == "MEMBER"


def test_webhook_payload_builders_describe_the_fakes_state(world):
    from tests.helpers import check_run_payload, check_suite_payload, pull_request_review_payload

    repo, pull = world.repos["acme/big"], world.repos["acme/big"].pulls[1]
    review = world.person_review("acme/big", 1, login="maria", body="Nice")
    data = pull_request_review_payload(world, repo, pull, review)
    assert (data["action"], data["installation"]["id"]) == ("submitted", 5)
    assert (data["review"]["id"], data["review"]["state"], data["review"]["body"]) == (
        review["id"],
        "commented",
        "Nice",
    )
    assert data["pull_request"]["head"]["sha"] == "c" * 40

    world.ci_check_run("acme/big", "c" * 40, "lint", conclusion="failure", summary="2 errors")
    run = world.ci_check_run("acme/big", "c" * 40, "build")
    data = check_run_payload(world, repo, run)
    check = data["check_run"]
    assert (check["id"], check["name"], check["app"]["slug"]) == (run.id, "build", "github-actions")
    assert [p["number"] for p in check["pull_requests"]] == [1]
    assert check["check_suite"]["conclusion"] == "failure"  # lint failed in the same suite

    suite = check_suite_payload(world, repo, head_sha="c" * 40)["check_suite"]
    assert (suite["status"], suite["conclusion"], suite["latest_check_runs_count"]) == (
        "completed",
        "failure",
        2,
    )
    assert suite["id"] == check["check_suite"]["id"]
    assert [p["number"] for p in suite["pull_requests"]] == [1]


# --- rate limits by GitHub's clock ---


def test_every_answer_carries_the_installations_quota_and_a_spent_one_is_refused_until_reset(
    world,
):
    world.limits.primary(5, remaining=2, reset_in=90)
    status, _, headers = rest(world, "/repos/acme/big/pulls/1")
    assert status == 200
    assert (headers["x-ratelimit-remaining"], headers["x-ratelimit-resource"]) == ("1", "core")
    reset = int(headers["x-ratelimit-reset"])
    assert 85 <= reset - time.time() <= 95
    assert rest(world, "/repos/acme/big/pulls/1")[0] == 200
    status, body, headers = rest(world, "/repos/acme/big/pulls/1")
    assert status == 403 and headers["x-ratelimit-remaining"] == "0"
    assert body["message"] == "API rate limit exceeded for installation ID 5."
    with pytest.raises(GithubException) as caught:
        client(world).get_repo("acme/big")
    assert caught.value.status == 403
    # GitHub's clock passes the reset: a full quota, for an hour.
    world.limits.advance(91)
    status, _, headers = rest(world, "/repos/acme/big/pulls/1")
    assert status == 200 and headers["x-ratelimit-remaining"] == "4999"


def test_a_secondary_limit_refuses_what_it_covers_with_the_seconds_left_until_it_ends(world):
    window = world.limits.secondary(120, method="GET", path=r"/pulls/1$")
    status, body, headers = rest(world, "/repos/acme/big/pulls/1")
    assert status == 403 and "secondary rate limit" in body["message"]
    assert 119 <= int(headers["retry-after"]) <= 120
    assert rest(world, "/repos/acme/big")[0] == 200  # not covered
    world.limits.advance(60)
    assert 59 <= int(rest(world, "/repos/acme/big/pulls/1")[2]["retry-after"]) <= 60
    world.limits.advance(61)
    assert rest(world, "/repos/acme/big/pulls/1")[0] == 200
    assert window.refused == 2


def write(fake_github, path: str, body: dict, method: str = "POST"):
    """A write with an installation token, as raw JSON (status, body, headers)."""
    import requests

    token = github.gateway().installation_token(5)
    response = requests.request(
        method,
        f"{fake_github.url}{path}",
        json=body,
        headers={"Authorization": f"token {token.token}"},
        timeout=5,
    )
    return response.status_code, response.json(), response.headers


def check_run(fake_github, n: int):
    return write(fake_github, "/repos/acme/big/check-runs", {"name": f"c{n}", "head_sha": "c" * 40})


def test_the_81st_content_generating_request_in_a_minute_is_refused_as_github_documents(world):
    for n in range(80):
        assert check_run(world, n)[0] == 201
    assert rest(world, "/repos/acme/big/pulls/1")[0] == 200  # a read is not content
    status, body, headers = check_run(world, 80)
    assert status == 403
    assert body["message"].startswith("You have exceeded a secondary rate limit")
    assert "documentation_url" in body
    assert 1 <= int(headers["retry-after"]) <= 60
    [hit] = world.limits.hits
    assert (hit.installation_id, hit.limit, hit.method) == (5, "per minute", "POST")
    world.limits.advance(61)  # the minute has passed
    assert check_run(world, 81)[0] == 201


def test_the_501st_content_generating_request_in_an_hour_is_refused(world):
    for n in range(500):
        assert check_run(world, n)[0] == 201
        if n % 80 == 79:
            world.limits.advance(61)
    status, _, headers = check_run(world, 500)
    assert status == 403 and int(headers["retry-after"]) > 60
    assert [h.limit for h in world.limits.hits] == ["per hour"]
    world.limits.advance(3600)
    assert check_run(world, 501)[0] == 201


def test_requests_past_the_documented_concurrency_are_refused(world):
    world.limits.concurrent = 0  # as if 100 requests were in flight
    status, body, _ = rest(world, "/repos/acme/big/pulls/1")
    assert status == 403 and "secondary rate limit" in body["message"]
    assert [h.limit for h in world.limits.hits] == ["at once"]


def test_a_persons_token_reads_what_its_user_may_and_writes_no_check_run(world):
    """A personal access token acts as its user: public repositories and those the user
    collaborates on, reviews as the user, and never a check run (an App's alone)."""
    token = world.user_token("mona")
    person = Github(auth=Auth.Token(token), base_url=world.url, retry=None, lazy=True)
    assert person.get_repo("acme/big").get_pull(1).title == "Big"
    with pytest.raises(GithubException) as caught:
        person.get_repo("acme/big").create_check_run(name="x", head_sha="c" * 40)
    assert (caught.value.status, caught.value.data["message"]) == (
        403,
        "You must authenticate via a GitHub App.",
    )
    world.repos["acme/big"].private = True
    with pytest.raises(GithubException) as caught:
        person.get_repo("acme/big").get_pull(1).title  # noqa: B018
    assert caught.value.status == 404
    world.repos["acme/big"].collaborators["mona"] = "read"
    assert person.get_repo("acme/big").get_pull(1).title == "Big"
    with pytest.raises(GithubException) as caught:
        person.requester.requestJsonAndCheck("GET", "/installation/repositories")
    assert caught.value.status == 403


def test_the_web_pages_show_a_pull_requests_checks_reviews_and_a_check_run(fake_github):
    """What the dashboard links to ("on GitHub", a review, a comment) opens a page that
    shows it, anchors and all."""
    import requests

    from tests.gitworld import AWS_KEY_LINE, world_build

    world = world_build(fake_github)
    person = Github(auth=Auth.Token(fake_github.user_token("mona")), base_url=fake_github.url,
                    retry=None, lazy=True)  # fmt: skip
    token = github.gateway().installation_token(41).token
    app = Github(auth=Auth.Token(token), base_url=fake_github.url, retry=None, lazy=True)
    run = app.get_repo("acme/shop").create_check_run(
        name="Tasuku · static", head_sha=world.head, status="completed", conclusion="failure",
        output={"title": "2 problems <found>", "summary": "A **secret** committed."},
    )  # fmt: skip
    _, review = person.requester.requestJsonAndCheck(
        "POST", "/repos/acme/shop/pulls/7/reviews",
        input={"commit_id": world.head, "event": "COMMENT", "body": "Have a look <b>here</b>",
               "comments": [{"path": "app/payments.py", "line": AWS_KEY_LINE, "side": "RIGHT",
                             "body": "A key & a secret"}]},
    )  # fmt: skip
    [comment] = fake_github.review_comments_of("acme/shop", 7)

    page = requests.get(review["html_url"], timeout=10)
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    assert "Add refunds" in page.text and f"id='pullrequestreview-{review['id']}'" in page.text
    assert "Have a look &lt;b&gt;here&lt;/b&gt;" in page.text  # shown, never rendered
    assert f"id='discussion_r{comment['id']}'" in page.text and "A key &amp; a secret" in page.text
    assert f"href='/acme/shop/runs/{run.id}'" in page.text and "failure" in page.text
    check = requests.get(f"{fake_github.url}/acme/shop/runs/{run.id}", timeout=10)
    assert "2 problems &lt;found&gt;" in check.text and "A **secret** committed." in check.text
    assert requests.get(f"{fake_github.url}/acme/shop/pull/99", timeout=10).status_code == 404


def test_git_fetches_are_answered_as_git_http_backend_answers_them(
    fake_github, tmp_path, monkeypatch
):
    """The fake serves a fetch with `git upload-pack` itself (one process per request, not
    http-backend's two): every request a git client sends, in protocol v0 and v2, a
    gzipped one too, gets the answer `git http-backend` gives it, byte for byte."""
    world = world_build(fake_github)
    seen: list[tuple] = []
    direct = fake_git._upload_pack

    def recorded(request, git_dir):
        answer = direct(request, git_dir)
        seen.append((request, answer))
        return answer

    monkeypatch.setattr(fake_git, "_upload_pack", recorded)
    token = github.gateway().contents_token(RepoRef(41, REPO_ID, REPO))
    env = sandbox_git.git_env(token, tmp_path)
    url = f"{fake_github.url}/{REPO}.git"
    subprocess.run(["git", "init", "-q", str(tmp_path / "r")], check=True, env=env)
    for version in ("0", "2"):
        subprocess.run(
            ["git", "-c", f"protocol.version={version}", "fetch", "-q", "--filter=blob:none",
             url, world.head, world.base],
            cwd=tmp_path / "r", env=env, check=True, capture_output=True,
        )  # fmt: skip
    subprocess.run(["git", "ls-remote", url], cwd=tmp_path / "r", env=env, check=True,
                   capture_output=True)  # fmt: skip
    posts = [request for request, _ in seen if request.method == "POST"]
    gzipped = dataclasses.replace(
        posts[-1],
        raw=gzip.compress(posts[-1].raw),
        headers={**posts[-1].headers, "content-encoding": "gzip"},
    )
    seen.append((gzipped, direct(gzipped, world.git.git_dir)))
    assert {r.headers.get("git-protocol", "") for r, _ in seen} >= {"", "version=2"}
    assert all(answer is not None for _, answer in seen)
    monkeypatch.setattr(fake_git, "_upload_pack", lambda request, git_dir: None)
    for request, answer in seen:
        status, body, headers = fake_github._git_http(request)
        assert (status, body.content_type, headers) == (answer[0], answer[1].content_type,
                                                        answer[2])  # fmt: skip
        assert _unpacketised(body.data) == _unpacketised(answer[1].data), request.raw[:200]
    # What a git client does not send for a fetch is left to http-backend.
    dumb = dataclasses.replace(posts[-1], headers={"content-type": "text/plain"})
    assert direct(dumb, world.git.git_dir) is None


def test_a_v2_advertisement_is_upload_packs_own_and_asked_of_it_once_per_configuration(
    fake_github, monkeypatch
):
    """Protocol v2's `info/refs` names capabilities, no ref: the fake answers it again
    with the bytes upload-pack printed, without a process, until the repository's
    configuration changes (the test above holds those bytes to http-backend's)."""
    from tests.fakes.github.state import Request

    world = world_build(fake_github)
    monkeypatch.setattr(fake_git, "_V2_ADVERTISED", {})
    started = []
    run = subprocess.run
    monkeypatch.setattr(fake_git.subprocess, "run",
                        lambda *a, **k: started.append(a[0][1]) or run(*a, **k))  # fmt: skip
    asked = Request("GET", "/x", {"service": ["git-upload-pack"]}, None,
                    {"git-protocol": "version=2"}, {"service_path": "info/refs"})  # fmt: skip
    first = fake_git._upload_pack(asked, world.git.git_dir)
    assert b"version 2" in first[1].data and len(started) == 1
    again = fake_git._upload_pack(asked, world.git.git_dir)
    assert again[1].data == first[1].data and len(started) == 1
    world.git.git("config", "uploadpack.allowFilter", "false")
    changed = fake_git._upload_pack(asked, world.git.git_dir)
    assert started.count("upload-pack") == 2
    assert b"filter" not in changed[1].data.split(b"fetch=")[1].split(b"\n")[0]


def _unpacketised(data: bytes) -> list[bytes]:
    """git's pkt-lines, the pack's side-band packets joined: where upload-pack cuts the
    pack into packets depends on how pack-objects' output reached it, not on the pack."""
    lines: list[bytes] = []
    while data:
        size = int(data[:4], 16)
        payload, data = (data[4:size], data[size:]) if size > 4 else (b"", data[4:])
        if payload.startswith(b"\x01") and lines and lines[-1].startswith(b"\x01"):
            lines[-1] += payload[1:]
        else:
            lines.append(payload or f"{size:04x}".encode())
    return lines

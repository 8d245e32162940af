"""The gateway's calls about the checks on a commit, and several Apps on one repository,
against the fake GitHub server."""

from __future__ import annotations

import pytest

from repos import github
from repos.github import AppCredentials, GitHubError, GitHubGateway, RepoRef
from repos.github.schemas import latest_check_runs, required_check_names
from tests.fakes.github import Pull, rsa_keypair
from tests.fakes.github.state import DEFAULT_PERMISSIONS

HEAD = "a" * 40
REPO = "acme/widgets"
WHERE = RepoRef(installation_id=11, repository_id=501, full_name=REPO)


@pytest.fixture
def world(fake_github):
    fake_github.add_installation(11, "acme")
    repo = fake_github.add_repo(REPO, installation_id=11, repo_id=501)
    fake_github.add_pull(REPO, Pull(number=5, title="Faster", head_sha=HEAD, base_sha="b" * 40))
    return repo


def grant(fake_github, **permissions: str) -> None:
    fake_github.installations[11].permissions = {**DEFAULT_PERMISSIONS, **permissions}


def token_requests(fake_github) -> list[dict]:
    return [c.body.get("permissions") for c in fake_github.requests("POST", "/access_tokens")]


# The permissions of the token a repository's reads share (repos/github/transport.py,
# API_READ_PERMISSIONS: every write has a token of its own), for an installation granted
# the fake's defaults.
SHARED = {"pull_requests": "read", "checks": "read", "issues": "read", "contents": "read",
          "metadata": "read"}  # fmt: skip


# --- required checks ---


def test_it_reads_the_required_checks_of_a_protected_branch(world, fake_github):
    grant(fake_github, administration="read")
    fake_github.protect(REPO, "main", checks=["build", "lint"])
    assert github.gateway().required_checks(WHERE, branch="main") == ["build", "lint"]
    assert token_requests(fake_github) == [{"administration": "read"}]


def test_contexts_and_checks_are_merged_in_order_once_each(world, fake_github):
    grant(fake_github, administration="read")
    url = f"{fake_github.url}/repos/{REPO}/branches/main/protection/required_status_checks"
    answer = {
        "url": url,
        "strict": False,
        "contexts": ["ci/legacy", "build"],
        "contexts_url": f"{url}/contexts",
        "checks": [{"context": "build", "app_id": 15368}, {"context": "lint", "app_id": None}],
    }
    fake_github.inject(1, status=200, path=r"/protection/required_status_checks$", body=answer)
    assert github.gateway().required_checks(WHERE, branch="main") == [
        "ci/legacy",
        "build",
        "lint",
    ]


def test_required_check_names_take_contexts_then_checks_without_repeats():
    assert required_check_names({"contexts": ["a", "b"], "checks": [{"context": "b"}]}) == [
        "a",
        "b",
    ]
    assert required_check_names({"contexts": [], "checks": [{"context": "c", "app_id": 1}]}) == [
        "c"
    ]
    assert required_check_names({}) == []


def test_a_branch_name_with_a_slash_is_read(world, fake_github):
    grant(fake_github, administration="read")
    fake_github.protect(REPO, "release/1.x", checks=["build"])
    assert github.gateway().required_checks(WHERE, branch="release/1.x") == ["build"]


def test_an_unprotected_branch_or_one_requiring_no_checks_has_none(world, fake_github):
    grant(fake_github, administration="read")
    gateway = github.gateway()
    assert gateway.required_checks(WHERE, branch="main") is None
    fake_github.protect(REPO, "main", checks=[])
    assert gateway.required_checks(WHERE, branch="main") is None
    assert [c.status for c in fake_github.requests("GET", "/protection/")] == [404, 404]


def test_without_administration_it_answers_none_and_asks_for_no_token(world, fake_github):
    fake_github.protect(REPO, "main", checks=["build"])
    assert github.gateway().required_checks(WHERE, branch="main") is None
    # The installation's permissions were read with the App JWT; no token was refused.
    assert [c.status for c in fake_github.requests("GET", r"/app/installations/11$")] == [200]
    assert fake_github.requests("POST", "/access_tokens") == []
    assert fake_github.requests("GET", "/protection/") == []


def test_a_permission_withdrawn_since_it_was_read_answers_none(world, fake_github):
    grant(fake_github, administration="read")
    fake_github.protect(REPO, "main", checks=["build"])
    gateway = github.gateway()
    assert gateway.installation_permissions(11)["administration"] == "read"
    grant(fake_github)  # the owner removed it; the gateway's copy is stale
    assert gateway.required_checks(WHERE, branch="main") is None
    assert [c.status for c in fake_github.requests("POST", "/access_tokens")] == [422]
    # The permissions were read again: the next call does not ask for a token.
    assert gateway.required_checks(WHERE, branch="main") is None
    assert len(fake_github.requests("POST", "/access_tokens")) == 1


def test_a_403_on_branch_protection_answers_none(world, fake_github):
    grant(fake_github, administration="read")
    fake_github.inject(
        1,
        status=403,
        path="/protection/",
        body={
            "message": "Upgrade to GitHub Pro or make this repository public to enable this "
            "feature.",
            "documentation_url": "https://docs.github.com/rest",
            "status": "403",
        },
    )
    assert github.gateway().required_checks(WHERE, branch="main") is None


def test_a_rate_limit_on_branch_protection_is_retried_not_taken_for_no_access(world, fake_github):
    grant(fake_github, administration="read")
    fake_github.protect(REPO, "main", checks=["build"])
    fake_github.rate_limit(1, status=403, retry_after=0, path="/protection/")
    assert github.gateway().required_checks(WHERE, branch="main") == ["build"]
    assert [c.status for c in fake_github.requests("GET", "/protection/")] == [403, 200]


def test_other_errors_reading_protection_are_raised(world, fake_github):
    grant(fake_github, administration="read")
    fake_github.inject(3, status=502, path="/protection/")
    with pytest.raises(GitHubError) as caught:
        github.gateway().required_checks(WHERE, branch="main")
    assert not caught.value.permanent
    assert caught.value.status == 502


# --- check runs and statuses on a commit ---


def test_it_lists_every_apps_check_runs_on_a_commit_across_pages(world, fake_github):
    for i in range(128):
        fake_github.ci_check_run(REPO, HEAD, f"job {i:03}")
    fake_github.ci_check_run(
        REPO, HEAD, "coverage", app_slug="codecov", conclusion="failure", title="-2%"
    )
    github.gateway().check_run_create(
        WHERE,
        name="Tasuku · static",
        head_sha=HEAD,
        external_id="77",
        details_url="http://tasuku.test/runs/77/",
    )
    fake_github.ci_check_run(REPO, "c" * 40, "elsewhere")  # another commit

    checks = github.gateway().commit_check_runs(WHERE, sha=HEAD)

    assert len(checks) == 130
    assert {c.app_slug for c in checks} == {"github-actions", "codecov", "tasuku-test"}
    coverage = next(c for c in checks if c.name == "coverage")
    assert (coverage.status, coverage.conclusion, coverage.title) == (
        "completed",
        "failure",
        "-2%",
    )
    ours = next(c for c in checks if c.name == "Tasuku · static")
    assert (ours.status, ours.conclusion, ours.completed_at) == ("queued", None, None)
    pages = fake_github.requests("GET", r"/check-runs$")
    assert [c.query["page"] for c in pages] == [["1"], ["2"]]
    assert pages[0].query["per_page"] == ["100"]
    assert pages[0].query["filter"] == ["latest"]


def test_it_keeps_the_newest_run_of_each_name_of_each_app(world, fake_github):
    fake_github.ci_check_run(REPO, HEAD, "build", conclusion="failure", text="1 test failed")
    fake_github.ci_check_run(REPO, HEAD, "build", status="in_progress")  # re-run
    fake_github.ci_check_run(REPO, HEAD, "build", app_slug="circleci", conclusion="failure")

    checks = github.gateway().commit_check_runs(WHERE, sha=HEAD)

    assert [(c.name, c.app_slug, c.status, c.conclusion) for c in checks] == [
        ("build", "circleci", "completed", "failure"),
        ("build", "github-actions", "in_progress", None),
    ]


def test_runs_of_one_name_from_two_suites_collapse_to_the_newest():
    # filter=latest works within a check suite; a workflow run again by another event on
    # the same commit leaves its older run listed.
    def run(run_id: int, conclusion: str, slug: str = "github-actions") -> dict:
        return {
            "id": run_id,
            "name": "title",
            "status": "completed",
            "conclusion": conclusion,
            "completed_at": "2026-05-01T10:00:00Z",
            "app": {"id": 1, "slug": slug},
            "output": {"title": None, "summary": None, "text": None},
        }

    checks = latest_check_runs([run(9, "success"), run(3, "failure"), run(4, "failure", "x")])
    assert [(c.app_slug, c.id, c.conclusion) for c in checks] == [
        ("github-actions", 9, "success"),
        ("x", 4, "failure"),
    ]


def test_commit_statuses_are_folded_in_when_the_app_may_read_them(world, fake_github):
    grant(fake_github, statuses="read")
    fake_github.ci_check_run(REPO, HEAD, "build")
    fake_github.ci_status(REPO, HEAD, "ci/jenkins", state="pending")
    fake_github.ci_status(
        REPO, HEAD, "ci/jenkins", description="Build #12 passed", target_url="http://ci/12"
    )
    fake_github.ci_status(REPO, HEAD, "ci/lint", state="error", description="crashed")
    fake_github.ci_status(REPO, HEAD, "ci/deploy", state="pending")

    checks = github.gateway().commit_check_runs(WHERE, sha=HEAD)

    assert [(c.kind, c.name, c.status, c.conclusion) for c in checks] == [
        ("check_run", "build", "completed", "success"),
        ("status", "ci/deploy", "in_progress", None),
        ("status", "ci/jenkins", "completed", "success"),
        ("status", "ci/lint", "completed", "failure"),
    ]
    jenkins = checks[2]
    assert (jenkins.title, jenkins.details_url, jenkins.app_slug) == (
        "Build #12 passed",
        "http://ci/12",
        None,
    )
    assert jenkins.completed_at is not None
    assert checks[1].completed_at is None
    assert token_requests(fake_github) == [{**SHARED, "statuses": "read"}]


def test_without_commit_statuses_only_check_runs_are_listed(world, fake_github):
    fake_github.ci_check_run(REPO, HEAD, "build")
    fake_github.ci_status(REPO, HEAD, "ci/jenkins", state="failure")

    checks = github.gateway().commit_check_runs(WHERE, sha=HEAD)

    assert [c.name for c in checks] == ["build"]
    assert token_requests(fake_github) == [SHARED]  # no statuses: none asked for
    assert fake_github.requests("GET", r"/status$") == []


def test_statuses_withdrawn_since_read_fall_back_to_check_runs(world, fake_github):
    grant(fake_github, statuses="read")
    fake_github.ci_check_run(REPO, HEAD, "build")
    gateway = github.gateway()
    gateway.installation_permissions(11)
    grant(fake_github)

    assert [c.name for c in gateway.commit_check_runs(WHERE, sha=HEAD)] == ["build"]
    # The shared token asked for statuses, was refused, and was asked again without.
    assert token_requests(fake_github) == [{**SHARED, "statuses": "read"}, SHARED]


def test_a_502_while_listing_checks_is_retried(world, fake_github):
    fake_github.ci_check_run(REPO, HEAD, "build")
    fake_github.inject(1, status=502, path=r"/check-runs$")
    assert [c.name for c in github.gateway().commit_check_runs(WHERE, sha=HEAD)] == ["build"]


# --- several Apps on one repository ---


def test_two_apps_on_one_repository_each_use_their_own_installation_and_tokens(
    world, fake_github, test_app
):
    private, public = rsa_keypair()
    fake_github.add_app(5150, public, "other-bot")
    fake_github.add_installation(21, "acme", app_id=5150)
    fake_github.install_repo(REPO, 21)
    tasuku = github.gateway()
    other = GitHubGateway(
        AppCredentials(
            app_id=5150,
            private_key=private,
            webhook_secret="x",
            slug="other-bot",
            base_url=fake_github.url,
        ),
        github.retry_policy(),
    )

    assert tasuku.repository_installation_id(REPO) == 11
    assert other.repository_installation_id(REPO) == 21
    mine = tasuku.installation_token(11, repository_ids=(501,), permissions={"checks": "read"})
    theirs = other.installation_token(21, repository_ids=(501,), permissions={"checks": "read"})
    assert mine.token != theirs.token
    assert fake_github.tokens[mine.token].installation_id == 11
    assert fake_github.tokens[theirs.token].installation_id == 21
    # Cached per App: asking again mints nothing, and neither sees the other's token.
    assert (
        tasuku.installation_token(11, repository_ids=(501,), permissions={"checks": "read"}) == mine
    )
    assert (
        other.installation_token(21, repository_ids=(501,), permissions={"checks": "read"})
        == theirs
    )
    assert len(fake_github.requests("POST", "/access_tokens")) == 2
    with pytest.raises(GitHubError) as caught:
        other.installation_token(11, permissions={"checks": "read"})
    assert caught.value.status == 404

    # Each App reads the repository through its own installation, and posts as its bot.
    other_run = other.check_run_create(
        RepoRef(21, 501, REPO),
        name="other check",
        head_sha=HEAD,
        external_id="1",
        details_url="http://other.test/1",
    )
    checks = tasuku.commit_check_runs(WHERE, sha=HEAD)
    assert [(c.name, c.app_slug, c.id) for c in checks] == [
        ("other check", "other-bot", other_run.id)
    ]


def test_an_app_sees_no_installation_on_a_repository_it_is_not_installed_on(world, fake_github):
    private, public = rsa_keypair()
    fake_github.add_app(5151, public, "third-bot")
    third = GitHubGateway(
        AppCredentials(5151, private, "x", "third-bot", fake_github.url), github.retry_policy()
    )
    assert third.repository_installation_id(REPO) is None

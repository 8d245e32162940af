"""The GitHub gateway against the fake GitHub server, through PyGithub."""

from __future__ import annotations

import logging
import time

import jwt
import pytest

from repos import github
from repos.github import CheckRunOutput, GitHubError, GitHubNotConfigured, RepoRef
from repos.logging import RedactSecretsFilter, redact
from tests.fakes.github import Pull

HEAD = "a" * 40


@pytest.fixture
def world(fake_github):
    fake_github.add_installation(11, "acme")
    repo = fake_github.add_repo("acme/widgets", installation_id=11, repo_id=501)
    fake_github.add_repo("acme/other", installation_id=11, repo_id=502)
    fake_github.add_pull(
        "acme/widgets", Pull(number=5, title="Faster", head_sha=HEAD, base_sha="b" * 40)
    )
    return repo


def _create(gateway, **overrides):
    params = dict(
        name="Tasuku · static",
        head_sha=HEAD,
        external_id="77",
        details_url="http://tasuku.test/runs/77/",
    )
    params.update(overrides)
    return gateway.check_run_create(RepoRef(11, 501, "acme/widgets"), **params)


def test_the_app_jwt_is_rs256_backdated_and_expires_within_ten_minutes(fake_github, test_app):
    token = github.gateway().app_jwt()
    claims = jwt.decode(token, test_app.public_key, algorithms=["RS256"])
    now = time.time()
    assert claims["iss"] in (test_app.app_id, str(test_app.app_id))
    assert claims["iat"] <= now - 55
    assert claims["exp"] - claims["iat"] <= 600
    assert claims["exp"] > now


def test_an_installation_token_is_scoped_to_one_repository_and_the_permissions_asked(
    world, fake_github
):
    token = github.gateway().installation_token(
        11, repository_ids=(501,), permissions={"checks": "write"}
    )
    minted = fake_github.tokens[token.token]
    assert minted.repository_ids == frozenset({501})
    assert minted.permissions == {"checks": "write", "metadata": "read"}
    assert token.repository_ids == (501,)


def test_an_installation_token_is_cached_until_shortly_before_it_expires(world, fake_github):
    gateway = github.gateway()
    first = gateway.installation_token(11, repository_ids=(501,), permissions={"checks": "write"})
    second = gateway.installation_token(11, repository_ids=(501,), permissions={"checks": "write"})
    assert first.token == second.token
    assert len(fake_github.requests("POST", "/access_tokens")) == 1

    fake_github.token_ttl = 60  # the next token lives less than the refresh margin
    github.caches_clear()
    short = gateway.installation_token(11, repository_ids=(501,), permissions={"checks": "write"})
    again = gateway.installation_token(11, repository_ids=(501,), permissions={"checks": "write"})
    assert short.token != again.token


def test_a_token_for_a_repository_outside_the_installation_is_a_permanent_error(world, fake_github):
    fake_github.add_installation(12, "elsewhere")
    fake_github.add_repo("elsewhere/x", installation_id=12, repo_id=900)
    with pytest.raises(GitHubError) as caught:
        github.gateway().installation_token(11, repository_ids=(900,))
    assert caught.value.permanent
    assert caught.value.status == 422


def test_an_expired_token_is_replaced_and_the_call_succeeds(world, fake_github):
    gateway = github.gateway()
    gateway.pull_request_get(RepoRef(11, 501, "acme/widgets"), number=5)
    fake_github.expire_tokens()  # e.g. revoked, or the clock moved
    pr = gateway.pull_request_get(RepoRef(11, 501, "acme/widgets"), number=5)
    assert pr.head_sha == HEAD
    assert len(fake_github.requests("POST", "/access_tokens")) == 2


def test_it_reads_a_pull_request(world):
    pr = github.gateway().pull_request_get(RepoRef(11, 501, "acme/widgets"), number=5)
    assert (pr.number, pr.title, pr.head_sha, pr.author_login, pr.state) == (
        5,
        "Faster",
        HEAD,
        "octocat",
        "open",
    )


def test_it_asks_github_whether_the_installation_reaches_a_repository(world, fake_github):
    gateway = github.gateway()
    assert gateway.repository_installation_id("acme/widgets") == 11
    assert gateway.repository_installation_id("acme/nowhere") is None


def test_it_retries_a_502_then_succeeds(world, fake_github):
    fake_github.inject(1, status=502, method="GET", path=r"/pulls/5$")
    pr = github.gateway().pull_request_get(RepoRef(11, 501, "acme/widgets"), number=5)
    assert pr.number == 5
    assert [c.status for c in fake_github.requests("GET", r"/pulls/5$")] == [502, 200]


def test_it_gives_up_after_three_attempts_with_a_clear_error(world, fake_github):
    fake_github.inject(5, status=502, method="GET", path=r"/pulls/5$")
    with pytest.raises(GitHubError) as caught:
        github.gateway().pull_request_get(RepoRef(11, 501, "acme/widgets"), number=5)
    error = caught.value
    assert not error.permanent
    assert error.status == 502
    assert error.code == "github-unavailable"
    assert str(error) == (
        "Could not read pull request acme/widgets#5: GitHub answered 502 (Server Error) "
        "(gave up after 3 attempts)"
    )
    assert len(fake_github.requests("GET", r"/pulls/5$")) == 3


def test_a_404_is_permanent_and_not_retried(world, fake_github):
    with pytest.raises(GitHubError) as caught:
        github.gateway().pull_request_get(RepoRef(11, 501, "acme/widgets"), number=404)
    assert caught.value.permanent
    assert "404" in str(caught.value)
    assert caught.value.code == "github-not-found"
    assert len(fake_github.requests("GET", r"/pulls/404$")) == 1


def test_a_primary_rate_limit_waits_for_the_reset_and_retries(world, fake_github):
    fake_github.rate_limit(1, status=403, method="GET", path=r"/pulls/5$")
    pr = github.gateway().pull_request_get(RepoRef(11, 501, "acme/widgets"), number=5)
    assert pr.number == 5
    assert [c.status for c in fake_github.requests("GET", r"/pulls/5$")] == [403, 200]


def test_a_429_with_retry_after_is_retried(world, fake_github):
    fake_github.rate_limit(1, status=429, retry_after=0, method="GET", path=r"/pulls/5$")
    pr = github.gateway().pull_request_get(RepoRef(11, 501, "acme/widgets"), number=5)
    assert pr.number == 5


def test_a_rate_limit_longer_than_the_wait_bound_is_raised_at_once_as_transient(
    world, fake_github, settings
):
    settings.GITHUB_MAX_RATE_LIMIT_WAIT = "1"
    fake_github.rate_limit(1, status=429, retry_after=120, method="GET", path=r"/pulls/5$")
    with pytest.raises(GitHubError) as caught:
        github.gateway().pull_request_get(RepoRef(11, 501, "acme/widgets"), number=5)
    assert not caught.value.permanent
    assert caught.value.retry_after == 120
    assert caught.value.code == "github-rate-limit"
    assert len(fake_github.requests("GET", r"/pulls/5$")) == 1


def test_a_403_that_is_not_a_rate_limit_is_a_permanent_permission_error(world, fake_github):
    fake_github.installations[11].permissions = {"metadata": "read", "pull_requests": "read"}
    with pytest.raises(GitHubError) as caught:
        _create(github.gateway())
    assert caught.value.permanent and caught.value.code == "github-permission"


def test_it_creates_and_updates_a_check_run(world, fake_github):
    gateway = github.gateway()
    created = _create(gateway)
    assert created.status == "queued"
    assert created.external_id == "77"
    updated = gateway.check_run_update(
        RepoRef(11, 501, "acme/widgets"),
        check_run_id=created.id,
        conclusion="success",
        output=CheckRunOutput(title="No problems", summary="Reviewed 3 files."),
    )
    assert (updated.status, updated.conclusion) == ("completed", "success")
    stored = fake_github.check_runs_of("acme/widgets")[0]
    assert stored.output["title"] == "No problems"


def test_a_check_run_post_whose_answer_was_lost_is_not_posted_twice(world, fake_github):
    # GitHub created the check run, then the answer was a 502.
    fake_github.inject(1, status=502, method="POST", path=r"/check-runs$", after=True)
    created = _create(github.gateway())
    runs = fake_github.check_runs_of("acme/widgets")
    assert len(runs) == 1
    assert created.id == runs[0].id
    assert len(fake_github.requests("POST", r"/check-runs$")) == 1


def test_a_check_run_post_that_never_arrived_is_sent_again(world, fake_github):
    fake_github.inject(1, method="POST", path=r"/check-runs$", disconnect=True)
    created = _create(github.gateway())
    assert [r.id for r in fake_github.check_runs_of("acme/widgets")] == [created.id]


def test_finding_the_apps_check_run_ignores_another_apps_of_the_same_name_and_id(
    world, fake_github
):
    where = RepoRef(installation_id=11, repository_id=501, full_name="acme/widgets")
    find = dict(head_sha=HEAD, name="Tasuku · static", external_id="77")
    # Any App may name a check run so, and carry any external id.
    theirs = fake_github.ci_check_run(
        "acme/widgets", HEAD, "Tasuku · static", status="in_progress", app_slug="impostor"
    )
    theirs.external_id = "77"
    gateway = github.gateway()
    assert gateway.check_run_find(where, **find) is None
    ours = _create(gateway)
    assert gateway.check_run_find(where, **find).id == ours.id
    # A create whose answer was lost looks for its own, never the other App's.
    fake_github.inject(1, status=502, method="POST", path=r"/check-runs$", after=True)
    again = _create(gateway, head_sha=HEAD, external_id="78")
    assert again.id not in (theirs.id, ours.id) and again.external_id == "78"


def test_without_settings_the_gateway_names_what_is_missing(settings):
    settings.GITHUB_APP_ID = ""
    settings.GITHUB_PRIVATE_KEY = ""
    settings.GITHUB_PRIVATE_KEY_PATH = ""
    settings.GITHUB_WEBHOOK_SECRET = ""
    with pytest.raises(GitHubNotConfigured) as caught:
        github.gateway()
    assert caught.value.permanent and caught.value.code == "github-credentials"
    assert "GITHUB_APP_ID" in str(caught.value)


def test_a_key_with_escaped_newlines_from_a_one_line_env_file_works(
    fake_github, test_app, settings
):
    settings.GITHUB_PRIVATE_KEY = test_app.private_key.replace("\n", "\\n")
    github.caches_clear()
    assert github.gateway().repository_installation_id("acme/nothing") is None


def test_tokens_never_reach_the_logs(world, fake_github, caplog):
    caplog.set_level(logging.DEBUG)
    for handler in logging.getLogger().handlers + [caplog.handler]:
        handler.addFilter(RedactSecretsFilter())
    fake_github.inject(1, status=502, method="GET", path=r"/pulls/5$")
    gateway = github.gateway()
    gateway.pull_request_get(RepoRef(11, 501, "acme/widgets"), number=5)
    logging.getLogger("test").warning(
        "cloning https://x-access-token:%s@github.com/acme/w", next(iter(fake_github.tokens))
    )
    for token in fake_github.tokens:
        assert token not in caplog.text
    assert "[redacted]" in caplog.text


def test_redact_removes_tokens_of_both_formats_and_jwts():
    old = "ghs_" + "A" * 36
    new = "ghs_4242_" + "x" * 300 + ".abc.def"
    text = f"a {old} b {new} c eyJhbGciOi.eyJpc3MiOjF9.c2lnbmF0dXJl d"
    assert redact(text) == "a [redacted] b [redacted] c [redacted] d"


def test_every_request_names_the_rest_api_version_it_was_written_for(world, monkeypatch):
    import requests

    sent = []
    real = requests.Session.request

    def recording(self, method, url, *args, **kwargs):
        sent.append((method, url, dict(kwargs.get("headers") or {})))
        return real(self, method, url, *args, **kwargs)

    monkeypatch.setattr(requests.Session, "request", recording)
    github.gateway().pull_request_get(RepoRef(11, 501, "acme/widgets"), number=5)
    # the App's token request (JWT) and the installation's call alike
    assert {method for method, _, _ in sent} == {"POST", "GET"}
    assert all(h.get("X-GitHub-Api-Version") == "2022-11-28" for _, _, h in sent), sent


def test_graphqls_rate_limit_error_types_are_transient_with_a_wait():
    from github import GithubException

    from repos.github.errors import classify

    for kind in ("RATE_LIMITED", "RATE_LIMIT"):
        data = {"errors": [{"type": kind, "message": "API rate limit exceeded"}]}
        error = classify("list the review threads", GithubException(200, data, {}))
        assert not error.permanent and error.retry_after == 60.0, kind
        assert error.code == "github-rate-limit"


def test_without_github_app_slug_the_slug_is_read_from_get_app_once(
    fake_github, test_app, settings
):
    """An App configured by its id and key alone (GITHUB_APP_SLUG unset: the system check
    warns, it still works) learns its bot's login from `GET /app`, as the App (JWT); the
    fake's answer is held to GitHub's description like every other."""
    settings.GITHUB_APP_SLUG = ""
    github.caches_clear()
    gateway = github.gateway()
    assert gateway.app_slug() == test_app.slug
    assert gateway.posted_by_us({"login": f"{test_app.slug}[bot]", "type": "Bot"})
    assert not gateway.posted_by_us({"login": test_app.slug, "type": "User"})
    asked = [(c.method, c.path, c.auth, c.status) for c in fake_github.calls if c.path == "/app"]
    assert asked == [("GET", "/app", "jwt", 200)]  # once: the slug is kept per process


def test_with_github_app_slug_set_get_app_is_not_asked(fake_github, test_app):
    assert github.gateway().app_slug() == test_app.slug
    assert not [c for c in fake_github.calls if c.path == "/app"]

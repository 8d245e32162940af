"""`manage.py review <pull request URL>`: a pull request on GitHub reviewed from the
command line with a person's token — no App, no webhook — through the real gateway
pointed at the fake GitHub (which treats the token as GitHub treats a personal one)."""

from __future__ import annotations

import io
import json
import os
import stat

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from reviews.local.remote import pull_address, token_find
from reviews.models import ReviewRun
from tests.gitworld import AWS_KEY_LINE, SHELL_TRUE_LINE, world_build

pytestmark = pytest.mark.django_db


@pytest.fixture
def pull(fake_github, settings, monkeypatch):
    """acme/shop#7 on the fake GitHub, and a token of mona's in GITHUB_TOKEN."""
    settings.GITHUB_WEB_URL = fake_github.url  # the server the URL names
    world = world_build(fake_github)
    for name in ("GITHUB_TOKEN", "GH_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.user_token("mona"))
    return world


def review(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("review", *args, stdout=out, stderr=err)
    except SystemExit as exc:
        return int(exc.code), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


def test_a_pull_request_is_reviewed_by_its_url_with_a_persons_token(pull):
    fake = pull.fake
    code, out, _ = review(f"{fake.url}/acme/shop/pull/7")
    assert code == 0
    lines = out.splitlines()
    assert (
        f"app/payments.py:{AWS_KEY_LINE} critical (blocking) Secret committed: AWS Access Key"
        in lines
    )
    assert any(line.startswith(f"app/payments.py:{SHELL_TRUE_LINE} high") for line in lines)
    assert not any(line.startswith("app/legacy.py") for line in lines)  # the base's
    assert lines[-1].startswith("Not posted: add --post to publish it on ")
    # Everything went with mona's token: no App JWT, no installation token, no post.
    token = os.environ["GITHUB_TOKEN"]
    assert fake.requests() and all(
        c.token == token for c in fake.requests() if ".git/" not in c.path
    )
    assert not [c for c in fake.requests("POST") if ".git/" not in c.path]
    run = ReviewRun.objects.get()
    assert run.trigger == "local" and run.pull_request.repository.full_name == "local/acme.shop"
    assert (run.base_sha, run.head_sha) == (pull.base, pull.head)
    assert run.pull_request.base_ref == "main" and run.pull_request.title == "Add refunds"


def test_post_publishes_one_review_with_inline_comments_as_the_tokens_owner(pull):
    fake = pull.fake
    code, out, _ = review(f"{fake.url}/acme/shop/pull/7/files", "--post")
    assert code == 0
    [posted] = fake.requests("POST", r"/pulls/7/reviews$")
    assert posted.body["event"] == "COMMENT" and posted.body["commit_id"] == pull.head
    lines = {(c["path"], c["line"]) for c in posted.body["comments"]}
    assert ("app/payments.py", AWS_KEY_LINE) in lines and (
        "app/payments.py",
        SHELL_TRUE_LINE,
    ) in lines
    [stored] = pull.repo.reviews.values()
    assert (stored["user"]["login"], stored["user"]["type"]) == ("mona", "User")
    # The body says where it came from and what an App adds, never a link to this machine.
    assert "Posted from the command line" in stored["body"] and "check run" in stored["body"]
    assert "tasuku-run-page-on-this-machine" not in stored["body"]
    said = out.splitlines()[-1]
    assert said.startswith(f"Posted as @mona: {fake.url}/acme/shop/pull/7#pullrequestreview-")
    assert f"({len(posted.body['comments'])} inline comments)" in said
    assert "`Tasuku · static` check run" in said
    # GitHub lets only an App write check runs: none was attempted.
    assert not fake.requests("POST", r"/check-runs")


def test_json_and_sarif_name_the_pull_request_and_stay_one_document(pull):
    fake = pull.fake
    code, out, err = review(f"{fake.url}/acme/shop/pull/7", "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["review"]["pull_request"] == f"{fake.url}/acme/shop/pull/7"
    assert data["review"]["head"] == pull.head
    assert {f["path"] for f in data["findings"]} >= {"app/payments.py"}
    assert err.strip().startswith("Not posted")
    _, out, _ = review(f"{fake.url}/acme/shop/pull/7", "--format", "sarif")
    run = json.loads(out)["runs"][0]
    assert run["versionControlProvenance"][0]["repositoryUri"] == f"{fake.url}/acme/shop"
    assert run["originalUriBaseIds"]["SRCROOT"]["uri"] == f"{fake.url}/acme/shop/blob/{pull.head}/"


def test_a_repository_the_token_cannot_read_is_one_clear_line(pull):
    pull.repo.private = True  # mona is no collaborator
    with pytest.raises(CommandError) as caught:
        call_command("review", f"{pull.fake.url}/acme/shop/pull/7")
    assert caught.value.returncode == 2
    assert str(caught.value).startswith(
        f"GitHub refused {pull.fake.url}/acme/shop/pull/7 to the token from GITHUB_TOKEN (404)"
    )
    pull.repo.collaborators["mona"] = "read"  # now she can
    assert review(f"{pull.fake.url}/acme/shop/pull/7")[0] == 0


def test_a_token_github_does_not_know_is_said_to_be_refused(pull, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_revoked")
    with pytest.raises(CommandError) as caught:
        call_command("review", f"{pull.fake.url}/acme/shop/pull/7")
    assert str(caught.value) == (
        "GitHub refused the token from GITHUB_TOKEN (401, bad credentials): it is expired, "
        f"revoked, or not a token of {pull.fake.url.split('://')[1]}"
    )


def test_the_github_clis_login_is_used_when_no_variable_holds_a_token(pull, monkeypatch, tmp_path):
    token = os.environ.pop("GITHUB_TOKEN")
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    gh = tmp_path / "gh"
    host = pull.fake.url.split("://", 1)[1]
    gh.write_text(f'#!/bin/sh\n[ "$*" = "auth token --hostname {host}" ] && echo {token}\n')
    gh.chmod(gh.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    code, out, _ = review(f"{pull.fake.url}/acme/shop/pull/7")
    assert code == 0 and "gh auth token" in out.splitlines()[-1]


def test_no_token_at_all_says_how_to_give_one(pull, monkeypatch, tmp_path):
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no gh either
    address = pull_address("https://github.com/acme/shop/pull/7")
    with pytest.raises(
        CommandError, match=r"no token for github\.com: set GITHUB_TOKEN .*gh auth login"
    ):
        call_command("review", "https://github.com/acme/shop/pull/7")
    assert token_find(address, {"GH_TOKEN": "t1"}) == ("t1", "GH_TOKEN")


@pytest.mark.parametrize(
    ("url", "api", "full_name", "number"),
    [
        ("https://github.com/acme/shop/pull/7", "https://api.github.com", "acme/shop", 7),
        ("https://github.com/acme/shop.js/pull/12/files#diff-1", "https://api.github.com", "acme/shop.js", 12),
        ("https://ghe.corp.example/team/app/pull/3", "https://ghe.corp.example/api/v3", "team/app", 3),
        # GitHub Enterprise Cloud with data residency: its API has a host of its own
        ("https://octo.ghe.com/team/app/pull/4", "https://api.octo.ghe.com", "team/app", 4),
    ],
)  # fmt: skip
def test_pull_request_addresses_of_github_and_enterprise_servers(
    url, api, full_name, number, settings
):
    settings.GITHUB_WEB_URL, settings.GITHUB_API_URL = (
        "https://github.com",
        "https://api.github.com",
    )
    address = pull_address(url)
    assert (address.api_url, address.full_name, address.number) == (api, full_name, number)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["https://github.com/acme/shop/issues/7"], "not a pull request's address"),
        ([], "pass a pull request's URL or --repo PATH"),
        (["https://github.com/a/b/pull/1", "--base", "main"], "--base and --head are for --repo"),
        (["--repo", ".", "--post"], "--post needs a pull request's URL"),
    ],
)
def test_bad_usage_is_one_clear_line(args, message, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "t")
    with pytest.raises(CommandError) as caught:
        call_command("review", *args)
    assert str(caught.value).startswith(message) and caught.value.returncode == 2

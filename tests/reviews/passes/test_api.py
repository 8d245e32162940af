"""The review-pass API's edges: who may see a task, what it refuses and why, and its
OpenAPI schema."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from repos.github import RepoRef
from repos.github.config import retry_policy
from repos.github.gateway import GitHubGateway
from reviews.models import Answer, Task
from reviews.passes.author import ApprovalRefused, AuthorGateway, author_credentials
from tests.fakes.models import ToolCall
from tests.gitworld import REPO
from tests.helpers import drain_queue
from tests.reviews.passes.conftest import finding

pytestmark = pytest.mark.django_db

SHELL = finding("app/payments.py", 8, "Order id reaches a shell", blocking=True, severity="high")
QUOTE = finding("deploy.sh", 3, "Unquoted target directory", blocking=False, severity="low")


def test_the_openapi_schema_is_valid(tmp_path):
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    schema = yaml.safe_load(out.read_text())
    paths = set(schema["paths"])
    assert {
        "/api/tasks/",
        "/api/tasks/{id}/",
        "/api/tasks/{id}/handoff/",
        "/api/tasks/{id}/done/",
        "/api/tasks/{id}/feedback/",
        "/api/tasks/{id}/answers/",
        "/api/tasks/{id}/actions/",
    } <= paths
    assert "tokenAuth" in schema["components"]["securitySchemes"]


def test_the_schema_and_its_browsable_docs_are_served(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    assert "/api/tasks/{id}/done/" in json.loads(schema.content)["paths"]
    docs = client.get("/api/docs/")
    assert docs.status_code == 200 and b"swagger-ui" in docs.content
    # Everything the page loads is Tasuku's own: no font, script or style from elsewhere.
    assert not re.findall(rb"(?:src|href)=[\"'](?:https?:)?//", docs.content)
    assert client.get("/api/redoc/").status_code == 404  # ReDoc loads Google's fonts


ENDPOINTS = [
    ("get", "/api/tasks/{id}", None),
    ("post", "/api/tasks/{id}/handoff", {"enabled": False}),
    ("post", "/api/tasks/{id}/done", {"heads": {}}),
    ("get", "/api/tasks/{id}/feedback", None),
    ("post", "/api/tasks/{id}/answers", {"answers": [{"finding": "1.x", "kind": "skip"}]}),
    ("post", "/api/tasks/{id}/actions", {"action": "recall"}),
]


def test_every_endpoint_refuses_a_token_that_does_not_own_the_task(passes):
    task = passes.create_task()
    stranger = get_user_model().objects.create_user("someone-else")
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=stranger).key}")
    anonymous = APIClient()
    bad_token = APIClient()
    bad_token.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    for method, url, body in ENDPOINTS:
        url = url.format(id=task.pk)
        answer = getattr(other, method)(url, body, format="json")
        assert answer.status_code == 404, (url, answer.status_code)
        assert getattr(anonymous, method)(url, body, format="json").status_code == 401
        assert getattr(bad_token, method)(url, body, format="json").status_code == 401
    assert other.get("/api/tasks/").json() == []
    task.refresh_from_db()
    assert task.state == "open" and task.passes_enabled  # nothing the stranger sent landed
    assert [t["id"] for t in passes.api.get("/api/tasks/").json()] == [task.pk]


def test_creating_a_task_refuses_what_it_cannot_review(passes):
    post = passes.api.post
    bad = post("/api/tasks/", {"title": "x", "author": {"name": "a"},
                               "pull_requests": ["acme/shop/7"]}, format="json")  # fmt: skip
    assert bad.status_code == 400
    assert (
        bad.json()["error"] == "'acme/shop/7' is not a pull request reference like owner/repo#12."
    )
    unknown = post("/api/tasks/", {"title": "x", "author": {"name": "a"},
                                   "pull_requests": ["acme/elsewhere#1"]}, format="json")  # fmt: skip
    # Outside the token's scope: not found, whether or not it exists.
    assert unknown.status_code == 404
    assert "acme/elsewhere is not a repository your API token may name" in unknown.json()["error"]
    twice = post("/api/tasks/", {"title": "x", "author": {"name": "a"},
                                 "pull_requests": [f"{REPO}#7", f"{REPO}#7"]}, format="json")  # fmt: skip
    assert twice.status_code == 400 and twice.json()["error"] == "A pull request is listed twice."
    # In another case it is the same pull request on GitHub: refused alike, never a 500.
    cased = post("/api/tasks/", {"title": "x", "author": {"name": "a"},
                                 "pull_requests": [f"{REPO}#7", f"{REPO.upper()}#7"]}, format="json")  # fmt: skip
    assert cased.status_code == 400 and cased.json()["error"] == "A pull request is listed twice."
    missing = post("/api/tasks/", {"title": "x"}, format="json")
    assert missing.status_code == 400 and "author" in missing.json()
    assert not Task.objects.exists()


def test_handoff_refuses_settings_it_cannot_honour(passes, settings):
    created = passes.api.post(
        "/api/tasks/",
        {"title": "x", "author": {"name": "a"}, "pull_requests": [f"{REPO}#7"]},
        format="json",
    ).json()
    url = f"/api/tasks/{created['id']}/handoff"

    def handoff(**body):
        return passes.api.post(url, {"enabled": True, **body}, format="json")

    assert handoff().json()["error"] == (
        "Name the reviewer that reviews the passes (a reviewer's slug): no reviewer is the "
        "default for review passes (an administrator marks one under Reviewers)."
    )
    nobody = handoff(reviewer={"slug": "nobody"})
    assert (
        nobody.status_code == 422
        and nobody.json()["error"] == "There is no enabled reviewer 'nobody'."
    )
    assert handoff(reviewer={"slug": "claude"}, max_passes=11).status_code == 400
    assert handoff(reviewer={"slug": "claude"}, max_passes=0).status_code == 400
    bots = handoff(reviewer={"slug": "claude"}, counted_bots=["not a login!"])
    assert bots.status_code == 400 and "is not a GitHub login" in bots.json()["error"]
    static = handoff(reviewer={"slug": "static", "model": "gpt-9"})
    assert static.status_code == 422
    assert static.json()["error"] == "The static reviewer has no model to choose."

    settings.ANTHROPIC_API_KEY = ""
    settings.ANTHROPIC_BASE_URL = ""
    keyless = handoff(reviewer={"slug": "claude"})
    assert keyless.status_code == 422
    assert keyless.json()["error"].startswith("The reviewer 'claude' has no anthropic API key")

    # A reviewer's key sealed under a SECRET_KEY that is gone: refused with why, not a 500.
    from repos.models import Reviewer

    Reviewer.objects.filter(slug="claude").update(api_key_sealed="not a sealed key")
    sealed = handoff(reviewer={"slug": "claude"})
    assert sealed.status_code == 422
    assert sealed.json()["error"].startswith("The reviewer 'claude' cannot run: ")
    Reviewer.objects.filter(slug="claude").update(api_key_sealed="")

    settings.ANTHROPIC_API_KEY = "sk-ant-test"
    settings.TASUKU_AUTHOR_APP_ID = ""
    no_author = handoff(reviewer={"slug": "claude"})
    assert no_author.status_code == 422
    assert no_author.json()["error"] == (
        "The author's App is not configured, so answers cannot be posted as the author: "
        "set TASUKU_AUTHOR_APP_ID."
    )
    assert not Task.objects.get(pk=created["id"]).passes_enabled


def test_an_author_cannot_skip_a_blocking_finding(passes):
    passes.claude.script(ToolCall("submit_review", {"findings": [SHELL, QUOTE]}))
    task = passes.create_task()
    assert passes.done(task, passes.world.pull.head_sha).status_code == 202
    drain_queue()
    feedback = passes.api.get(f"/api/tasks/{task.pk}/feedback").json()
    by_title = {f["title"]: f["id"] for f in feedback["findings"]}
    refused = passes.api.post(
        f"/api/tasks/{task.pk}/answers",
        {"answers": [
            {"finding": by_title["Unquoted target directory"], "kind": "skip"},
            {"finding": by_title["Order id reaches a shell"], "kind": "skip"},
        ]},
        format="json",
    )  # fmt: skip
    assert refused.status_code == 422
    assert refused.json()["error"] == (
        f"answers[1]: {by_title['Order id reaches a shell']!r} is blocking and cannot be "
        "skipped: fix it, reply with your reasons, or name a follow-up."
    )
    assert not Answer.objects.exists()  # all or nothing: the nit's skip was not kept either

    follow_up = passes.api.post(
        f"/api/tasks/{task.pk}/answers",
        {"answers": [{"finding": by_title["Order id reaches a shell"], "kind": "follow_up",
                      "text": "acme/shop#12 replaces the shell call"}]},
        format="json",
    )  # fmt: skip
    assert follow_up.status_code == 202
    again = passes.api.post(
        f"/api/tasks/{task.pk}/answers",
        {"answers": [{"finding": by_title["Order id reaches a shell"], "kind": "reply",
                      "text": "x"}]},
        format="json",
    )  # fmt: skip
    assert again.status_code == 409 and "answered already" in again.json()["error"]
    fixed_without_sha = passes.api.post(
        f"/api/tasks/{task.pk}/answers",
        {"answers": [{"finding": by_title["Unquoted target directory"], "kind": "fixed"}]},
        format="json",
    )
    assert fixed_without_sha.status_code == 400
    assert "names the commit" in fixed_without_sha.json()["error"]
    drain_queue()
    [posted] = passes.comments_by("agent-app[bot]")
    assert posted["body"].startswith("Follow-up: acme/shop#12 replaces the shell call")


def test_the_authors_app_can_never_approve(passes, fake_github):
    gateway = AuthorGateway(author_credentials(), retry_policy())
    before = len(fake_github.calls)
    for event in ("APPROVE", "REQUEST_CHANGES"):
        with pytest.raises(ApprovalRefused, match="only the reviewer App approves"):
            gateway.review_create(RepoRef(61, None, REPO), number=7, commit_sha=passes.world.pull.head_sha, body="LGTM", event=event, comments=[], marker="<!-- m -->")  # fmt: skip
    assert len(fake_github.calls) == before  # refused before anything reached GitHub
    assert issubclass(AuthorGateway, GitHubGateway)
    # And what the author's side posts with is a poster that has no review method at all.
    from reviews.passes.author import author_poster

    assert not hasattr(author_poster(), "review_create")
    assert not any(r["state"] == "APPROVED" for r in fake_github.reviews_of(REPO, 7))


# --- who may name what (the API's authorisation) ---


def create(api, *pulls: str):
    return api.post(
        "/api/tasks/",
        {"title": "Refunds", "author": {"name": "agent-7"}, "pull_requests": list(pulls)},
        format="json",
    )


def token_client(user) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return api


def test_a_token_without_a_scope_or_with_anothers_cannot_name_a_pull_request(passes):
    from repos.models import Installation
    from reviews.models import ApiScope

    nobody = token_client(get_user_model().objects.create_user("no-scope"))
    refused = create(nobody, f"{REPO}#7")
    assert refused.status_code == 404
    assert "not a repository your API token may name" in refused.json()["error"]
    elsewhere = get_user_model().objects.create_user("other-org")
    other = Installation.objects.create(github_id=999, account_login="globex")
    ApiScope.objects.create(user=elsewhere).installations.add(other)
    assert create(token_client(elsewhere), f"{REPO}#7").status_code == 404
    assert not Task.objects.exists()
    # A scope naming the repository itself (not its installation) is enough.
    from repos.models import Repository

    named = get_user_model().objects.create_user("named")
    ApiScope.objects.create(user=named).repositories.add(Repository.objects.get(full_name=REPO))
    assert create(token_client(named), f"{REPO}#7").status_code == 201
    # A superuser's token may name any repository Tasuku reviews (this pull request is
    # in the task just made: another one).
    passes.open_pull(8)
    root = get_user_model().objects.create_superuser("root", password="pw")
    assert create(token_client(root), f"{REPO}#8").status_code == 201
    unknown = create(token_client(root), "acme/elsewhere#1")
    assert unknown.status_code == 422  # told: the caller may see every repository
    assert "not a repository Tasuku's GitHub App is installed on" in unknown.json()["error"]


def test_a_persons_pull_request_cannot_be_handed_off_to_review_passes(passes):
    passes.world.pull.author_login = "maria"
    passes.world.pull.author_type = "User"
    refused = create(passes.api, f"{REPO}#7")
    assert refused.status_code == 403
    assert refused.json()["error"] == (
        f"{REPO}#7 was opened by maria: review passes review pull requests opened by the "
        "author's App (agent-app[bot]), never anyone else's."
    )
    missing = create(passes.api, f"{REPO}#404")
    assert missing.status_code == 404 and "no such pull request" in missing.json()["error"]
    assert not Task.objects.exists()


def test_once_a_repository_leaves_the_scope_the_task_can_be_read_but_not_acted_on(passes):
    from reviews.models import ApiScope

    task = passes.create_task()
    ApiScope.objects.get(user=passes.user).installations.clear()
    for method, url, body in ENDPOINTS:
        url = url.format(id=task.pk)
        answer = getattr(passes.api, method)(url, body, format="json")
        if method == "get":
            assert answer.status_code == 200, url
        elif url.endswith("/tasks/"):
            continue
        else:
            assert answer.status_code == 403, (url, answer.status_code)
            assert answer.json()["error"] == f"{REPO} is no longer in your API scope."
    task.refresh_from_db()
    assert task.state == "open"


def test_a_pass_never_approves_a_pull_request_the_authors_app_did_not_open(passes):
    """Defence in depth: whatever let the task name it, the approval asks GitHub again."""
    passes.claude.script(ToolCall("submit_review", {"findings": []}))
    task = passes.create_task()
    passes.world.pull.author_login = "maria"  # (as if the task had named a person's PR)
    passes.world.pull.author_type = "User"
    assert passes.done(task, passes.world.pull.head_sha).status_code == 202
    drain_queue()
    assert not any(r["state"] == "APPROVED" for r in passes.world.fake.reviews_of(REPO, 7))
    from reviews.models import Review

    [review] = Review.objects.filter(run__pass_link__review_pass__task=task)
    assert not review.approved
    assert any("approves only pull requests the author's App" in n for n in review.notes)


def test_what_the_authors_app_posts_is_escaped_like_everything_else(passes):
    from tests.reviews.passes.conftest import AUTHOR_BOT

    passes.claude.script(ToolCall("submit_review", {"findings": [SHELL]}))
    task = passes.create_task()
    assert passes.done(task, passes.world.pull.head_sha).status_code == 202
    drain_queue()
    [shell] = passes.api.get(f"/api/tasks/{task.pk}/feedback").json()["findings"]
    text = "Ask @acme/security-team <img src=x onerror=alert(1)> <!-- tasuku:review:run-1 -->"
    answered = passes.api.post(
        f"/api/tasks/{task.pk}/answers",
        {"answers": [{"finding": shell["id"], "kind": "reply", "text": text}]},
        format="json",
    )
    assert answered.status_code == 202
    drain_queue()
    [posted] = [c for c in passes.comments_by(AUTHOR_BOT) if "security-team" in c["body"]]
    assert "@acme/security-team" not in posted["body"]  # no live mention
    assert "<img" not in posted["body"] and "<!-- tasuku:review:run-1" not in posted["body"]


def test_a_handoff_naming_no_reviewer_gets_the_sites_default_for_review_passes(passes):
    from repos.models import Reviewer

    created = passes.api.post(
        "/api/tasks/",
        {"title": "x", "author": {"name": "a"}, "pull_requests": [f"{REPO}#7"]},
        format="json",
    ).json()
    url = f"/api/tasks/{created['id']}/handoff"
    Reviewer.objects.create(slug="deep", engine="anthropic", model="claude-opus-5-1")
    Reviewer.objects.filter(slug="deep").update(default_for_passes=True)

    handed = passes.api.post(url, {"enabled": True}, format="json")
    assert handed.status_code == 200, handed.json()
    assert handed.json()["handoff"]["reviewer"] == "deep"
    # A reviewer named is the one used, default or not.
    named = passes.api.post(url, {"enabled": True, "reviewer": {"slug": "claude"}}, format="json")
    assert named.json()["handoff"]["reviewer"] == "claude"
    # A default that is disabled is no default: the hand-off must name one.
    Reviewer.objects.filter(slug="deep").update(enabled=False)
    refused = passes.api.post(url, {"enabled": True}, format="json")
    assert refused.status_code == 400 and "no reviewer is the default" in refused.json()["error"]


def test_a_pass_never_approves_a_pull_request_tasuku_itself_opened(passes, test_app, settings):
    """The one road to Tasuku's own pull request in a pass: an operator who named Tasuku's
    own App as the author's App. GitHub would refuse the approval; Tasuku does not ask."""
    settings.TASUKU_AUTHOR_APP_ID = str(test_app.app_id)
    settings.TASUKU_AUTHOR_APP_PRIVATE_KEY = test_app.private_key
    passes.claude.script(ToolCall("submit_review", {"findings": []}))
    passes.world.pull.author_login = f"{test_app.slug}[bot]"
    task = passes.create_task()
    assert passes.done(task, passes.world.pull.head_sha).status_code == 202
    drain_queue()
    assert not any(r["state"] == "APPROVED" for r in passes.world.fake.reviews_of(REPO, 7))
    from reviews.models import Review

    [review] = Review.objects.filter(run__pass_link__review_pass__task=task)
    assert not review.approved
    assert "not approved: GitHub does not let an App approve its own pull request" in review.notes
    # Decided before asking: no approval was ever sent for GitHub to refuse.
    approvals = [
        c for c in passes.world.fake.calls
        if c.method == "POST" and c.path.endswith("/pulls/7/reviews")
        and isinstance(c.body, dict) and c.body.get("event") == "APPROVE"
    ]  # fmt: skip
    assert approvals == []

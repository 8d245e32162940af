"""A world for review passes: the fake GitHub with Tasuku's App (the reviewer) and the
author's App both installed on acme/shop, a pull request, a scripted Claude, an API
client with a token."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from repos.models import Reviewer
from reviews.models import Task
from tests.fakes.github import rsa_keypair
from tests.fakes.github.state import Pull
from tests.fakes.models import ANTHROPIC_TEST_KEY
from tests.gitworld import REPO, World, world_build
from tests.helpers import drain_queue, post_webhook, pull_request_payload

AUTHOR_APP_ID = 5151
AUTHOR_INSTALLATION = 61
AUTHOR_SLUG = "agent-app"
AUTHOR_BOT = f"{AUTHOR_SLUG}[bot]"
REVIEWER_BOT = "tasuku-test[bot]"
MODEL = "claude-sonnet-5-5"


def finding(path: str, line: int, title: str, *, blocking: bool, severity: str) -> dict:
    return {
        "path": path, "start_line": line, "end_line": line, "severity": severity,
        "category": "security" if blocking else "robustness", "title": title,
        "body": f"{title}: this is what goes wrong, and when.", "confidence": 0.9,
        "blocking": blocking,
        # A blocking finding states how it fails (without it, it is published as a nit).
        "evidence": f"{path}:{line} fails like this: {title}." if blocking else "",
    }  # fmt: skip


EARLIER = re.compile(r"- id ([0-9a-f]{8,64}): \S+:\d+-\d+ \[\w+, [\w-]+\] (.+)")


def earlier_ids(request) -> dict[str, str]:
    """The earlier findings the reviewer is asked to rule on: title → id."""
    text = "\n".join(
        block.get("text", "") if isinstance(block, dict) else str(block)
        for message in request.messages
        for block in (
            message["content"]
            if isinstance(message["content"], list)
            else [{"text": message["content"]}]
        )
    )
    return {title.strip(): fid for fid, title in EARLIER.findall(text)}


@dataclass
class Passes:
    world: World
    api: APIClient
    client: Any
    claude: Any
    secret: str
    user: Any

    def create_task(self, *, number: int = 7, description: str = "", **handoff: Any) -> Task:
        created = self.api.post(
            "/api/tasks/",
            {"title": "Refunds", "author": {"name": "agent-7", "login": AUTHOR_BOT},
             "pull_requests": [f"{REPO}#{number}"], "description": description},
            format="json",
        )  # fmt: skip
        assert created.status_code == 201, created.json()
        task_id = created.json()["id"]
        settings = {"enabled": True, "reviewer": {"slug": "claude"}, **handoff}
        handed = self.api.post(f"/api/tasks/{task_id}/handoff", settings, format="json")
        assert handed.status_code == 200, handed.json()
        return Task.objects.get(pk=task_id)

    def open_pull(self, number: int) -> Pull:
        """Another pull request the author's App opened on the world's repository, at the
        same head (a pull request is in one open task at a time)."""
        world = self.world
        return world.fake.add_pull(
            REPO, Pull(number=number, title="More refunds", head_sha=world.head,
                       base_sha=world.base, author_login=AUTHOR_BOT, author_type="Bot"),
        )  # fmt: skip

    def done(self, task: Task, head: str, **extra: Any):
        return self.api.post(
            f"/api/tasks/{task.pk}/done", {"heads": {f"{REPO}#7": head}, **extra}, format="json"
        )

    def reviews_by(self, login: str) -> list[dict]:
        return [r for r in self.world.fake.reviews_of(REPO, 7) if r["user"]["login"] == login
                and "tasuku:review:run-" in (r.get("body") or "") or (
                    r["user"]["login"] == login and r["state"] == "APPROVED")]  # fmt: skip

    def comments_by(self, login: str) -> list[dict]:
        return [
            c for c in self.world.fake.review_comments_of(REPO, 7) if c["user"]["login"] == login
        ]

    def thread_of(self, path: str, line: int) -> dict:
        [thread] = [
            t for t in self.world.fake.threads_of(REPO, 7)
            if t["comments"][0]["path"] == path and t["comments"][0]["line"] == line
            and t["comments"][0]["user"]["login"] == REVIEWER_BOT
        ]  # fmt: skip
        return thread


@pytest.fixture(scope="session")
def author_app_key() -> tuple[str, str]:
    """The author's App key (private PEM, public PEM), one for the test process: making
    a 2,048-bit RSA key costs tens of milliseconds of CPU, and a key the gateway has not
    seen is parsed and checked again (its caches are keyed by the key's text). Each
    test's fake GitHub registers the App afresh."""
    return rsa_keypair()


@pytest.fixture
def passes(fake_github, fake_anthropic, settings, client, test_app, author_app_key) -> Passes:
    world = world_build(fake_github)
    private, public = author_app_key
    fake_github.add_app(AUTHOR_APP_ID, public, AUTHOR_SLUG)
    fake_github.add_installation(AUTHOR_INSTALLATION, "acme", app_id=AUTHOR_APP_ID)
    fake_github.install_repo(REPO, AUTHOR_INSTALLATION)
    world.pull.author_login = AUTHOR_BOT
    world.pull.author_type = "Bot"
    settings.TASUKU_AUTHOR_APP_ID = str(AUTHOR_APP_ID)
    settings.TASUKU_AUTHOR_APP_PRIVATE_KEY = private
    settings.ANTHROPIC_BASE_URL = fake_anthropic.base_url
    settings.ANTHROPIC_API_KEY = ANTHROPIC_TEST_KEY
    settings.TASUKU_FEEDBACK_QUIET_SECONDS = 0

    # Tasuku learns of the repository and the pull request; no reviewer reviews it by
    # policy (the passes' reviewer is the task's).
    Reviewer.objects.update(default_for_new_repositories=False)
    body = pull_request_payload(fake_github, world.repo, world.pull, action="opened")
    assert (
        post_webhook(client, "pull_request", body, secret=test_app.webhook_secret).status_code
        == 202
    )
    drain_queue()
    Reviewer.objects.create(slug="claude", engine="anthropic", model=MODEL)

    user = get_user_model().objects.create_user("agent-owner")
    # The token may name the repositories of Tasuku's installation on acme.
    from repos.models import Installation
    from reviews.models import ApiScope

    ApiScope.objects.create(user=user).installations.add(
        Installation.objects.get(github_id=world.repo.installation_id)
    )
    token = Token.objects.create(user=user)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return Passes(world, api, client, fake_anthropic, test_app.webhook_secret, user)


def as_json(response) -> dict:
    return json.loads(response.content)

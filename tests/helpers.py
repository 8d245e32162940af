"""Helpers shared by the tests: recorded payloads, signed posts, and running queued
django-q2 tasks in-process through the real broker."""

from __future__ import annotations

import copy
import json
import uuid
from functools import cache
from pathlib import Path
from typing import Any

from django.test import Client
from django.utils.module_loading import import_string
from django_q.brokers import get_broker
from django_q.models import OrmQ
from django_q.signing import SignedPackage

from tests.fakes.github import FakeGitHub, Pull, Repo
from webhooks.signature import signature_for

FIXTURES = Path(__file__).parent / "fixtures" / "github"


@cache
def _fixture_text(event: str, variant: str) -> str:
    return (FIXTURES / f"{event}__{variant}.json").read_text()


def payload(event: str, variant: str) -> dict[str, Any]:
    """A recorded payload (`tests/fixtures/github/<event>__<variant>.json`), fresh copy."""
    return json.loads(_fixture_text(event, variant))


def post_webhook(
    client: Client,
    event: str,
    body: dict[str, Any] | bytes,
    *,
    secret: str,
    delivery_id: str | None = None,
    hook_id: str = "123456",
    signature: str | None = None,
):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {
        "HTTP_X_GITHUB_EVENT": event,
        "HTTP_X_GITHUB_DELIVERY": delivery_id or str(uuid.uuid4()),
        "HTTP_X_GITHUB_HOOK_ID": hook_id,
        "HTTP_X_HUB_SIGNATURE_256": signature
        if signature is not None
        else signature_for(secret, raw),
        "HTTP_USER_AGENT": "GitHub-Hookshot/test",
    }
    return client.post("/webhooks/github", data=raw, content_type="application/json", **headers)


def drain_queue(limit: int = 100, *, only: str | None = None) -> list[Any]:
    """Run the tasks waiting in django-q2's ORM broker, as a worker would, until none is
    left (or, with `only`, none for that function: others stay queued). Returns the
    tasks' results."""
    results = []
    for _ in range(limit):
        ran = False
        for row in OrmQ.objects.order_by("id"):
            task = SignedPackage.loads(row.payload)
            func = task["func"]
            if only is not None and func != only:
                continue
            if not OrmQ.objects.filter(pk=row.pk).delete()[0]:
                continue
            func = import_string(func) if isinstance(func, str) else func
            results.append(func(*task.get("args", ()), **task.get("kwargs", {})))
            ran = True
            break
        if not ran:
            return results
    raise AssertionError(f"the queue did not drain after {limit} tasks")


def queued_tasks(func: str | None = None) -> list[tuple[str, tuple]]:
    """(function, args) of every task waiting in the queue, oldest first."""
    found = []
    for row in OrmQ.objects.order_by("id"):
        task = SignedPackage.loads(row.payload)
        if func is None or task["func"] == func:
            found.append((task["func"], tuple(task.get("args", ()))))
    return found


def queued_task_count() -> int:
    return get_broker().queue_size()


def _repo_json(fake: FakeGitHub, repo: Repo) -> dict[str, Any]:
    return fake._repo_json(repo)


def pull_request_payload(
    fake: FakeGitHub, repo: Repo, pull: Pull, *, action: str = "opened", **extra: Any
) -> dict[str, Any]:
    """A recorded `pull_request.<action>` payload rewritten to describe `pull` in `repo`
    as the fake GitHub knows them."""
    variant = action if (FIXTURES / f"pull_request__{action}.json").exists() else "opened"
    data = payload("pull_request", variant)
    data["action"] = action
    data["number"] = pull.number
    data["installation"] = {
        "id": repo.installation_id,
        "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMQ==",
    }
    data["repository"].update(_repo_json(fake, repo))
    pr = data["pull_request"]
    pr.update(copy.deepcopy(fake._pull_json(repo, pull)))
    if action == "synchronize":
        data["before"] = extra.pop("before", pull.base_sha)
        data["after"] = pull.head_sha
    data.update(extra)
    return data


def issue_comment_payload(
    fake: FakeGitHub,
    repo: Repo,
    number: int,
    *,
    body: str,
    login: str = "maria",
    association: str = "MEMBER",
    user_type: str = "User",
    on_pull_request: bool = True,
) -> dict[str, Any]:
    """A recorded `issue_comment.created` payload rewritten to a comment on `number`."""
    data = payload("issue_comment", "created")
    data["installation"] = {"id": repo.installation_id}
    data["repository"].update(_repo_json(fake, repo))
    data["issue"]["number"] = number
    data["issue"]["pull_request"] = (
        {"url": f"{fake.url}/repos/{repo.full_name}/pulls/{number}"} if on_pull_request else None
    )
    data["comment"].update(
        id=fake.next_id(),
        body=body,
        author_association=association,
        user={**data["comment"]["user"], "login": login, "type": user_type},
    )
    return data

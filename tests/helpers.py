"""Helpers shared by the tests: recorded payloads, signed posts, and running queued
django-q2 tasks in-process through the real broker."""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.test import Client
from django.utils.module_loading import import_string
from django_q.brokers import get_broker
from django_q.models import OrmQ
from django_q.signing import SignedPackage

# Imported with this module, as a server imports it before its first request: the import
# runs `django.setup()` again, whose logging set-up replaces the root logger's handlers,
# caplog's among them. Imported inside a test, it took that test's log capture away
# (`tests/webhooks/test_payloads.py` failed whenever a door test ran first in its process).
from tasuku.wsgi import application as tasuku_application
from tests.contract.webhooks import assert_valid_webhook
from tests.fakes.github import ActionsRun, CheckRun, FakeGitHub, Pull, Repo
from tests.fakes.github.payloads import (  # noqa: F401 - the tests' names for them
    FIXTURES,
    _repo_json,
    as_recorded,
    installation_payload,
    payload,
    pull_request_payload,
    webhook_shaped,
)
from webhooks.signature import signature_for

# All an engine's environment may hold, beside the keys its reviewer allows it.
ENGINE_ENVIRONMENT = frozenset(
    {"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED"}
)


def post_webhook(
    client: Client,
    event: str,
    body: dict[str, Any] | bytes,
    *,
    secret: str,
    delivery_id: str | None = None,
    hook_id: str = "123456",
    signature: str | None = None,
    validate: bool = True,
    **extra: str,
):
    """Post `body` as GitHub delivers webhook `event`, signed with `secret`. The payload
    must be what GitHub sends for its event and action (its published schemas:
    tests/contract/webhooks.py); a test that sends one malformed on purpose (bad JSON, a
    missing field, a refusal) says so with `validate=False`."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    if validate:
        _assert_valid_webhook(event, raw)
    headers = {
        **extra,
        "HTTP_X_GITHUB_EVENT": event,
        "HTTP_X_GITHUB_DELIVERY": delivery_id or str(uuid.uuid4()),
        "HTTP_X_GITHUB_HOOK_ID": hook_id,
        "HTTP_X_HUB_SIGNATURE_256": signature
        if signature is not None
        else signature_for(secret, raw),
        "HTTP_USER_AGENT": "GitHub-Hookshot/test",
    }
    return client.post("/webhooks/github", data=raw, content_type="application/json", **headers)


def signed_webhook(
    event: str,
    body: dict[str, Any] | bytes,
    *,
    secret: str,
    validate: bool = True,
    delivery_id: str | None = None,
    hook_id: str = "1",
) -> tuple[bytes, dict[str, str]]:
    """A delivery of `event` as GitHub sends it, for a test that sends it its own way (raw
    HTTP, a WSGI environ, a live server): the body and its headers. The payload is held to
    GitHub's schemas as `post_webhook`'s is (`validate=False`: malformed on purpose)."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    if validate:
        _assert_valid_webhook(event, raw)
    return raw, {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery_id or str(uuid.uuid4()),
        "X-GitHub-Hook-ID": hook_id,
        "X-Hub-Signature-256": signature_for(secret, raw),
        "User-Agent": "GitHub-Hookshot/test",
    }


def post_webhook_live(
    url: str, event: str, body: dict[str, Any], *, secret: str, validate: bool = True
):
    """`post_webhook` over HTTP, to a live server (a real worker's tests)."""
    import requests

    raw, headers = signed_webhook(event, body, secret=secret, validate=validate)
    return requests.post(f"{url}/webhooks/github", data=raw, headers=headers, timeout=10)


def _assert_valid_webhook(event: str, raw: bytes) -> None:
    try:
        body = json.loads(raw)
    except ValueError as error:
        raise AssertionError(
            f"webhook {event}: the body is not JSON ({error}); if on purpose, "
            "post_webhook(..., validate=False)"
        ) from None
    assert_valid_webhook(event, body)


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
    data["installation"] = _installation(repo, None)
    data["repository"].update(_repo_json(fake, repo))
    data["issue"]["number"] = number
    # A pull request's conversation is an issue with `pull_request` links; a plain
    # issue's payload has no `pull_request` at all (as recorded).
    data["issue"].pop("pull_request", None)
    if on_pull_request:
        html = f"{fake.url}/{repo.full_name}/pull/{number}"
        data["issue"]["pull_request"] = {
            "url": f"{fake.url}/repos/{repo.full_name}/pulls/{number}",
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "merged_at": None,
        }
    data["comment"].update(
        id=fake.next_id(),
        body=body,
        author_association=association,
        user={**data["comment"]["user"], "login": login, "type": user_type},
    )
    return webhook_shaped(data)


def review_comment_payload(
    fake: FakeGitHub,
    repo: Repo,
    pull: Pull,
    comment: dict[str, Any],
    *,
    association: str | None = None,
    user_type: str | None = None,
) -> dict[str, Any]:
    """A recorded `pull_request_review_comment.created` payload rewritten to `comment` (as
    `fake.person_comment` returns it) on `pull`, as GitHub lists that comment; its author
    association and its author's type as given."""
    data = payload("pull_request_review_comment", "created")
    data["installation"] = _installation(repo, None)
    data["repository"].update(_repo_json(fake, repo))
    data["pull_request"] = as_recorded(data["pull_request"], fake._pull_json(repo, pull))
    with fake.lock:
        data["comment"] = copy.deepcopy(fake._comment_json(repo, comment))
    if association is not None:
        data["comment"]["author_association"] = association
    if user_type is not None:
        data["comment"]["user"]["type"] = user_type
    data["sender"] = {**data["sender"], **data["comment"]["user"]}
    return webhook_shaped(data)


INSTALLATION_NODE_ID = "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMQ=="
# The worst conclusion of a suite's runs is the suite's (an approximation of GitHub's rule).
SUITE_CONCLUSIONS = (
    "action_required", "startup_failure", "failure", "timed_out", "cancelled", "stale",
    "neutral", "success", "skipped",
)  # fmt: skip


def _installation(repo: Repo, installation_id: int | None) -> dict[str, Any]:
    return {"id": installation_id or repo.installation_id, "node_id": INSTALLATION_NODE_ID}


def _suite_id(app_id: int, head_sha: str) -> int:
    """The fake keeps one check suite per App and commit; this is its stable id."""
    return int(hashlib.sha256(f"{app_id}:{head_sha}".encode()).hexdigest()[:8], 16)


def _suite_json(
    fake: FakeGitHub,
    repo: Repo,
    app_id: int,
    head_sha: str,
    template: dict[str, Any],
    conclusion: str | None = None,
) -> dict[str, Any]:
    """`template` (a recorded check_suite object) rewritten to the suite of App `app_id`
    on `head_sha`, with its state derived from the App's newest runs there."""
    app = fake.apps[app_id]
    latest: dict[str, CheckRun] = {}
    for run in sorted(fake.check_runs_of(repo.full_name), key=lambda r: r.id):
        if run.app_id == app_id and run.head_sha == head_sha:
            latest[run.name] = run
    done = all(run.status == "completed" for run in latest.values())
    if done and conclusion is None:
        found = {run.conclusion for run in latest.values()}
        conclusion = next((c for c in SUITE_CONCLUSIONS if c in found), "success")
    pulls = [p for p in repo.pulls.values() if p.head_sha == head_sha and p.state == "open"]
    suite_id = _suite_id(app_id, head_sha)
    suite = copy.deepcopy(template)
    suite.update(
        id=suite_id,
        node_id=f"CS_{suite_id}",
        head_branch=pulls[0].head_ref if pulls else repo.default_branch,
        head_sha=head_sha,
        status="completed" if done else "in_progress",
        conclusion=conclusion if done else None,
        url=f"{fake.url}/repos/{repo.full_name}/check-suites/{suite_id}",
        before=None,
        after=head_sha,
        pull_requests=[fake._pull_ref_json(repo, p) for p in pulls],
        app={**suite["app"], "id": app.id, "slug": app.slug, "name": app.name},
    )
    if "latest_check_runs_count" in suite:
        suite["latest_check_runs_count"] = len(latest)
        suite["check_runs_url"] = f"{suite['url']}/check-runs"
        suite["head_commit"] = {**suite["head_commit"], "id": head_sha}
    return suite


def pull_request_review_payload(
    fake: FakeGitHub,
    repo: Repo,
    pull: Pull,
    review: dict[str, Any],
    *,
    action: str = "submitted",
    installation_id: int | None = None,
) -> dict[str, Any]:
    """A recorded `pull_request_review.submitted` payload rewritten to `review` (as
    `fake.person_review` returns it) on `pull`. Webhooks spell the review's state in
    lower case ("commented"); the REST API in upper case."""
    data = payload("pull_request_review", "submitted")
    data["action"] = action
    data["installation"] = _installation(repo, installation_id)
    data["repository"].update(_repo_json(fake, repo))
    data["pull_request"] = as_recorded(data["pull_request"], fake._pull_json(repo, pull))
    data["review"].update(
        copy.deepcopy(review),
        state=review["state"].lower(),
        _links={
            "html": {"href": review["html_url"]},
            "pull_request": {"href": review["pull_request_url"]},
        },
    )
    data["sender"] = {**data["sender"], **review["user"]}
    return webhook_shaped(data)


def check_run_payload(
    fake: FakeGitHub,
    repo: Repo,
    run: CheckRun,
    *,
    action: str = "completed",
    installation_id: int | None = None,
) -> dict[str, Any]:
    """A recorded `check_run.completed` payload rewritten to `run` (e.g. another App's,
    from `fake.ci_check_run`): its App, head sha and output, its check suite, and the open
    pull requests on its head sha in `check_run.pull_requests`."""
    data = payload("check_run", "completed")
    data["action"] = action
    data["installation"] = _installation(repo, installation_id)
    data["repository"].update(_repo_json(fake, repo))
    check = data["check_run"]
    app = fake.apps[run.app_id]
    check.update(
        copy.deepcopy(fake._check_run_json(repo.full_name, run)),
        app={**check["app"], "id": app.id, "slug": app.slug, "name": app.name},
        check_suite=_suite_json(fake, repo, run.app_id, run.head_sha, check["check_suite"]),
    )
    return webhook_shaped(data)


def check_suite_payload(
    fake: FakeGitHub,
    repo: Repo,
    *,
    head_sha: str,
    app_slug: str = "github-actions",
    action: str = "completed",
    conclusion: str | None = None,
    installation_id: int | None = None,
) -> dict[str, Any]:
    """A recorded `check_suite.completed` payload rewritten to the suite of App
    `app_slug` on `head_sha`; its conclusion is the worst of the App's newest runs there
    unless given, and `check_suite.pull_requests` the open pull requests on that sha."""
    data = payload("check_suite", "completed")
    data["action"] = action
    data["installation"] = _installation(repo, installation_id)
    data["repository"].update(_repo_json(fake, repo))
    with fake.lock:
        app = fake._app_for_slug(app_slug)
    data["check_suite"] = _suite_json(fake, repo, app.id, head_sha, data["check_suite"], conclusion)
    return webhook_shaped(data)


def workflow_run_payload(
    fake: FakeGitHub,
    repo: Repo,
    run: ActionsRun,
    *,
    action: str = "completed",
    installation_id: int | None = None,
) -> dict[str, Any]:
    """A recorded `workflow_run` payload (`completed`; `requested` for the other actions)
    rewritten to `run` (e.g. from `fake.actions_runs_of`) as the fake knows it: its
    status, conclusion, attempt, head sha and branch, workflow, and the App's bot as the
    actor that dispatched it. `fake.actions_run_complete` and friends return this."""
    data = payload("workflow_run", "completed" if action == "completed" else "requested")
    data["action"] = action
    data["installation"] = _installation(repo, installation_id)
    data["repository"].update(_repo_json(fake, repo))
    data["organization"] = {**data["organization"], "login": repo.owner, "id": repo.owner_id}
    with fake.lock:
        run_json = copy.deepcopy(fake._actions_run_json(repo, run))
        workflow = fake._workflow_json(repo, run.workflow_id, run.path)
    data["workflow_run"].update(
        run_json,
        repository=as_recorded(data["workflow_run"]["repository"], run_json["repository"]),
        head_repository=as_recorded(
            data["workflow_run"]["head_repository"], run_json["repository"]
        ),
        head_commit={**data["workflow_run"]["head_commit"], **run_json["head_commit"]},
    )
    data["workflow"].update(
        {k: workflow[k] for k in data["workflow"] if k in workflow}, name=run.name
    )
    data["sender"] = {**data["sender"], **run_json["triggering_actor"]}
    return webhook_shaped(data)


def thread_resolved_payload(
    fake: FakeGitHub, repo: Repo, pull: Pull, thread: dict[str, Any], *, login: str
) -> dict[str, Any]:
    """A recorded `pull_request_review_thread.resolved` payload rewritten to describe a
    thread of the fake GitHub (as `threads_of` lists it) resolved by `login`; the fake's
    thread state is resolved too."""
    fake.person_resolves(repo.full_name, thread["id"], login=login)
    data = payload("pull_request_review_thread", "resolved")
    with fake.lock:
        comments = [copy.deepcopy(fake._comment_json(repo, c)) for c in thread["comments"]]
    data["thread"] = {"node_id": thread["id"], "comments": comments}
    data["pull_request"] = as_recorded(data["pull_request"], fake._pull_json(repo, pull))
    data["repository"] = fake._repo_json(repo)
    data["installation"] = _installation(repo, None)
    data["sender"] = {**data["sender"], "login": login, "type": "User"}
    return webhook_shaped(data)


def conversation_answers(fake: Any, full_name: str, number: int) -> list[dict[str, Any]]:
    """The comments on a pull request's conversation but Tasuku's walkthrough (one per
    pull request, kept up to date by every review: reviews/publication/walkthrough.py)."""
    from reviews.text.markers import marker_of

    return [
        c
        for c in fake.issue_comments_of(full_name, number)
        if not (c["user"]["type"] == "Bot" and marker_of(c["body"], "walkthrough"))
    ]


def wsgi_serve(environ: dict[str, Any]) -> tuple[int, list[tuple[str, str]], bytes]:
    """Call `tasuku.wsgi.application` as a WSGI server does: (status, headers, content).
    As Django's test client does, the request signals leave the test's database
    connection open (closing it would end the test's transaction)."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    application = tasuku_application
    started: list[tuple[str, list[tuple[str, str]]]] = []
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        chunks = application(
            environ, lambda status, headers, exc=None: started.append((status, headers))
        )
        content = b"".join(chunks)
        getattr(chunks, "close", lambda: None)()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
    [(status, headers)] = started
    return int(status.split()[0]), headers, content


def push_payload(
    *, full_name: str, repo_id: int, installation_id: int, ref: str, after: str,
    clone_url: str, html_url: str, default_branch: str = "main", deleted: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """A `push` payload (GitHub's webhook schema) of `after` to `ref` of a repository at
    `clone_url`; its repository and sender are the recorded pull request event's, renamed."""
    base = payload("pull_request", "opened")
    repository = base["repository"]
    owner, name = full_name.split("/", 1)
    repository.update(
        id=repo_id, name=name, full_name=full_name, clone_url=clone_url, html_url=html_url,
        default_branch=default_branch,
    )  # fmt: skip
    repository["owner"]["login"] = owner
    commit = {
        "id": after, "tree_id": "4b825dc642cb6eb9a060e54bf8d69288fbee4904", "distinct": True,
        "message": "reviewers", "timestamp": "2026-12-06T03:00:00Z",
        "url": f"{html_url}/commit/{after}",
        "author": {"name": "Ann", "email": "ann@example.com"},
        "committer": {"name": "Ann", "email": "ann@example.com"},
        "added": [], "removed": [], "modified": ["reviewers/claude.toml"],
    }  # fmt: skip
    return {
        "ref": ref,
        "before": "0" * 40,
        "after": "0" * 40 if deleted else after,
        "created": False,
        "deleted": deleted,
        "forced": False,
        "base_ref": None,
        "compare": f"{html_url}/compare/{after[:12]}",
        "commits": [] if deleted else [commit],
        "head_commit": None if deleted else commit,
        "repository": repository,
        "pusher": {"name": "ann", "email": "ann@example.com"},
        "sender": base["sender"],
        "installation": {
            "id": installation_id,
            "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMQ==",
        },
    }


@contextmanager
def log_records(level: int = logging.INFO) -> Iterator[list[logging.LogRecord]]:
    """Every log record written in the block, its work's fields put on it (tasuku/logs.py)."""
    from tasuku.logs import ContextFilter

    records: list[logging.LogRecord] = []
    handler = logging.Handler(level)
    handler.addFilter(ContextFilter())
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger().addHandler(handler)
    try:
        yield records
    finally:
        logging.getLogger().removeHandler(handler)

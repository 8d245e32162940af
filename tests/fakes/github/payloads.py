"""Webhook payloads as GitHub sends them about what the fake GitHub holds: a recorded
delivery (`tests/fixtures/github/<event>__<variant>.json`) rewritten with the fake's
objects, in the shape GitHub's webhook schemas describe (tests/contract/webhooks.py).
Free of Django: the demo (`python -m tests.fakes.serve`) sends them too."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.fakes.github import FakeGitHub
    from tests.fakes.github.state import Pull, Repo

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "github"


@cache
def _fixture_text(event: str, variant: str) -> str:
    return (FIXTURES / f"{event}__{variant}.json").read_text()


def payload(event: str, variant: str) -> dict[str, Any]:
    """A recorded payload (`tests/fixtures/github/<event>__<variant>.json`), fresh copy."""
    return json.loads(_fixture_text(event, variant))


def _repo_json(fake: FakeGitHub, repo: Repo) -> dict[str, Any]:
    return fake._repo_json(repo)


# Members of the fake's REST objects that GitHub's webhook schemas do not describe (their
# objects forbid other members): a user's `user_view_type`, a full repository's counts.
_REST_ONLY_USER = ("user_view_type",)
_REST_ONLY_REPOSITORY = ("network_count", "subscribers_count")


def as_recorded(recorded: dict[str, Any], fresh: dict[str, Any]) -> dict[str, Any]:
    """`fresh` (one of the fake's REST objects) in the shape of `recorded` (the same
    object as a recorded webhook carries it): the recording's members, with the fake's
    values. A webhook's pull request beside a review or a thread, or a workflow run's
    repository, is a smaller object than REST's, and its schema forbids the rest."""
    return {key: copy.deepcopy(fresh.get(key, value)) for key, value in recorded.items()}


def webhook_shaped(node: Any) -> Any:
    """`node` (a payload built from the fake's REST objects) as webhooks spell its users
    and repositories: without the REST-only members above, and each repository with the
    `custom_properties` webhooks always carry."""
    if isinstance(node, list):
        return [webhook_shaped(item) for item in node]
    if not isinstance(node, dict):
        return node
    shaped = {key: webhook_shaped(value) for key, value in node.items()}
    if "login" in shaped and "type" in shaped:
        for key in _REST_ONLY_USER:
            shaped.pop(key, None)
    if "full_name" in shaped and "owner" in shaped and "default_branch" in shaped:
        for key in _REST_ONLY_REPOSITORY:
            shaped.pop(key, None)
        shaped.setdefault("custom_properties", {})
    return shaped


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
    return webhook_shaped(data)


def installation_payload(
    fake: FakeGitHub, installation_id: int, repos: list[Repo], *, action: str = "created"
) -> dict[str, Any]:
    """A recorded `installation.<action>` payload rewritten to describe the fake's
    installation and `repos`, sent by the account that installed the App."""
    data = payload("installation", "created")
    data["action"] = action
    installation = fake.installations[installation_id]
    data["installation"] = as_recorded(data["installation"], fake._installation_json(installation))
    # The events a webhook names are those an App subscribes to (the schema's list):
    # installation events reach every App unasked.
    data["installation"]["events"] = [
        event for event in data["installation"]["events"] if not event.startswith("installation")
    ]
    data["repositories"] = [
        as_recorded(data["repositories"][0], fake._repo_json(repo)) for repo in repos
    ]
    data["sender"] = as_recorded(
        data["sender"], fake._user_json("octocat", "User", installation.account_id + 1)
    )
    return webhook_shaped(data)

"""GitHub's JSON objects, whole: every field GitHub's description requires (simple-user,
repository, integration, pull-request...), with the fake's values for the ones Tasuku
reads and GitHub's usual ones for the rest. `base` is the fake's URL: it serves both the
API (`{base}/repos/...`) and the web pages (`{base}/{owner}/{repo}`), as the rest of the
fake does.

Kept faithful by the contract tests (tests/fakes/github/contract.py): an object missing a
required field, or with a wrong type, fails the test that made the fake send it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

CREATED_AT = "2026-01-01T00:00:00Z"


def user(base: str, login: str, kind: str = "User", user_id: int = 1) -> dict[str, Any]:
    """A `simple-user` (a person, an organization or an App's bot)."""
    api = f"{base}/users/{quote(login, safe='')}"
    html = f"{base}/apps/{login.removesuffix('[bot]')}" if kind == "Bot" else f"{base}/{login}"
    return {
        "login": login,
        "id": user_id,
        "node_id": f"U_{user_id}",
        "avatar_url": f"{base}/avatars/u/{user_id}?v=4",
        "gravatar_id": "",
        "url": api,
        "html_url": html,
        "followers_url": f"{api}/followers",
        "following_url": f"{api}/following{{/other_user}}",
        "gists_url": f"{api}/gists{{/gist_id}}",
        "starred_url": f"{api}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{api}/subscriptions",
        "organizations_url": f"{api}/orgs",
        "repos_url": f"{api}/repos",
        "events_url": f"{api}/events{{/privacy}}",
        "received_events_url": f"{api}/received_events",
        "type": kind,
        "user_view_type": "public",
        "site_admin": False,
    }


def repository(
    base: str,
    *,
    repo_id: int,
    full_name: str,
    private: bool,
    owner: dict[str, Any],
    default_branch: str,
) -> dict[str, Any]:
    """A `full-repository` (which is also a whole `repository` and `minimal-repository`)."""
    name = full_name.split("/", 1)[1]
    api = f"{base}/repos/{full_name}"
    html = f"{base}/{full_name}"
    host = base.split("://", 1)[-1]
    return {
        "id": repo_id,
        "node_id": f"R_{repo_id}",
        "name": name,
        "full_name": full_name,
        "private": private,
        "owner": owner,
        "html_url": html,
        "description": None,
        "fork": False,
        "url": api,
        "archive_url": f"{api}/{{archive_format}}{{/ref}}",
        "assignees_url": f"{api}/assignees{{/user}}",
        "blobs_url": f"{api}/git/blobs{{/sha}}",
        "branches_url": f"{api}/branches{{/branch}}",
        "collaborators_url": f"{api}/collaborators{{/collaborator}}",
        "comments_url": f"{api}/comments{{/number}}",
        "commits_url": f"{api}/commits{{/sha}}",
        "compare_url": f"{api}/compare/{{base}}...{{head}}",
        "contents_url": f"{api}/contents/{{+path}}",
        "contributors_url": f"{api}/contributors",
        "deployments_url": f"{api}/deployments",
        "downloads_url": f"{api}/downloads",
        "events_url": f"{api}/events",
        "forks_url": f"{api}/forks",
        "git_commits_url": f"{api}/git/commits{{/sha}}",
        "git_refs_url": f"{api}/git/refs{{/sha}}",
        "git_tags_url": f"{api}/git/tags{{/sha}}",
        "git_url": f"git://{host}/{full_name}.git",
        "issue_comment_url": f"{api}/issues/comments{{/number}}",
        "issue_events_url": f"{api}/issues/events{{/number}}",
        "issues_url": f"{api}/issues{{/number}}",
        "keys_url": f"{api}/keys{{/key_id}}",
        "labels_url": f"{api}/labels{{/name}}",
        "languages_url": f"{api}/languages",
        "merges_url": f"{api}/merges",
        "milestones_url": f"{api}/milestones{{/number}}",
        "notifications_url": f"{api}/notifications{{?since,all,participating}}",
        "pulls_url": f"{api}/pulls{{/number}}",
        "releases_url": f"{api}/releases{{/id}}",
        "ssh_url": f"git@{host.split(':')[0]}:{full_name}.git",
        "stargazers_url": f"{api}/stargazers",
        "statuses_url": f"{api}/statuses/{{sha}}",
        "subscribers_url": f"{api}/subscribers",
        "subscription_url": f"{api}/subscription",
        "tags_url": f"{api}/tags",
        "teams_url": f"{api}/teams",
        "trees_url": f"{api}/git/trees{{/sha}}",
        "clone_url": f"{html}.git",
        "mirror_url": None,
        "hooks_url": f"{api}/hooks",
        "svn_url": html,
        "homepage": None,
        "language": None,
        "forks_count": 0,
        "forks": 0,
        "stargazers_count": 0,
        "watchers_count": 0,
        "watchers": 0,
        "size": 0,
        "default_branch": default_branch,
        "open_issues_count": 0,
        "open_issues": 0,
        "is_template": False,
        "topics": [],
        "has_issues": True,
        "has_projects": True,
        "has_wiki": True,
        "has_pages": False,
        "has_downloads": True,
        "has_discussions": False,
        "archived": False,
        "disabled": False,
        "visibility": "private" if private else "public",
        "pushed_at": CREATED_AT,
        "created_at": CREATED_AT,
        "updated_at": CREATED_AT,
        "allow_forking": True,
        "web_commit_signoff_required": False,
        "license": None,
        "network_count": 0,
        "subscribers_count": 0,
    }


def integration(
    base: str,
    *,
    app_id: int,
    slug: str,
    name: str,
    owner: dict[str, Any],
    permissions: dict[str, str] | None = None,
    events: list[str] | None = None,
) -> dict[str, Any]:
    """An `integration`: a GitHub App."""
    return {
        "id": app_id,
        "slug": slug,
        "client_id": f"Iv1.{app_id:016x}",
        "node_id": f"A_{app_id}",
        "owner": owner,
        "name": name,
        "description": None,
        "external_url": f"{base}/apps/{slug}",
        "html_url": f"{base}/apps/{slug}",
        "created_at": CREATED_AT,
        "updated_at": CREATED_AT,
        "permissions": dict(permissions or {}),
        "events": list(events or []),
    }


def link(href: str) -> dict[str, str]:
    return {"href": href}


def pull_links(base: str, full_name: str, number: int, head_sha: str) -> dict[str, Any]:
    api = f"{base}/repos/{full_name}"
    return {
        "self": link(f"{api}/pulls/{number}"),
        "html": link(f"{base}/{full_name}/pull/{number}"),
        "issue": link(f"{api}/issues/{number}"),
        "comments": link(f"{api}/issues/{number}/comments"),
        "review_comments": link(f"{api}/pulls/{number}/comments"),
        "review_comment": link(f"{api}/pulls/comments{{/number}}"),
        "commits": link(f"{api}/pulls/{number}/commits"),
        "statuses": link(f"{api}/statuses/{head_sha}"),
    }


def pull_urls(base: str, full_name: str, number: int, head_sha: str) -> dict[str, str]:
    api = f"{base}/repos/{full_name}"
    html = f"{base}/{full_name}/pull/{number}"
    return {
        "url": f"{api}/pulls/{number}",
        "html_url": html,
        "diff_url": f"{html}.diff",
        "patch_url": f"{html}.patch",
        "issue_url": f"{api}/issues/{number}",
        "commits_url": f"{api}/pulls/{number}/commits",
        "review_comments_url": f"{api}/pulls/{number}/comments",
        "review_comment_url": f"{api}/pulls/comments{{/number}}",
        "comments_url": f"{api}/issues/{number}/comments",
        "statuses_url": f"{api}/statuses/{head_sha}",
    }


def review_links(base: str, full_name: str, number: int, review_id: int) -> dict[str, Any]:
    return {
        "html": link(f"{base}/{full_name}/pull/{number}#pullrequestreview-{review_id}"),
        "pull_request": link(f"{base}/repos/{full_name}/pulls/{number}"),
    }


def review_comment_links(base: str, full_name: str, number: int, comment_id: int) -> dict[str, Any]:
    return {
        "self": link(f"{base}/repos/{full_name}/pulls/comments/{comment_id}"),
        "html": link(f"{base}/{full_name}/pull/{number}#discussion_r{comment_id}"),
        "pull_request": link(f"{base}/repos/{full_name}/pulls/{number}"),
    }


def reactions(url: str) -> dict[str, Any]:
    return {
        "url": url,
        "total_count": 0,
        "+1": 0,
        "-1": 0,
        "laugh": 0,
        "confused": 0,
        "heart": 0,
        "hooray": 0,
        "eyes": 0,
        "rocket": 0,
    }

"""The author's App: the GitHub identity the coding agent works as. Tasuku posts the
author's answers as it — replies in threads and conversation comments — and nothing
else: this module offers no way to post a review, and the gateway it builds refuses an
approving or changes-requesting review outright, so the author's credentials can never
approve (GitHub would also refuse an App approving its own pull requests)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from repos.github import GitHubError, GitHubGateway, RepoRef
from repos.github.config import AppCredentials, private_key_problem, retry_policy
from repos.models import Repository


class ApprovalRefused(PermissionError):
    pass


class AuthorGateway(GitHubGateway):
    """A gateway for the author's App that cannot approve or request changes, whose every
    post is made with a token minted for it, scoped to the one repository and revoked
    right after (an agent works as this App: no token of its may outlive its post)."""

    single_use_tokens = True
    shared_api_tokens = False

    def review_create(self, repo: RepoRef, *, event: str, **kwargs):  # type: ignore[override]
        if event != "COMMENT":
            raise ApprovalRefused(
                f"The author's App may not post a {event} review: only the reviewer App approves."
            )
        return super().review_create(repo, event=event, **kwargs)


def author_configured() -> list[str]:
    """The settings missing for the author's App (empty when it is configured)."""
    missing = []
    if not settings.TASUKU_AUTHOR_APP_ID:
        missing.append("TASUKU_AUTHOR_APP_ID")
    if not (settings.TASUKU_AUTHOR_APP_PRIVATE_KEY or settings.TASUKU_AUTHOR_APP_PRIVATE_KEY_PATH):
        missing.append("TASUKU_AUTHOR_APP_PRIVATE_KEY or TASUKU_AUTHOR_APP_PRIVATE_KEY_PATH")
    return missing


def author_credentials() -> AppCredentials:
    missing = author_configured()
    if missing:
        raise GitHubError(
            f"The author's App is not configured: set {', '.join(missing)}.",
            permanent=True,
            code="author-app-credentials",
        )
    pem = settings.TASUKU_AUTHOR_APP_PRIVATE_KEY.strip().replace("\\n", "\n")
    variable = "TASUKU_AUTHOR_APP_PRIVATE_KEY"
    if not pem:
        variable = "TASUKU_AUTHOR_APP_PRIVATE_KEY_PATH"
        try:
            pem = Path(settings.TASUKU_AUTHOR_APP_PRIVATE_KEY_PATH).read_text()
        except OSError as exc:
            raise GitHubError(
                f"{variable}: {exc}", permanent=True, code="author-app-credentials"
            ) from exc
    problem = private_key_problem(pem, variable)
    if problem:
        raise GitHubError(problem, permanent=True, code="author-app-credentials")
    try:
        app_id = int(settings.TASUKU_AUTHOR_APP_ID)
    except ValueError as exc:
        raise GitHubError(
            "TASUKU_AUTHOR_APP_ID must be a number.", permanent=True, code="author-app-credentials"
        ) from exc
    return AppCredentials(
        app_id=app_id, private_key=pem, webhook_secret="", slug="", base_url=settings.GITHUB_API_URL
    )


class AuthorPoster:
    """Posts as the author's App: a reply in a review thread, or a conversation comment.
    Returns the GitHub id of what was posted."""

    def __init__(self, gateway: AuthorGateway) -> None:
        self._gateway = gateway

    def _repo(self, full_name: str) -> RepoRef:
        installation_id = self._gateway.repository_installation_id(full_name)
        if installation_id is None:
            raise GitHubError(
                f"The author's App is not installed on {full_name}.",
                permanent=True,
                code="author-app-not-installed",
            )
        # Repository ids are GitHub's, the same whichever App asks: the token is scoped to
        # the one repository the post is for.
        repository_id = (
            Repository.objects.filter(full_name=full_name)
            .values_list("github_id", flat=True)
            .first()
        )
        return RepoRef(installation_id, repository_id, full_name)

    def reply(self, full_name: str, number: int, comment_id: int, body: str, marker: str) -> int:
        posted = self._gateway.comment_reply(
            self._repo(full_name), number=number, comment_id=comment_id, body=body, marker=marker
        )
        return posted.id

    def comment(self, full_name: str, number: int, body: str, marker: str) -> int:
        posted = self._gateway.issue_comment_create(
            self._repo(full_name), number=number, body=body, marker=marker
        )
        return posted.id


def author_gateway() -> AuthorGateway:
    return AuthorGateway(author_credentials(), retry_policy())


def author_poster() -> AuthorPoster:
    return AuthorPoster(author_gateway())


def author_bot_login() -> str:
    """The login the author's App opens pull requests as (`<slug>[bot]`), asked of
    GitHub once per process."""
    return f"{author_gateway().app_slug()}[bot]"

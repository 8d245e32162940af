"""A pull request on GitHub reviewed from the command line (`manage.py review <URL>`),
with a person's token instead of a GitHub App: the one review pipeline
(reviews/pipeline/flow.py), the same reviewers, the checkout fetched from GitHub with the
token, and — when asked (`--post`) — the review published on the pull request as one
review with inline comments, posted as the token's owner.

What only an App does is left out, and said: the `Tasuku · <reviewer>` check run (GitHub
lets only an App write check runs), approvals, the walkthrough comment, and answering
and resolving its threads on later pushes. The review is recorded as a local one (the
dashboard's `local` installation), never on the App's repository of the same name.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction

from repos.github import (
    GitHubError,
    PullRequestInfo,
    RepoRef,
    RepositoryInfo,
    ReviewInfo,
    retry_policy,
)
from repos.github.manifest import GHE_COM, hosts
from repos.github.personal import PersonalGateway
from repos.models import LOCAL_INSTALLATION, Installation, Repository
from repos.services import policy_create_default
from reviews.core.context import Context, Published
from reviews.local.review import (
    Local,
    LocalReview,
    LocalReviewError,
    review_execute,
    reviewer_enabled,
)
from reviews.models import Finding, PullRequest, Review
from reviews.publication import threads
from reviews.scope.coverage import entries_of, unreviewed
from reviews.text.rendering import ReviewContext, comment_payload, review_body, run_marker
from reviews.validation.findings import Validated
from reviews.validation.reconcile import Decision
from sandbox.contract import ReviewResult
from sandbox.workspace import Checkout, Materialise, Workspace

PULL_PATH = re.compile(
    r"^/(?P<owner>[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)/(?P<name>[A-Za-z0-9._-]+)"
    r"/pulls?/(?P<number>[1-9][0-9]*)(?:/.*)?$"
)
# The environment variables a token is taken from, in order (gh's own names: GH_TOKEN
# and GITHUB_TOKEN for github.com, the ENTERPRISE ones for a GitHub Enterprise Server).
TOKEN_VARIABLES = ("GITHUB_TOKEN", "GH_TOKEN")
ENTERPRISE_TOKEN_VARIABLES = ("GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN")
GH_SECONDS = 15
# Where the review's body links to the run's page on Tasuku — a page on the machine that
# ran the command, which nobody reading the pull request can open — the posted review
# says where it came from instead.
RUN_LINK = "tasuku-run-page-on-this-machine"
WHAT_AN_APP_ADDS = (
    "A GitHub App adds what a token cannot: the `Tasuku · {reviewer}` check run (a "
    "required check), approvals where the policy allows, and the threads answered and "
    "resolved on later pushes (README, *Connect a GitHub App*)."
)


class RemoteReviewError(LocalReviewError):
    """A pull request address, token or GitHub answer that stops the review, said in
    one line."""


@dataclass(frozen=True)
class PullAddress:
    """A pull request's address on github.com or a GitHub Enterprise Server."""

    web_url: str  # the server's web origin: https://github.com
    api_url: str  # its REST API: https://api.github.com, https://<host>/api/v3
    owner: str
    name: str
    number: int

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def host(self) -> str:
        return urlsplit(self.web_url).netloc

    @property
    def url(self) -> str:
        return f"{self.web_url}/{self.full_name}/pull/{self.number}"


def pull_address(text: str) -> PullAddress | None:
    """`https://<host>/<owner>/<repo>/pull/<n>` (any page of it: `/files`, a `#…`
    anchor) as a PullAddress; None when `text` is not such a URL. The API is GitHub's
    for github.com, GITHUB_API_URL for the server GITHUB_WEB_URL names,
    `https://api.<name>.ghe.com` for `<name>.ghe.com` (GitHub Enterprise Cloud with data
    residency), and `https://<host>/api/v3` for any other (a GitHub Enterprise Server)."""
    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    match = PULL_PATH.match(parts.path)
    if match is None:
        return None
    origin = f"{parts.scheme}://{parts.netloc}".lower()
    configured = urlsplit(settings.GITHUB_WEB_URL)
    if origin == f"{configured.scheme}://{configured.netloc}".lower():
        api = settings.GITHUB_API_URL
    elif parts.netloc.lower() in ("github.com", "www.github.com"):
        origin, api = "https://github.com", "https://api.github.com"
    elif (parts.hostname or "").endswith(GHE_COM):
        origin, api = hosts(parts.hostname or "")
    else:
        api = f"{origin}/api/v3"
    return PullAddress(
        web_url=origin,
        api_url=api.rstrip("/"),
        owner=match["owner"],
        name=match["name"],
        number=int(match["number"]),
    )


def token_find(address: PullAddress, environ: dict[str, str] | None = None) -> tuple[str, str]:
    """(a token for the pull request's server, where it came from): the environment
    (GITHUB_TOKEN, GH_TOKEN; for an Enterprise server GH_ENTERPRISE_TOKEN too), else the
    GitHub CLI's login (`gh auth token`). RemoteReviewError, saying how to give one,
    when there is none."""
    environ = os.environ if environ is None else environ
    names = TOKEN_VARIABLES
    if address.host.lower() != "github.com":
        names = ENTERPRISE_TOKEN_VARIABLES + TOKEN_VARIABLES
    for name in names:
        if environ.get(name, "").strip():
            return environ[name].strip(), name
    gh = shutil.which("gh")
    if gh:
        try:
            done = subprocess.run(  # noqa: S603
                [gh, "auth", "token", "--hostname", address.host],
                capture_output=True,
                text=True,
                timeout=GH_SECONDS,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            done = None
        if done is not None and done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip(), "gh auth token"
    raise RemoteReviewError(
        f"no token for {address.host}: set GITHUB_TOKEN to a token that can read "
        f"{address.full_name} (a fine-grained token with Pull requests: read and Contents: "
        "read; with --post, Pull requests: write), or log in with `gh auth login`"
    )


def _mirror(address: PullAddress, info: RepositoryInfo) -> Path | None:
    """The repository's mirror in the checkout cache, named by its server and id (a
    server's ids are its own), or None with the cache off."""
    cache = settings.TASUKU_CHECKOUT_CACHE
    if not cache or cache.lower() == "off":
        return None
    host = re.sub(r"[^A-Za-z0-9.-]", "_", address.host)
    return Path(cache) / f"{host}-{info.id}.git"


def _repository(address: PullAddress, info: RepositoryInfo) -> Repository:
    """The pull request's repository as Tasuku records a local review's: under the
    `local` installation, named `local/<owner>.<repo>` (an App's repository of the same
    name stays the App's), by an id no GitHub repository has."""
    installation, _ = Installation.objects.get_or_create(
        github_id=LOCAL_INSTALLATION, defaults={"account_login": "local", "account_type": "Local"}
    )
    key = f"{address.host.lower()}:{info.id or address.full_name.lower()}"
    github_id = -int(hashlib.sha256(key.encode()).hexdigest()[:12], 16)
    repository = Repository.objects.filter(github_id=github_id).first()
    if repository is None:
        name = f"local/{address.owner}.{address.name}"
        if Repository.objects.filter(full_name=name).exists():
            name = f"{name}-{-github_id % 10**6:06d}"
        repository = Repository.objects.create(
            installation=installation, github_id=github_id, full_name=name, enabled=False
        )
        policy_create_default(repository=repository)
    return repository


def _pull_request(repository: Repository, info: PullRequestInfo) -> PullRequest:
    fields = {
        "title": info.title,
        "body": info.body,
        "author_login": info.author_login,
        "author_type": info.author_type,
        "state": info.state,
        "draft": info.draft,
        "merged": info.merged,
        "head_sha": info.head_sha,
        "head_ref": info.head_ref,
        "base_sha": info.base_sha,
        "base_ref": info.base_ref,
        "html_url": info.html_url,
        "changed_files": info.changed_files,
    }
    with transaction.atomic():
        pull_request, _ = PullRequest.objects.update_or_create(
            repository=repository, number=info.number, defaults=fields
        )
    return pull_request


@dataclass(frozen=True)
class Posted:
    url: str
    login: str
    comments: int
    body_only: bool  # GitHub refused the anchors: the findings went into the body


class Remote(Local):
    """A pull request on GitHub, read and fetched with a person's token: no guards (the
    command reads the pull request just before), a checkout from GitHub through the
    checkout cache, no conversation but the dismissals Tasuku recorded, and a
    publication that records which earlier findings are gone and — with `post` — posts
    the review as one review with inline comments."""

    def __init__(
        self,
        gateway: PersonalGateway,
        address: PullAddress,
        info: RepositoryInfo,
        *,
        post: bool,
    ) -> None:
        mirror = _mirror(address, info)
        super().__init__(mirror or Path(settings.TASUKU_CHECKOUT_CACHE))
        self.gateway = gateway
        self.address = address
        self.info = info
        self.mirror = mirror
        self.post = post
        self.posted: Posted | None = None

    def checkout(
        self,
        ctx: Context,
        workspace: Workspace,
        previous: str | None,
        since: str | None,
        materialise: Materialise | None = None,
        agents: bool = True,
    ) -> Checkout:
        return workspace.checkout(
            clone_url=self.info.clone_url,
            token=self.gateway.contents_token(RepoRef(0, 0, self.address.full_name)),
            head_sha=ctx.run.head_sha,
            base_sha=ctx.run.base_sha,
            previous_sha=previous,
            since_sha=since,
            materialise=materialise,
            agents=agents,
            mirror=self.mirror,
        )

    def publish(
        self,
        ctx: Context,
        review: Review,
        result: ReviewResult,
        validated: list[Validated],
        *,
        open_now: list[Finding],
        earlier: list[Finding],
        decisions: dict[str, Decision],
        talk: threads.Conversation,
    ) -> Published:
        super().publish(
            ctx, review, result, validated, open_now=open_now, earlier=earlier,
            decisions=decisions, talk=talk,
        )  # fmt: skip
        if self.post:
            self.posted = self._post(ctx, review, result, validated)
        return Published(approved=False)  # a person's token never approves on Tasuku's behalf

    def _post(
        self, ctx: Context, review: Review, result: ReviewResult, validated: list[Validated]
    ) -> Posted:
        """One COMMENT review: the published findings inline (as the App's review has
        them), the rest of what the App's body says; GitHub refusing the anchors (422)
        puts them in the body instead, as for the App."""
        run = ctx.run
        context = ReviewContext(
            run_id=run.pk,
            reviewer=run.reviewer.slug,
            base_sha=run.incremental_since or run.base_sha,
            head_sha=run.head_sha,
            dashboard_url=RUN_LINK,
            filtered=tuple((p, r) for p, r in run.filtered),
            sanitised=tuple(run.sanitised),
            incremental=bool(run.incremental_since),
            omitted=tuple((o["path"], o["reason"]) for o in run.omitted),
            guidelines=tuple(review.guidelines),
            not_reviewed=tuple((e.path, e.reason) for e in unreviewed(entries_of(review.coverage))),
        )
        inline = [v for v in validated if v.published]
        repo = RepoRef(installation_id=0, repository_id=None, full_name=self.address.full_name)
        marker = run_marker(run.pk)

        def send(body: str, comments: list[dict]) -> ReviewInfo:
            return self.gateway.review_create(
                repo,
                number=self.address.number,
                commit_sha=run.head_sha,
                body=_from_the_command_line(body, run.reviewer.slug),
                event="COMMENT",
                comments=comments,
                marker=marker,
            )

        body_only = False
        try:
            posted = send(
                review_body(result.summary, validated, context),
                [comment_payload(v) for v in inline],
            )
        except GitHubError as exc:
            if exc.status != 422 or not inline:
                raise
            body_only = True
            posted = send(
                review_body(result.summary, validated, context, inline=inline, body_only=True),
                [],
            )
        Review.objects.filter(pk=review.pk).update(
            body=posted.body, github_review_id=posted.id, github_review_url=posted.html_url,
            body_only=body_only,
        )  # fmt: skip
        return Posted(
            url=posted.html_url,
            login=posted.user_login,
            comments=0 if body_only else len(inline),
            body_only=body_only,
        )


def _from_the_command_line(body: str, reviewer: str) -> str:
    """The App's review body, its links to Tasuku's run page (on the machine that ran
    the command) replaced by where the review came from and what an App would add."""
    said = (
        "Posted from the command line (`manage.py review`) with a person's token. "
        + WHAT_AN_APP_ADDS.format(reviewer=reviewer)
    )
    body = body.replace(f"[Run details]({RUN_LINK})", said)
    return body.replace(f"[see them all]({RUN_LINK})", "the command's report lists them all")


@dataclass
class RemoteReview:
    review: LocalReview
    address: PullAddress
    pull: PullRequestInfo
    mirror: Path | None  # where the head's files can be read (`git show`), if kept
    posted: Posted | None
    token_from: str


def pull_review(
    *, url: str, reviewer_slug: str, post: bool, environ: dict[str, str] | None = None
) -> RemoteReview:
    """Review the pull request at `url` with a person's token and record the review:

    1. The token (the environment, or `gh auth token`), the pull request and its
       repository, read through the gateway with it.
    2. The repository and pull request recorded as a local review's.
    3. `review_execute` with the Remote forge: the checkout fetched from GitHub with the
       token (through the checkout cache), the pipeline, and with `post` the review
       posted on the pull request.
    """
    address = pull_address(url)
    if address is None:
        raise RemoteReviewError(
            f"not a pull request's address: {url} (expected https://github.com/<owner>/"
            "<repo>/pull/<number>, or the same on your GitHub Enterprise Server)"
        )
    reviewer = reviewer_enabled(reviewer_slug)
    token, token_from = token_find(address, environ)
    gateway = PersonalGateway(token, address.api_url, retry_policy())
    repo = RepoRef(installation_id=0, repository_id=None, full_name=address.full_name)
    try:
        info = gateway.pull_request_get(repo, number=address.number)
        repository_info = gateway.repository_get(repo)
    except GitHubError as exc:
        if exc.status == 401:
            raise RemoteReviewError(
                f"GitHub refused the token from {token_from} (401, bad credentials): it is "
                f"expired, revoked, or not a token of {address.host}"
            ) from exc
        if exc.status in (403, 404):
            raise RemoteReviewError(
                f"GitHub refused {address.url} to the token from {token_from} ({exc.status}): "
                f"it must be able to read {address.full_name} (GitHub answers 404 for a "
                "private repository a token cannot see)"
            ) from exc
        raise
    repository = _repository(address, repository_info)
    pull_request = _pull_request(repository, info)
    forge = Remote(gateway, address, repository_info, post=post)
    review = review_execute(pull_request, reviewer, info.base_sha, info.head_sha, forge)
    return RemoteReview(
        review=review,
        address=address,
        pull=info,
        mirror=forge.mirror,
        posted=forge.posted,
        token_from=token_from,
    )

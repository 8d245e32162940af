"""A stateful fake of GitHub's REST API, served over real HTTP on 127.0.0.1.

Tasuku talks to it through its real gateway (PyGithub underneath), pointed here by
GITHUB_API_URL, so what is tested is the product's actual HTTP behaviour. The fake is
faithful where Tasuku's correctness depends on it:

- App JWTs are verified (RS256 against the test App's public key, `iss`, `exp` no more
  than 10 minutes ahead, `iat` not in the future) and refused with 401 otherwise.
- Installation tokens are minted by `POST /app/installations/{id}/access_tokens`,
  scoped to the repositories and permissions asked for (never more than the
  installation has: 422), expire, and are refused with 401 "Bad credentials" when
  unknown or expired. A repository outside a token's scope answers 404, a missing
  permission 403 "Resource not accessible by integration", as GitHub does.
- Several Apps may be installed on one repository (`install_repo`); each reaches it only
  through its own installation.
- Check runs of other Apps (`ci_check_run`), commit statuses (`ci_status` or the API) and
  branch protection (`protect`, read with Administration: read) are there for the checks
  a commit must pass; `person_review` records a person's review.
- Lists paginate with `per_page` (max 100) and absolute `Link` headers on this host.
- Errors carry GitHub's body shape: {"message", "documentation_url", "status"}, and
  422s an `errors` list.
- A test can make the next N matching calls answer 5xx, a 403/429 rate limit, or drop
  the connection, either before or after the call took effect (`inject`).
- GitHub Actions (`actions`): workflow files on the default branch of a git-backed
  repository (`add_workflow`), `workflow_dispatch` with GitHub's errors, workflow runs
  that tests drive (`actions_run_complete` returns the `workflow_run` webhook payload),
  and (`oidc`) the OIDC issuer of the runs' jobs: discovery, JWKS, key rotation, tokens
  minted for a run (`oidc_token`, or through `actions_runner_env` as a job asks) and
  forged ones.
- Merge queues (`merge_queue`): merge groups built in a git-backed repository's history
  (`merge_queue_enqueue`, `merge_queue_merge`), commits compared as GitHub compares them,
  and the pull requests associated with a commit.
- Issues (`issues`): `add_issue`, read by the GitHub issue connector; a pull request's
  number reads as its issue.
- The App's webhook delivery log (`hooks`): attempts a test records
  (`hook_delivery_add`), listed and redelivered as GitHub does.
- Rate limits by GitHub's clock (`limits`): every answer's x-ratelimit-* headers, a
  spent primary quota, secondary windows with retry-after.
- An App created from a manifest (`manifests`): GitHub's page and button, the redirect
  with a code, and the code's conversion into the App's id, slug, key and secret.
- People's tokens (`user_token`): a personal access token reads what its user may and
  posts as its user; GitHub refuses it check-run writes.
- Git's database and pull requests opened through the API (`branches`): a
  git-backed repository's commits, trees, blobs and branches read and written as GitHub's
  Git Data API does, and pull requests listed, opened, edited and closed.
- Web pages (`pages`) for the links the dashboard shows: a pull request with its check
  runs, reviews and comments, and a check run, as plain HTML.
"""

from __future__ import annotations

from tests.fakes.github.actions import ActionsRoutes, ActionsRun, Workflow
from tests.fakes.github.apps import AppsRoutes
from tests.fakes.github.branches import GitDataRoutes
from tests.fakes.github.checks import ChecksRoutes
from tests.fakes.github.git import GitRepo, GitRoutes, Symlink
from tests.fakes.github.hooks import HookRoutes
from tests.fakes.github.issues import Issue, IssuesRoutes
from tests.fakes.github.manifests import ManifestRoutes
from tests.fakes.github.merge_queue import MergeQueueRoutes
from tests.fakes.github.oidc import OidcKey, OidcRoutes
from tests.fakes.github.pages import PageRoutes
from tests.fakes.github.pulls import PullsRoutes
from tests.fakes.github.server import FakeGitHubBase, _Handler
from tests.fakes.github.state import (
    App,
    Call,
    CheckRun,
    Injection,
    Installation,
    Pull,
    PullFile,
    Repo,
    Token,
    rsa_keypair,
)
from tests.fakes.github.threads import ThreadsRoutes


class FakeGitHub(
    # first: these extend the base's __init__ and reset
    ActionsRoutes,
    GitDataRoutes,
    OidcRoutes,
    MergeQueueRoutes,
    HookRoutes,
    IssuesRoutes,
    ManifestRoutes,
    PageRoutes,
    FakeGitHubBase,
    AppsRoutes,
    PullsRoutes,
    ChecksRoutes,
    GitRoutes,
    ThreadsRoutes,
):
    """The fake GitHub: see the module docstring."""


__all__ = [
    "ActionsRun",
    "App",
    "Call",
    "CheckRun",
    "FakeGitHub",
    "GitRepo",
    "Injection",
    "Issue",
    "Installation",
    "OidcKey",
    "Pull",
    "PullFile",
    "Repo",
    "Symlink",
    "Token",
    "Workflow",
    "_Handler",
    "rsa_keypair",
]

"""Writes to installations, repositories, policies and reviewers' revisions."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from repos import revisions
from repos.github.usage import usage_put_back, usage_take
from repos.models import (
    GitHubApiUsage,
    Installation,
    Repository,
    RepositoryPolicy,
    Reviewer,
    ReviewerRevision,
)
from repos.policy import ReviewerConfig
from repos.selectors import reviewer_config
from tasuku import outage
from webhooks import payloads
from webhooks.routing import Outcome

logger = logging.getLogger(__name__)


def installation_upsert(
    *,
    github_id: int,
    account_login: str = "",
    account_type: str = "",
    repository_selection: str = "",
    permissions: dict[str, str] | None = None,
    absent: bool = False,
) -> Installation:
    """Create or refresh an installation. A re-installed App clears `removed_at`.
    `absent`: its caller found no row a moment ago, so the INSERT is tried first."""
    defaults: dict[str, Any] = {"removed_at": None}
    if account_login:
        defaults["account_login"] = account_login
    if account_type:
        defaults["account_type"] = account_type
    if repository_selection:
        defaults["repository_selection"] = repository_selection
    if permissions is not None:
        defaults["permissions"] = permissions
    if absent:
        try:
            with transaction.atomic():
                return Installation.objects.create(github_id=github_id, **defaults)
        except IntegrityError:  # another delivery created it meanwhile: refreshed below
            pass
    installation, _ = Installation.objects.update_or_create(github_id=github_id, defaults=defaults)
    return installation


# `repository_upsert`'s `row` when its caller did not read the repository.
_UNREAD: Any = object()


def repository_upsert(
    *,
    installation: Installation,
    github_id: int,
    full_name: str,
    private: bool | None = None,
    default_branch: str = "",
    row: Repository | None = _UNREAD,
) -> Repository:
    """Create or refresh a repository (renames and transfers follow its GitHub id).

    A repository Tasuku has not seen before starts enabled or not per
    TASUKU_ENABLE_NEW_REPOSITORIES and gets a policy with the site defaults and the
    reviewers marked default for new repositories. `row`: the repository's row as its
    caller read it a moment ago (None: it found none), so it is not read again.
    """
    if row is _UNREAD:
        row = Repository.objects.filter(github_id=github_id).first()
    facts: dict[str, Any] = {
        "installation": installation,
        "full_name": full_name,
        "private": private,
        "default_branch": default_branch,
    }
    if row is None:
        return repository_create(github_id=github_id, **facts)
    return repository_refresh(row, **facts)


def repository_create(
    *,
    installation: Installation,
    github_id: int,
    full_name: str,
    private: bool | None = None,
    default_branch: str = "",
) -> Repository:
    """`repository_upsert` of a repository its caller found no row of (a delivery
    creating it at the same moment is joined)."""
    try:
        with transaction.atomic():
            repository = Repository.objects.create(
                installation=installation,
                github_id=github_id,
                full_name=full_name,
                private=bool(private),
                default_branch=default_branch,
                enabled=settings.TASUKU_ENABLE_NEW_REPOSITORIES,
            )
            policy_create_default(repository=repository, new=True)
            return repository
    except IntegrityError:
        # Another delivery created it between our read and our insert.
        repository = Repository.objects.get(github_id=github_id)
    return repository_refresh(
        repository,
        installation=installation,
        full_name=full_name,
        private=private,
        default_branch=default_branch,
    )


def repository_refresh(
    repository: Repository,
    *,
    installation: Installation,
    full_name: str,
    private: bool | None = None,
    default_branch: str = "",
) -> Repository:
    """`repository_upsert` of a repository row its caller read: written only where it
    changed."""
    updates: dict[str, Any] = {
        "installation_id": installation.pk,
        "full_name": full_name,
        "removed_at": None,
    }
    if private is not None:
        updates["private"] = private
    if default_branch:
        updates["default_branch"] = default_branch
    changed = [field for field, value in updates.items() if getattr(repository, field) != value]
    if changed:
        for field in changed:
            setattr(repository, field, updates[field])
        repository.save(update_fields=[*changed, "updated_at"])
    return repository


def policy_create_default(*, repository: Repository, new: bool = False) -> RepositoryPolicy:
    """The repository's policy, created with the site defaults and the reviewers marked
    default for new repositories if it has none. `new`: the repository was created in
    this transaction, so it has none (no read before the INSERT)."""
    defaults = Reviewer.objects.filter(enabled=True, default_for_new_repositories=True)
    if new:
        policy = RepositoryPolicy.objects.create(repository=repository)
        policy.reviewers.add(*defaults)  # it has none to replace
        return policy
    policy, created = RepositoryPolicy.objects.get_or_create(repository=repository)
    if created:
        policy.reviewers.set(defaults)
    return policy


def repositories_remove(*, installation: Installation, github_ids: Iterable[int]) -> int:
    """Mark repositories the installation lost; their runs and findings are kept."""
    return Repository.objects.filter(
        installation=installation, github_id__in=list(github_ids), removed_at__isnull=True
    ).update(removed_at=timezone.now())


def policy_copy(*, source: RepositoryPolicy, targets: Iterable[Repository]) -> int:
    """Give every target repository the same policy as `source` (its reviewers too)."""
    fields = [
        f.name
        for f in RepositoryPolicy._meta.concrete_fields
        if f.name not in ("id", "repository", "updated_at")
    ]
    reviewers = list(source.reviewers.all())
    count = 0
    with transaction.atomic():
        for repository in targets:
            if repository.pk == source.repository_id:
                continue
            policy = policy_create_default(repository=repository)
            for field in fields:
                setattr(policy, field, getattr(source, field))
            policy.full_clean(exclude=["repository"])
            policy.save()
            policy.reviewers.set(reviewers)
            count += 1
    return count


def revision_record(
    *, reviewer: Reviewer, source: str, author: str = "", commit: str = ""
) -> ReviewerRevision:
    """The reviewer's revision as it is now, recorded if its definition changed.

    1. Lock the reviewer's row: two saves at once number their revisions one after the
       other instead of both taking the next number.
    2. Its definition now (`reviewer_config`) and that definition's hash.
    3. The latest revision has that hash: it is the answer, nothing changed (a sync of
       an unchanged file, a save that touched only the slug, the key or the runner).
       Otherwise the next revision is created, with who made it and from which commit.
    """
    with transaction.atomic():
        config = reviewer_config(Reviewer.objects.select_for_update().get(pk=reviewer.pk))
        latest = reviewer.revisions.order_by("-number").first()
        if latest is not None and latest.digest == config.revision:
            return latest
        return ReviewerRevision.objects.create(
            reviewer=reviewer,
            number=(latest.number if latest else 0) + 1,
            digest=config.revision,
            definition=revisions.definition(config),
            source=source,
            author=author[:150],
            commit=commit,
        )


def revision_for_config(
    *, reviewer: Reviewer, config: ReviewerConfig | None
) -> ReviewerRevision | None:
    """The revision a run given `config` (the reviewer's entry in its configuration)
    records: the latest with its hash. A definition no revision holds was changed
    outside the admin (a shell, a script): recorded now, as such. None when the config
    has no hash, or the reviewer changed again between the two reads."""
    if config is None or not config.revision:
        return None
    found = reviewer.revisions.filter(digest=config.revision).order_by("-number").first()
    if found is not None:
        return found
    now = revision_record(reviewer=reviewer, source=ReviewerRevision.Source.OUTSIDE)
    return now if now.digest == config.revision else None


def _installation_from_payload(data: payloads.Installation) -> Installation:
    account = data.account or payloads.Account()
    return installation_upsert(
        github_id=data.id,
        account_login=account.login,
        account_type=account.type,
        repository_selection=data.repository_selection,
        permissions=dict(data.permissions),
    )


def _repositories_add(
    installation: Installation, repositories: Iterable[payloads.RepositoryRef]
) -> int:
    count = 0
    for data in repositories:
        repository_upsert(
            installation=installation,
            github_id=data.id,
            full_name=data.full_name,
            private=data.private,
        )
        count += 1
    return count


def installation_event(payload: payloads.InstallationEvent, *, delivery_id: int) -> Outcome:
    """`installation`: created, deleted, suspend, unsuspend, new_permissions_accepted."""
    action = payload.action
    installation = _installation_from_payload(payload.installation)
    if action == "created":
        count = _repositories_add(installation, payload.repositories or ())
        return Outcome(f"installed on {installation.account_login}: {count} repositories")
    if action == "deleted":
        now = timezone.now()
        Installation.objects.filter(pk=installation.pk).update(removed_at=now)
        count = installation.repositories.filter(removed_at__isnull=True).update(removed_at=now)
        return Outcome(
            f"uninstalled from {installation.account_login}: {count} repositories removed"
        )
    if action == "suspend":
        Installation.objects.filter(pk=installation.pk).update(suspended_at=timezone.now())
        return Outcome(f"suspended on {installation.account_login}: no reviews until unsuspended")
    if action == "unsuspend":
        Installation.objects.filter(pk=installation.pk).update(suspended_at=None)
        _repositories_add(installation, payload.repositories or ())
        return Outcome(f"unsuspended on {installation.account_login}")
    if action == "new_permissions_accepted":
        return Outcome(f"new permissions accepted on {installation.account_login}")
    return Outcome.ignore(f"installation.{action} needs no action")


def installation_repositories_event(
    payload: payloads.InstallationRepositoriesEvent, *, delivery_id: int
) -> Outcome:
    """`installation_repositories`: added, removed."""
    action = payload.action
    installation = _installation_from_payload(payload.installation)
    if action == "added":
        count = _repositories_add(installation, payload.repositories_added)
        return Outcome(f"{count} repositories added to {installation.account_login}")
    if action == "removed":
        ids = [r.id for r in payload.repositories_removed]
        count = repositories_remove(installation=installation, github_ids=ids)
        return Outcome(f"{count} repositories removed from {installation.account_login}")
    return Outcome.ignore(f"installation_repositories.{action} needs no action")


def github_usage_flush() -> int:
    """Add the GitHub calls this process counted (repos/github/usage.py) to the
    `GitHubApiUsage` rows, which /metrics reads. Called after each web request and each
    worker task, and by the worker's heartbeat thread.

    1. Take the counts (later calls count afresh).
    2. Per App and installation, one UPDATE adds them (a relative update, so processes
       flushing at once all add up); no row yet: create it, and if another process
       created it first (the unique constraint decides) add to that one.
    3. A database error gives the unwritten counts back for the next flush and is
       logged, never raised: counting must not fail a request or a review.
    Returns how many rows were written.
    """
    taken = usage_take()
    if not taken:
        return 0
    written = 0
    now = timezone.now()
    try:
        for key, pending in list(taken.items()):
            app_id, installation_id = key
            updates: dict[str, Any] = {
                "calls": F("calls") + pending.calls,
                "errors": F("errors") + pending.errors,
                "updated_at": now,
            }
            if pending.limit is not None:
                updates["rate_limit_remaining"] = pending.remaining
                updates["rate_limit_limit"] = pending.limit
                updates["rate_limit_reset"] = (
                    datetime.fromtimestamp(pending.reset, tz=UTC) if pending.reset else None
                )
            rows = GitHubApiUsage.objects.filter(app_id=app_id, installation_id=installation_id)
            # A savepoint when a caller's transaction is open: an error here rolls back
            # only this write.
            with transaction.atomic():
                if not rows.update(**updates):
                    try:
                        with transaction.atomic():
                            GitHubApiUsage.objects.create(
                                app_id=app_id,
                                installation_id=installation_id,
                                calls=pending.calls,
                                errors=pending.errors,
                                rate_limit_remaining=updates.get("rate_limit_remaining"),
                                rate_limit_limit=updates.get("rate_limit_limit"),
                                rate_limit_reset=updates.get("rate_limit_reset"),
                                updated_at=now,
                            )
                    except IntegrityError:
                        rows.update(**updates)
            del taken[key]
            written += 1
    except outage.UNREACHABLE as exc:
        # The database is away: counted later, and said once for the outage by the
        # process (tasuku/outage.py), not once more here.
        usage_put_back(taken)
        outage.failed(exc, "recording GitHub usage")
    except Exception:  # any other database trouble (or no database at all): count it later
        usage_put_back(taken)
        logger.warning("could not record %d GitHub usage rows; will retry", len(taken))
    else:
        if written:
            outage.answered()
    return written

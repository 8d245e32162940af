"""Syncing a reviewer from its reviewers repository: the one write that takes a
reviewer's rules, guidance and skills from outside the admin (repos/reviewer_sources.py
reads them). Reached from the admin's action, `manage.py reviewers_sync` and a `push` to
the reviewers repository's branch (when the App is installed on it and subscribed to
Push: `push_event`): the review path never imports it (.importlinter)."""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from repos.credentials import KeyUnreadable
from repos.models import Reviewer, ReviewerRevision, Skill
from repos.reviewer_sources import SourceError, source_read
from repos.services import revision_record
from webhooks import payloads
from webhooks.routing import Outcome

logger = logging.getLogger(__name__)


def reviewer_sync(*, reviewer: Reviewer) -> tuple[ReviewerRevision, bool]:
    """Bring the reviewer's rules, guidance and skills from its reviewers repository.
    Returns its revision and whether the sync made it (False: the file said what the
    reviewer already had). Raises SourceError, having changed nothing, when the
    repository cannot be read or its file is not a reviewer.

    1. Read and parse the file at the tip of the reviewer's ref (outside any
       transaction: it waits on the network).
    2. In one transaction, the reviewer's row locked: its rules and guidance set, its
       named skills replaced by the file's, the commit and time of the sync noted.
    3. The revision recorded, by "sync", with the commit's SHA.
    """
    if not reviewer.synced:
        raise SourceError(f"{reviewer.slug} names no reviewers repository.")
    try:
        token = reviewer.source_token()
    except KeyUnreadable as exc:
        raise SourceError(
            "The deploy token cannot be read (SECRET_KEY changed?): enter it again."
        ) from exc
    read = source_read(
        url=reviewer.source_url,
        path=reviewer.source_path,
        ref=reviewer.source_ref,
        token=token,
        allow_file=settings.TASUKU_REVIEWER_SOURCE_ALLOW_FILE,
    )
    found = read.definition
    with transaction.atomic():
        Reviewer.objects.select_for_update().filter(pk=reviewer.pk).update(
            rules=found.rules,
            skills=found.guidance,
            source_commit=read.commit,
            source_synced_at=timezone.now(),
        )
        Skill.objects.filter(reviewer=reviewer).delete()
        Skill.objects.bulk_create(
            Skill(reviewer=reviewer, name=s.name, description=s.description, body=s.body)
            for s in found.skills
        )
        before = reviewer.revisions.order_by("-number").values_list("pk", flat=True).first()
        revision = revision_record(
            reviewer=reviewer,
            source=ReviewerRevision.Source.SYNC,
            author="sync",
            commit=read.commit,
        )
    reviewer.refresh_from_db()
    logger.info(
        "reviewer %s synced at %s: revision %s%s",
        reviewer.slug,
        read.commit,
        revision.number,
        "" if revision.pk != before else " (unchanged)",
    )
    return revision, revision.pk != before


def repository_key(url: str) -> str:
    """A git URL as the repository it names: scheme, host and path, lowercased, without a
    final `/` or `.git` (`https://github.com/Acme/Reviewers.git` and
    `https://github.com/acme/reviewers` name one repository)."""
    parts = urlsplit(url.strip())
    path = parts.path.rstrip("/").removesuffix(".git").rstrip("/")
    host = (parts.hostname or "").lower()
    if parts.port:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme.lower()}://{host}{path.lower()}"


def push_event(payload: payloads.PushEvent, *, delivery_id: int) -> Outcome:
    """A push to a reviewers repository: every reviewer read from it at the branch or
    tag pushed is synced (as `manage.py reviewers_sync` would). GitHub signed the
    delivery; even so, the push only says *when* to sync: what is read is the tip of the
    reviewer's own URL and ref, with its own token.

    1. Ignored: a deleted branch or tag, or a repository no reviewer is read from.
    2. The reviewers whose URL names the pushed repository (its clone or web URL) and
       whose ref is the one pushed (no ref: the repository's default branch).
    3. Each synced in turn; one that cannot be read changes nothing and is named in the
       outcome (its error is the operator's to fix: the delivery is not tried again).
    """
    repository = payload.repository
    if payload.deleted:
        return Outcome.ignore(f"{payload.ref} of {repository.full_name} was deleted")
    keys = {repository_key(u) for u in (repository.clone_url, repository.html_url) if u}
    pushed = payload.ref
    matched = [
        reviewer
        for reviewer in Reviewer.objects.exclude(source_url="").order_by("slug")
        if repository_key(reviewer.source_url) in keys
        and pushed
        in (
            f"refs/heads/{reviewer.source_ref or repository.default_branch}",
            f"refs/tags/{reviewer.source_ref}" if reviewer.source_ref else "",
        )
    ]
    if not matched:
        return Outcome.ignore(
            f"no reviewer is read from {pushed} of {repository.full_name}: nothing to sync"
        )
    said = []
    for reviewer in matched:
        try:
            revision, made = reviewer_sync(reviewer=reviewer)
        except SourceError as exc:
            logger.warning("reviewer %s: not synced on push (delivery %s): %s",
                           reviewer.slug, delivery_id, exc)  # fmt: skip
            said.append(f"{reviewer.slug} not synced (nothing changed): {exc}")
            continue
        said.append(
            f"{reviewer.slug} synced at {reviewer.source_commit[:12]}: "
            + (
                f"new revision {revision.number}"
                if made
                else f"unchanged, revision {revision.number}"
            )
        )
    return Outcome(f"push to {pushed} of {repository.full_name}: " + "; ".join(said))

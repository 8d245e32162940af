"""Syncing a reviewer from its reviewers repository: the one write that takes a
reviewer's rules, guidance and skills from outside the admin (repos/reviewer_sources.py
reads them). Reached from the admin's action and `manage.py reviewers_sync` only: the
review path never imports it (.importlinter)."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from repos.credentials import KeyUnreadable
from repos.models import Reviewer, ReviewerRevision, Skill
from repos.reviewer_sources import SourceError, source_read
from repos.services import revision_record

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

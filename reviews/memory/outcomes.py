"""Learning from outcomes: what became of each published finding when its pull request
closed, figures per repository and reviewer, and a short repository memory that later
reviews receive."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Count, F, Q

from repos.models import RepoMemory, Repository, Reviewer
from reviews.memory.folds import memory_fold_closed_later
from reviews.models import Dismissal, Finding, FindingOutcome, FindingState, PullRequest

MEMORY_LIMIT = 1500
MEMORY_ITEMS = 8


def outcomes_harvest(pull_request: PullRequest) -> int:
    """Record the fate of every finding published on a closed pull request — fixed
        (resolved by a later push), dismissed (by a person), or left open at close — once,
        then fold them into the repository's memory (reviews/memory/folds.py), or tally them there
    where no model folds. Returns how many outcomes were recorded."""
    dismissed = set(
        Dismissal.objects.filter(pull_request=pull_request).values_list("fingerprint", flat=True)
    )
    published = Finding.objects.filter(pull_request=pull_request).filter(
        Q(published=True) | Q(github_comment_id__isnull=False)
    )
    fates: dict[tuple[int, str], tuple[Finding, str]] = {}
    for finding in published.select_related("review").order_by("pk"):
        key = (finding.review.reviewer_id, finding.fingerprint)
        if finding.fingerprint in dismissed:
            fate = FindingOutcome.Fate.DISMISSED
        elif finding.state == FindingState.RESOLVED:
            fate = FindingOutcome.Fate.FIXED
        elif finding.state == FindingState.OPEN and finding.carried_to_id is None:
            fate = FindingOutcome.Fate.OPEN
        else:
            continue  # carried on to a later review (its copy decides), or outdated
        if key not in fates or fate == FindingOutcome.Fate.FIXED:
            fates[key] = (finding, fate)
    created = 0
    with transaction.atomic():
        for (reviewer_id, fingerprint), (finding, fate) in fates.items():
            _, made = FindingOutcome.objects.get_or_create(
                pull_request=pull_request,
                reviewer_id=reviewer_id,
                fingerprint=fingerprint,
                defaults={
                    "repository": pull_request.repository,
                    "category": finding.category,
                    "rule": finding.rule,
                    "title": finding.title,
                    "severity": finding.severity,
                    "fate": fate,
                    "merged": pull_request.merged,
                },
            )
            created += made
    if not memory_fold_closed_later(pull_request):
        memory_refresh(pull_request.repository)
    return created


@dataclass(frozen=True)
class Figures:
    published: int
    fixed: int
    dismissed: int
    left_open: int

    @property
    def acceptance(self) -> float | None:
        """Fixed among the findings people acted on (fixed or dismissed)."""
        acted = self.fixed + self.dismissed
        return self.fixed / acted if acted else None


def figures(*, repository: Repository | None = None, reviewer: Reviewer | None = None) -> Figures:
    outcomes = FindingOutcome.objects.all()
    if repository is not None:
        outcomes = outcomes.filter(repository=repository)
    if reviewer is not None:
        outcomes = outcomes.filter(reviewer=reviewer)
    counts = dict(outcomes.values_list("fate").annotate(n=Count("id")).order_by())
    # Each problem posted on a pull request counts once, however many reviews carried it.
    published_findings = Finding.objects.filter(
        Q(published=True) | Q(github_comment_id__isnull=False)
    )
    if repository is not None:
        published_findings = published_findings.filter(pull_request__repository=repository)
    if reviewer is not None:
        published_findings = published_findings.filter(review__reviewer=reviewer)
    published = published_findings.values("pull_request", "fingerprint").distinct().count()
    return Figures(
        published=published,
        fixed=counts.get(FindingOutcome.Fate.FIXED, 0),
        dismissed=counts.get(FindingOutcome.Fate.DISMISSED, 0),
        left_open=counts.get(FindingOutcome.Fate.OPEN, 0),
    )


def memory_text(outcomes: list[tuple[str, str, str]]) -> str:
    """A few bounded lines from (fate, rule or category, title) outcomes."""
    dismissed = Counter(key for fate, key, _ in outcomes if fate == FindingOutcome.Fate.DISMISSED)
    fixed = Counter(key for fate, key, _ in outcomes if fate == FindingOutcome.Fate.FIXED)
    lines = []
    if dismissed:
        top = ", ".join(f"{key} ({n}×)" for key, n in dismissed.most_common(MEMORY_ITEMS))
        lines.append(
            f"This team dismissed findings of these kinds as not worth fixing: {top}. Raise them only when clearly harmful."
        )
    if fixed:
        top = ", ".join(f"{key} ({n}×)" for key, n in fixed.most_common(MEMORY_ITEMS))
        lines.append(f"This team fixed findings of these kinds: {top}.")
    text = "\n".join(lines)
    return text if len(text) <= MEMORY_LIMIT else text[: MEMORY_LIMIT - 1] + "…"


def memory_refresh(repository: Repository) -> RepoMemory:
    """The tally of outcomes as the memory — unless a model or an operator wrote it: that
    memory is theirs, and a tally would only erase what they learned."""
    rows = FindingOutcome.objects.filter(repository=repository).order_by("-created_at")[:500]
    text = memory_text([(o.fate, o.rule or o.category, o.title) for o in rows])
    memory, _ = RepoMemory.objects.get_or_create(repository=repository)
    RepoMemory.objects.filter(pk=memory.pk, source=RepoMemory.Source.TALLY).update(
        text=text, version=F("version") + 1
    )
    memory.refresh_from_db()
    return memory

"""Handing a task to Tasuku (docs/review-passes.md): `task_create` checks what a caller may
name (its scope, pull requests its author's App opened and no other open task holds) and
`task_handoff` the pass settings, the reviewer, the skill and model it is given (chosen
from what the operator configured, never written by the caller) and the Apps it needs.
`TaskError` is a refusal the API answers with its status."""

from __future__ import annotations

import logging
import re
from typing import Any

from django.db import transaction
from django.utils import timezone

from repos import github
from repos.github import GitHubError, RepoRef
from repos.models import Repository, Reviewer, ReviewSkill
from repos.policy import Engine
from repos.refs import ref_parse
from reviews.engines.boundary import engine_environment
from reviews.models import (
    AUTHOR_SILENCE_RANGE,
    MAX_PASSES_RANGE,
    TASK_FINAL_STATES,
    ApiScope,
    PullRequest,
    Task,
    TaskPullRequest,
)
from reviews.passes.author import author_bot_login, author_configured
from reviews.passes.selectors import open_task_naming
from sandbox.errors import ProviderError

logger = logging.getLogger(__name__)


LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$")


MAX_PULLS = 20


class TaskError(Exception):
    """A request the service refuses: `status` is the HTTP status the API answers."""

    def __init__(self, message: str, *, status: int = 400, details: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.details = details


def pull_ref_parse(text: str) -> tuple[str, int]:
    ref = ref_parse(text if isinstance(text, str) else "")
    if ref is None or ref.number is None:
        raise TaskError(f"{text!r} is not a pull request reference like owner/repo#12.")
    return ref.full_name, ref.number


def task_create(
    *,
    owner,
    title: str,
    author_name: str,
    author_login: str = "",
    pulls: list[str],
    description: str = "",
) -> Task:
    """A task with its pull requests; each must be in a repository Tasuku's App is
    installed on and reviews."""
    if not pulls:
        raise TaskError("A task needs at least one pull request.")
    if len(pulls) > MAX_PULLS:
        raise TaskError(f"A task has at most {MAX_PULLS} pull requests.")
    if author_login and not LOGIN.match(author_login):
        raise TaskError(f"{author_login!r} is not a GitHub login.")
    refs = [pull_ref_parse(p) for p in pulls]
    # GitHub's owner and repository names are case-insensitive: Acme/Shop#7 is acme/shop#7.
    if len({(name.lower(), number) for name, number in refs}) != len(refs):
        raise TaskError("A pull request is listed twice.")
    repositories = {}
    for full_name, _ in refs:
        repository = (
            Repository.objects.select_related("installation")
            .filter(full_name__iexact=full_name, removed_at__isnull=True)
            .first()
        )
        if not scope_covers(owner, repository):
            # What the caller may not name is not found: its existence is not told.
            raise TaskError(
                f"{full_name} is not a repository your API token may name (an administrator "
                "grants repositories under API scopes in the admin).",
                status=404,
            )
        if repository is None or not repository.installation.active:
            raise TaskError(
                f"{full_name} is not a repository Tasuku's GitHub App is installed on.",
                status=422,
            )
        repositories[full_name] = repository
    for full_name, number in refs:
        pull_free_check(repositories[full_name], number)
    # Review passes review an agent's work: only pull requests the author's App opened,
    # never a person's (whose pull request an approval would then speak for).
    for full_name, number in refs:
        pull_authored_check(repositories[full_name], number)
    with transaction.atomic():
        # Race: two callers naming the same pull request at once. Locking its
        # repository's row (PostgreSQL; SQLite's transactions are IMMEDIATE, one at a
        # time) makes the second wait, then see the first's task and be refused.
        pks = sorted({r.pk for r in repositories.values()})
        list(Repository.objects.select_for_update().filter(pk__in=pks).order_by("pk"))
        for full_name, number in refs:
            pull_free_check(repositories[full_name], number)
        task = Task.objects.create(
            owner=owner,
            title=title,
            description=description,
            author_name=author_name,
            author_login=author_login,
        )
        for full_name, number in refs:
            repository = repositories[full_name]
            TaskPullRequest.objects.create(
                task=task,
                repository=repository,
                number=number,
                pull_request=PullRequest.objects.filter(
                    repository=repository, number=number
                ).first(),
            )
    return task


def scope_covers(user, repository: Repository | None) -> bool:
    """Whether `user`'s API token may name `repository` in a task: a superuser may name
    any; anyone else, what their API scope grants (reviews.models.ApiScope)."""
    if getattr(user, "is_superuser", False):
        return True
    if repository is None:
        return False
    scope = ApiScope.objects.filter(user=user).first()
    return scope is not None and scope.covers(repository)


def scope_refusal(task: Task) -> str:
    """Why the task's owner may no longer act on it ("" when they may): one of its
    repositories has left their API scope since the task was made."""
    for tpr in task.pulls.select_related("repository"):
        if not scope_covers(task.owner, tpr.repository):
            return f"{tpr.repository.full_name} is no longer in your API scope."
    return ""


def pull_free_check(repository: Repository, number: int, *, task: Task | None = None) -> None:
    """Refuse (409) a pull request already in another open task: a pull request belongs
    to one open task at a time, so no second caller runs passes on it, answers as the
    author's App there or has it approved. Only the task is named: not its owner."""
    holder = open_task_naming(repository, number, besides=task)
    if holder is not None and (task is None or holder.pk < task.pk):
        raise TaskError(
            f"{repository.full_name}#{number} is in task {holder.pk}, which is open: a pull "
            "request belongs to one open task at a time (it is free again once that task "
            "is done, returned or recalled).",
            status=409,
            details={"task": holder.pk, "pull_request": f"{repository.full_name}#{number}"},
        )


def pull_authored_check(repository: Repository, number: int) -> None:
    """Refuse (403) a pull request that the author's App did not open, asked of GitHub."""
    ref = f"{repository.full_name}#{number}"
    try:
        expected = author_bot_login()
    except GitHubError as exc:
        raise TaskError(
            "The author's App is not configured or not reachable, so Tasuku cannot tell "
            f"whether it opened {ref}: {exc}",
            status=422 if exc.permanent else 503,
        ) from exc
    try:
        pull = github.gateway().pull_request_get(
            RepoRef.of(repository),
            number=number,
        )
    except GitHubError as exc:
        if exc.status == 404:
            raise TaskError(f"{ref}: there is no such pull request.", status=404) from exc
        raise TaskError(
            f"Could not read {ref} from GitHub ({exc}); try again.",
            status=422 if exc.permanent else 503,
        ) from exc
    if pull.author_login.lower() != expected.lower():
        raise TaskError(
            f"{ref} was opened by {pull.author_login}: review passes review pull requests "
            f"opened by the author's App ({expected}), never anyone else's.",
            status=403,
        )


def task_handoff(
    task: Task,
    *,
    enabled: bool,
    reviewer: str | None,
    model: str = "",
    skill: str = "",
    max_passes: int = 3,
    counted_bots: list[str] | None = None,
    required_checks: list[str] | None = None,
    author_silence_minutes: int | None = None,
) -> Task:
    """Set the task's review-pass settings, refusing what cannot be honoured (the API's
    hand-off and the dashboard's form both come here)."""
    if task.state in TASK_FINAL_STATES:
        raise TaskError(f"The task is {task.get_state_display()}.", status=409)
    values = handoff_check(
        enabled=enabled,
        reviewer=reviewer,
        model=model,
        skill=skill,
        max_passes=max_passes,
        counted_bots=counted_bots,
        required_checks=required_checks,
        author_silence_minutes=author_silence_minutes,
    )
    Task.objects.filter(pk=task.pk).update(
        handed_off_at=task.handed_off_at or timezone.now(), **values
    )
    task.refresh_from_db()
    return task


def default_reviewer() -> Reviewer | None:
    """The reviewer a hand-off that names none gets: the one marked *default for review
    passes* in the admin, if it is enabled."""
    return Reviewer.objects.filter(default_for_passes=True, enabled=True).first()


def handoff_check(
    *,
    enabled: bool,
    reviewer: str | None,
    model: str = "",
    skill: str = "",
    max_passes: int = 3,
    counted_bots: list[str] | None = None,
    required_checks: list[str] | None = None,
    author_silence_minutes: int | None = None,
) -> dict[str, Any]:
    """The task's columns a hand-off sets, or a refusal (TaskError) of what cannot be
    honoured. Steps: the numbers and names; the reviewer (the one named, else the site's
    default for review passes), that it can run and both Apps are configured; the model
    and the skill among the reviewer's. Writes nothing."""
    counted_bots = counted_bots or []
    required_checks = required_checks or []
    if not MAX_PASSES_RANGE[0] <= max_passes <= MAX_PASSES_RANGE[1]:
        raise TaskError(
            f"max_passes must be between {MAX_PASSES_RANGE[0]} and {MAX_PASSES_RANGE[1]}."
        )
    if author_silence_minutes is not None and not (
        AUTHOR_SILENCE_RANGE[0] <= author_silence_minutes <= AUTHOR_SILENCE_RANGE[1]
    ):
        raise TaskError(
            f"author_silence_minutes must be between {AUTHOR_SILENCE_RANGE[0]} and "
            f"{AUTHOR_SILENCE_RANGE[1]}."
        )
    for login in counted_bots:
        if not isinstance(login, str) or not LOGIN.match(login):
            raise TaskError(f"counted_bots: {login!r} is not a GitHub login.")
    for name in required_checks:
        if not isinstance(name, str) or not name.strip() or len(name) > 200:
            raise TaskError(f"required_checks: {name!r} is not a check name.")
    chosen = None
    if enabled:
        if reviewer:
            chosen = Reviewer.objects.filter(slug=reviewer).first()
            if chosen is None or not chosen.enabled:
                raise TaskError(f"There is no enabled reviewer {reviewer!r}.", status=422)
        else:
            chosen = default_reviewer()
            if chosen is None:
                raise TaskError(
                    "Name the reviewer that reviews the passes (a reviewer's slug): no "
                    "reviewer is the default for review passes (an administrator marks one "
                    "under Reviewers)."
                )
        if model and chosen.engine == Engine.STATIC:
            raise TaskError("The static reviewer has no model to choose.", status=422)
        _reviewer_usable(chosen)
        _apps_usable()
    elif reviewer:
        chosen = Reviewer.objects.filter(slug=reviewer).first()
    if (model or skill) and chosen is None:
        raise TaskError("A model or a skill is chosen with the reviewer that uses it.")
    if model:
        model_allowed_check(chosen, model)
    chosen_skill = skill_choose(chosen, skill) if skill else None
    return {
        "passes_enabled": enabled,
        "reviewer": chosen,
        "reviewer_model": model,
        "skill": chosen_skill,
        "max_passes": max_passes,
        "counted_bots": counted_bots,
        "required_checks": required_checks,
        "author_silence_minutes": author_silence_minutes,
    }


def model_allowed_check(reviewer: Reviewer, model: str) -> None:
    """Refuse (400) a model the reviewer is not configured with: the caller chooses among
    the operator's models, never names its own."""
    allowed = reviewer.models_allowed
    if model not in allowed:
        raise TaskError(
            f"model: {_shown(model)} is not a model of the reviewer {reviewer.slug!r}; "
            f"it may use: {', '.join(allowed) or 'none'}.",
            details={"allowed_models": list(allowed)},
        )


def skill_choose(reviewer: Reviewer, name: str) -> ReviewSkill:
    """The configured review skill `name` that `reviewer` may use, or a refusal (400)
    naming those it may: a caller names a skill, it never writes one."""
    allowed = list(ReviewSkill.objects.for_reviewer(reviewer).order_by("name"))
    for skill in allowed:
        if skill.name == name:
            return skill
    names = [s.name for s in allowed]
    raise TaskError(
        f"skill: {_shown(name)} is not a review skill the reviewer {reviewer.slug!r} may use; "
        + (
            f"it may use: {', '.join(names)}."
            if names
            else "none is configured for it (an administrator adds them under Review skills)."
        ),
        details={"allowed_skills": names},
    )


def _shown(text: str) -> str:
    """A caller's word quoted in a refusal, cut short: it is named, not echoed whole."""
    return repr(text if len(text) <= 80 else text[:80] + "…")


def _reviewer_usable(reviewer: Reviewer) -> None:
    if not reviewer.provider:
        return
    try:
        env = engine_environment(reviewer)
    except ProviderError as exc:  # a sealed key that cannot be read
        raise TaskError(f"The reviewer {reviewer.slug!r} cannot run: {exc}", status=422) from exc
    if not any(name.endswith("_API_KEY") for name in env) and not any(
        name.endswith("_BASE_URL") for name in env
    ):
        raise TaskError(
            f"The reviewer {reviewer.slug!r} has no {reviewer.provider} API key: set one on the "
            "reviewer in the admin, or the site's key.",
            status=422,
        )


def _apps_usable() -> None:
    try:
        github.credentials()
    except GitHubError as exc:
        raise TaskError(
            f"The reviewer App (Tasuku's GitHub App) is not configured: {exc}", status=422
        ) from exc
    missing = author_configured()
    if missing:
        raise TaskError(
            "The author's App is not configured, so answers cannot be posted as the author: "
            f"set {', '.join(missing)}.",
            status=422,
        )

"""The payloads of the events Tasuku handles, as typed models of the fields its handlers
read: a handler is given its event's model (`webhooks.routing.route` parses first) and
never meets a field of another type than GitHub sends.

The models are strict where GitHub's type is fixed (`true` is no pull request number,
`"7"` no id), optional exactly where GitHub may omit a field or send null, and blind to
every other field. A delivery that does not parse is signed, so it came from whoever holds
the webhook secret; it is ignored as malformed, with the reason, and never retried.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
)


class Shape(BaseModel):
    """A part of a payload, as GitHub shapes it: never changed once parsed, and blind to
    the fields Tasuku does not read (GitHub adds fields without notice)."""

    model_config = ConfigDict(frozen=True, extra="ignore")


# --- the parts events share -------------------------------------------------------------


class User(Shape):
    login: StrictStr
    type: StrictStr = ""  # Bot, User or Organization; GitHub's schema does not require it


# In place of an author GitHub sends as null (a deleted account): no login, no type.
NO_USER = User(login="")


class Account(Shape):
    # An installation's account is a user or an organization, or an enterprise, which has
    # a slug and a name but no login.
    login: StrictStr = ""
    type: StrictStr = ""


class InstallationRef(Shape):
    """The installation an App's delivery is for (GitHub sends `id` and `node_id`)."""

    id: StrictInt


class Repository(Shape):
    id: StrictInt
    full_name: StrictStr
    private: StrictBool
    default_branch: StrictStr
    owner: User


class RepositoryRef(Shape):
    """A repository as an installation event lists it."""

    id: StrictInt
    full_name: StrictStr
    private: StrictBool


class PullRequestNumber(Shape):
    """A pull request where an event only needs to know which one."""

    number: StrictInt


class Event(Shape):
    """A delivery's payload; `raw` is the JSON as received, for the parts that are passed
    on whole (to a model of another layer)."""

    _raw: dict[str, Any] = PrivateAttr(default_factory=dict)

    @property
    def raw(self) -> dict[str, Any]:
        return self._raw


class RepositoryEvent(Event):
    # Only an App's deliveries carry `installation`; a repository webhook's do not.
    installation: InstallationRef | None = None
    repository: Repository


# --- pull requests ----------------------------------------------------------------------


class RefRepository(Shape):
    full_name: StrictStr


class Ref(Shape):
    sha: StrictStr
    ref: StrictStr
    # The repository the branch is in: the base's own, a fork, or null once a fork is
    # deleted (its commits stay reachable from the base's `refs/pull/<n>/head`).
    repo: RefRepository | None = None

    @property
    def repository_known(self) -> bool:
        """Whether the payload said which repository (GitHub always does; null included)."""
        return "repo" in self.model_fields_set


class PullRequest(Shape):
    number: StrictInt
    id: StrictInt
    title: StrictStr
    user: User | None = None  # null for a deleted account
    state: StrictStr
    draft: StrictBool
    merged: StrictBool | None = None
    head: Ref
    base: Ref
    html_url: StrictStr
    changed_files: StrictInt | None = None
    body: StrictStr | None = None  # null when the author wrote none
    updated_at: StrictStr | None = None  # ISO 8601, when GitHub last changed it


class Was(Shape):
    """What a field was before an `edited` action (GitHub's `changes.<field>.from`)."""

    from_: StrictStr = Field(alias="from")


class BaseChange(Shape):
    ref: Was
    sha: Was


class PullRequestChanges(Shape):
    # Only a retarget's is read: the base branch the pull request had before.
    base: BaseChange | None = None


class PullRequestEvent(RepositoryEvent):
    action: StrictStr
    pull_request: PullRequest
    # A `synchronize`'s head before and after the push (other actions have none).
    before: StrictStr | None = None
    after: StrictStr | None = None
    # An `edited`'s previous values (a title, a body, or the base branch: a retarget).
    changes: PullRequestChanges | None = None


# --- comments and reviews ---------------------------------------------------------------


class Remark(Shape):
    """What a person wrote on a pull request: a comment or a review's body."""

    id: StrictInt
    body: StrictStr | None = None
    user: User | None = None  # null for a deleted account
    author_association: StrictStr
    html_url: StrictStr

    @property
    def written_at(self) -> str | None:
        return None


class IssueComment(Remark):
    body: StrictStr
    created_at: StrictStr

    @property
    def written_at(self) -> str | None:
        return self.created_at


class ReviewComment(Remark):
    body: StrictStr
    created_at: StrictStr
    path: StrictStr
    line: StrictInt | None = None  # null on an outdated or file-level comment
    in_reply_to_id: StrictInt | None = None  # only on replies

    @property
    def written_at(self) -> str | None:
        return self.created_at


class Review(Remark):
    submitted_at: StrictStr | None = None

    @property
    def written_at(self) -> str | None:
        return self.submitted_at


class Issue(Shape):
    number: StrictInt
    # Present only on a pull request's conversation: links to it, none of them read.
    pull_request: dict[str, Any] | None = None

    @property
    def is_pull_request(self) -> bool:
        return bool(self.pull_request)


class IssueCommentEvent(RepositoryEvent):
    action: StrictStr
    issue: Issue
    comment: IssueComment


class PullRequestReviewCommentEvent(RepositoryEvent):
    action: StrictStr
    comment: ReviewComment
    pull_request: PullRequestNumber


class PullRequestReviewEvent(RepositoryEvent):
    action: StrictStr
    review: Review
    pull_request: PullRequestNumber


class ThreadComment(Shape):
    id: StrictInt
    body: StrictStr
    user: User | None = None


class Thread(Shape):
    node_id: StrictStr
    comments: list[ThreadComment]


class PullRequestReviewThreadEvent(RepositoryEvent):
    action: StrictStr
    thread: Thread
    sender: User
    pull_request: PullRequestNumber


# --- checks and statuses ----------------------------------------------------------------


class CheckRun(Shape):
    id: StrictInt
    external_id: StrictStr | None = None
    head_sha: StrictStr
    name: StrictStr


class RequestedAction(Shape):
    identifier: StrictStr


class CheckRunEvent(RepositoryEvent):
    action: StrictStr
    check_run: CheckRun
    # `requested_action` only: the button of the check run a person pressed, and who
    requested_action: RequestedAction | None = None
    sender: User | None = None


class CheckSuite(Shape):
    head_sha: StrictStr


class CheckSuiteEvent(RepositoryEvent):
    action: StrictStr
    check_suite: CheckSuite


class StatusEvent(RepositoryEvent):
    # A status has no action: each delivery is one new state of one context.
    sha: StrictStr
    context: StrictStr


class WorkflowRun(Shape):
    id: StrictInt
    display_title: StrictStr
    conclusion: StrictStr | None = None  # null until the run completes
    html_url: StrictStr


class WorkflowRunEvent(RepositoryEvent):
    action: StrictStr
    workflow_run: WorkflowRun


class MergeGroup(Shape):
    head_sha: StrictStr
    head_ref: StrictStr
    base_sha: StrictStr = ""  # older servers leave it out
    base_ref: StrictStr


class MergeGroupEvent(RepositoryEvent):
    action: StrictStr
    merge_group: MergeGroup
    reason: StrictStr | None = None  # merged, dequeued or invalidated; `destroyed` only


# --- pushes -----------------------------------------------------------------------------


class PushRepository(Repository):
    # Where it is cloned from and shown: what a reviewers repository's URL is matched
    # against (repos/reviewer_sync.py).
    clone_url: StrictStr = ""
    html_url: StrictStr = ""


class PushEvent(RepositoryEvent):
    ref: StrictStr  # refs/heads/<branch> or refs/tags/<tag>
    after: StrictStr
    deleted: StrictBool = False
    repository: PushRepository


# --- installations ----------------------------------------------------------------------


class Installation(Shape):
    id: StrictInt
    account: Account | None = None
    repository_selection: StrictStr
    permissions: dict[str, StrictStr]


class InstallationEvent(Event):
    action: StrictStr
    installation: Installation
    # The repositories the installation can reach; not sent with every action.
    repositories: list[RepositoryRef] | None = None


class InstallationRepositoriesEvent(Event):
    action: StrictStr
    installation: Installation
    repositories_added: list[RepositoryRef]
    repositories_removed: list[RepositoryRef]


MODELS: dict[str, type[Event]] = {
    "pull_request": PullRequestEvent,
    "issue_comment": IssueCommentEvent,
    "pull_request_review_comment": PullRequestReviewCommentEvent,
    "pull_request_review": PullRequestReviewEvent,
    "pull_request_review_thread": PullRequestReviewThreadEvent,
    "check_run": CheckRunEvent,
    "check_suite": CheckSuiteEvent,
    "status": StatusEvent,
    "workflow_run": WorkflowRunEvent,
    "merge_group": MergeGroupEvent,
    "push": PushEvent,
    "installation": InstallationEvent,
    "installation_repositories": InstallationRepositoriesEvent,
}


@dataclass(frozen=True)
class Malformed:
    """A payload that is not shaped as GitHub sends its event, and why, in words."""

    problem: str


def parse(event: str, payload: Any) -> Event | Malformed:
    """`payload` as its event's model, or what is wrong with it. An event without a
    model (one Tasuku does not handle) raises KeyError."""
    model = MODELS[event]
    try:
        parsed = model.model_validate(payload)
    except ValidationError as exc:
        return Malformed(problem_in_words(exc))
    parsed._raw = payload
    return parsed


# What each of pydantic's type errors expected, in JSON's terms.
EXPECTED = {
    "int_type": "an integer",
    "string_type": "a string",
    "bool_type": "a boolean",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "dict_type": "an object",
    "list_type": "a list",
}


def problem_in_words(error: ValidationError) -> str:
    """The first field pydantic refused, in one sentence: "`pull_request.number` should
    be an integer, not bool True"."""
    first = error.errors(include_url=False)[0]
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"])
    field = f"`{where.lstrip('.')}`" if where else "the payload"
    if first["type"] == "missing":
        return f"{field} is missing"
    expected = EXPECTED.get(first["type"])
    if expected is None:
        return f"{field}: {first['msg']}"
    return f"{field} should be {expected}, not {_shown(first['input'])}"


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:39] + '…'}"

"""One thread per problem across pushes (issue: reconciliation, approval, the gate)."""

from __future__ import annotations

import pytest

from repos.models import Repository
from reviews.models import Dismissal, Finding, Review, ReviewRun, RunStatus
from tests.fakes.github import Pull
from tests.helpers import drain_queue, post_webhook, pull_request_payload

pytestmark = pytest.mark.django_db

INSTALLATION, REPO, NUMBER = 51, "acme/store", 3

PAYMENTS_1 = (
    "import subprocess\n\n\n"
    "def refund(order):\n"
    '    cmd = f"refund {order}"\n'
    "    return subprocess.call(cmd, shell=True)\n"  # A (line 6)
)
PAYMENTS_2 = (
    "import subprocess\n\n\n"
    "def refund(order):\n"
    '    cmd = f"refund {order}"\n'
    "    return subprocess.call(cmd.split())\n"  # A fixed in place
)
TOOLS_1 = (
    "def parse(text):\n"
    "    return eval(text)\n"  # B (line 2)
    "\n\n"
    "def name():\n"
    "    return 'tools'\n"
)
TOOLS_2 = "def name():\n    return 'tools'\n"  # B's code removed
DEPLOY = "#!/bin/bash\nset -e\nrm -rf $TARGET_DIR/\n"  # C (line 3), medium: a nit
DEBUG_2 = "def handler(event):\n    breakpoint()\n    return event\n"  # D (line 2)
DEBUG_3 = "def handler(event):\n    return event\n"  # D fixed


@pytest.fixture
def world(fake_github):
    fake_github.add_installation(INSTALLATION, "acme")
    repo, git = fake_github.add_git_repo(REPO, installation_id=INSTALLATION, repo_id=7301)
    base = git.commit({"README.md": "# Store\n"}, branch="main")
    head = git.commit(
        {"app/payments.py": PAYMENTS_1, "app/tools.py": TOOLS_1, "deploy.sh": DEPLOY},
        parent=base,
        branch="feature",
    )
    pull = fake_github.add_pull(
        REPO, Pull(number=NUMBER, title="Refunds", head_sha=head, base_sha=base)
    )

    class World:
        def push(self, files):
            before = pull.head_sha
            pull.head_sha = git.commit(files, parent=before, branch="feature")
            repo.commits.add(pull.head_sha)
            return before

    w = World()
    w.fake, w.repo, w.git, w.pull = fake_github, repo, git, pull
    return w


@pytest.fixture
def deliver(client, test_app):
    def send(world, action, **extra):
        body = pull_request_payload(world.fake, world.repo, world.pull, action=action, **extra)
        assert (
            post_webhook(client, "pull_request", body, secret=test_app.webhook_secret).status_code
            == 202
        )
        drain_queue()
        run = ReviewRun.objects.order_by("-id").first()
        run.refresh_from_db()
        assert run.status == RunStatus.COMPLETED, (run.status, run.stage, run.reason)
        return run

    return send


def main_reviews(world):
    """Tasuku's reviews (replies in threads belong to single-comment reviews of their own)."""
    return [r for r in world.fake.reviews_of(REPO, NUMBER) if "tasuku:review:run-" in r["body"]]


def ours(comment) -> bool:
    return comment["user"]["type"] == "Bot"


def thread_of(world, path, line):
    [thread] = [
        t
        for t in world.fake.threads_of(REPO, NUMBER)
        if t["comments"][0]["path"] == path
        and t["comments"][0]["line"] == line
        and ours(t["comments"][0])
    ]
    return thread


def set_policy(**values):
    policy = Repository.objects.get(full_name=REPO).policy
    for key, value in values.items():
        setattr(policy, key, value)
    policy.save()


def test_three_pushes_one_thread_per_problem(world, deliver):
    # Push 1: A, B, C.
    deliver(world, "opened")
    set_policy(auto_approve=True, approve_with_nits=True)  # C, a nit, stays open
    first = world.fake.review_comments_of(REPO, NUMBER)
    assert sorted((c["path"], c["line"]) for c in first) == [
        ("app/payments.py", 6),
        ("app/tools.py", 2),
        ("deploy.sh", 3),
    ]
    # A person starts their own thread on C's line.
    person = world.fake.person_comment(
        REPO, NUMBER, login="maria", body="Why copy here?", path="deploy.sh", line=3
    )

    # Push 2: fix A, delete B's code, leave C, add D.
    before = world.push(
        {"app/payments.py": PAYMENTS_2, "app/tools.py": TOOLS_2, "app/debug.py": DEBUG_2}
    )
    deliver(world, "synchronize", before=before)

    a, b, c = (
        thread_of(world, "app/payments.py", 6),
        thread_of(world, "app/tools.py", 2),
        thread_of(world, "deploy.sh", 3),
    )
    assert [x["body"].splitlines()[0] for x in a["comments"][1:]] == [
        f"Verified fixed in {world.pull.head_sha[:7]}: app/payments.py:6 was changed and the problem is gone."
    ]
    assert a["isResolved"]
    assert [x["body"].splitlines()[0] for x in b["comments"][1:]] == [
        f"Outdated: the code this referred to was removed or rewritten in {world.pull.head_sha[:7]} "
        "(the code around app/tools.py:2 was removed)."
    ]
    assert b["isResolved"]
    assert len(c["comments"]) == 1 and not c["isResolved"]  # untouched, not re-posted
    new = [
        x
        for x in world.fake.review_comments_of(REPO, NUMBER)
        if ours(x) and x["id"] > max(y["id"] for y in first) and "in_reply_to_id" not in x
    ]
    assert [(x["path"], x["line"]) for x in new] == [("app/debug.py", 2)]  # one new comment: D
    replies = [x for x in world.fake.review_comments_of(REPO, NUMBER) if x.get("in_reply_to_id")]
    assert len(replies) == 2  # nothing else
    check = world.fake.check_runs_of(REPO)[-1]
    assert check.conclusion == "failure"  # D is high and open
    states = dict(
        Finding.objects.filter(review__run__head_sha=before).values_list("title", "state")
    )
    assert states["`subprocess` call with `shell=True` identified, security issue"] == "resolved"
    assert (
        states["Use of possibly insecure function; consider using `ast.literal_eval`"] == "outdated"
    )
    assert main_reviews(world)[-1]["state"] == "COMMENTED"  # D is open: no approval

    # Push 3: fix D.
    before = world.push({"app/debug.py": DEBUG_3})
    third = deliver(world, "synchronize", before=before)
    d = thread_of(world, "app/debug.py", 2)
    assert d["isResolved"] and d["comments"][1]["body"].startswith(
        f"Verified fixed in {world.pull.head_sha[:7]}"
    )
    assert world.fake.check_runs_of(REPO)[-1].conclusion == "success"  # C is low: below the gate
    assert main_reviews(world)[-1]["state"] == "APPROVED"
    assert Review.objects.get(run=third).approved

    # The person's thread was never touched.
    [theirs] = [t for t in world.fake.threads_of(REPO, NUMBER) if t["first"] == person["id"]]
    assert len(theirs["comments"]) == 1 and not theirs["isResolved"]


def test_no_approval_when_disabled(world, deliver):
    deliver(world, "opened")
    before = world.push({"app/payments.py": PAYMENTS_2, "app/tools.py": TOOLS_2})
    deliver(world, "synchronize", before=before)
    assert main_reviews(world)[-1]["state"] == "COMMENTED"


def test_no_approval_when_the_head_moved_during_the_review(world, deliver, client, test_app):
    deliver(world, "opened")
    set_policy(auto_approve=True, approve_with_nits=True)  # C, a nit, stays open
    before = world.push({"app/payments.py": PAYMENTS_2, "app/tools.py": TOOLS_2})
    body = pull_request_payload(
        world.fake, world.repo, world.pull, action="synchronize", before=before
    )
    post_webhook(client, "pull_request", body, secret=test_app.webhook_secret)
    drain_queue(only="webhooks.tasks.delivery_process")
    # The guard sees the reviewed head; then a push lands while the review runs.
    from reviews.pipeline import forges

    original = forges.approval_decide

    def moved(ctx, open_now):
        world.push({"README.md": "# Store!\n"})
        return original(ctx, open_now)

    forges.approval_decide = moved
    try:
        drain_queue()
    finally:
        forges.approval_decide = original
    review = Review.objects.order_by("-id").first()
    assert not review.approved
    assert any("head moved" in note for note in review.notes)
    assert main_reviews(world)[-1]["state"] == "COMMENTED"


def test_no_approval_on_a_draft(world, deliver):
    deliver(world, "opened")
    set_policy(auto_approve=True, approve_with_nits=True, review_drafts=True)
    world.pull.draft = True
    before = world.push({"app/payments.py": PAYMENTS_2, "app/tools.py": TOOLS_2})
    deliver(world, "synchronize", before=before)
    assert main_reviews(world)[-1]["state"] == "COMMENTED"
    assert any("draft" in note for note in Review.objects.order_by("-id").first().notes)


def test_tasukus_earlier_approval_is_dismissed_when_findings_open_again(world, deliver):
    deliver(world, "opened")
    set_policy(auto_approve=True, approve_with_nits=True)  # C, a nit, stays open
    before = world.push({"app/payments.py": PAYMENTS_2, "app/tools.py": TOOLS_2})
    deliver(world, "synchronize", before=before)
    approval = main_reviews(world)[-1]
    assert approval["state"] == "APPROVED"
    before = world.push({"app/debug.py": DEBUG_2})
    deliver(world, "synchronize", before=before)
    assert world.fake.repos[REPO].reviews[approval["id"]]["state"] == "DISMISSED"
    assert main_reviews(world)[-1]["state"] == "COMMENTED"


def _during_the_review(monkeypatch, what, step: str = "approval_decide") -> None:
    """`what()` happens on GitHub while the review runs, just before the forge's `step`."""
    from reviews.pipeline import forges

    original = getattr(forges, step)

    def meanwhile(*args, **kwargs):
        what()
        return original(*args, **kwargs)

    monkeypatch.setattr(forges, step, meanwhile)


def test_no_approval_when_the_pull_request_was_closed_during_the_review(
    world, deliver, monkeypatch
):
    deliver(world, "opened")
    set_policy(auto_approve=True, approve_with_nits=True)  # C, a nit, stays open
    _during_the_review(monkeypatch, lambda: setattr(world.pull, "state", "closed"))
    before = world.push({"app/payments.py": PAYMENTS_2, "app/tools.py": TOOLS_2})
    run = deliver(world, "synchronize", before=before)
    review = Review.objects.get(run=run)
    assert not review.approved
    assert "not approved: the pull request is closed" in review.notes
    assert main_reviews(world)[-1]["state"] == "COMMENTED"


def test_a_persons_approval_is_never_dismissed_when_findings_open_again(world, deliver):
    deliver(world, "opened")
    set_policy(auto_approve=True, approve_with_nits=True)
    before = world.push({"app/payments.py": PAYMENTS_2, "app/tools.py": TOOLS_2})
    deliver(world, "synchronize", before=before)
    ours_ = main_reviews(world)[-1]
    assert ours_["state"] == "APPROVED"
    persons = world.fake.person_review(REPO, NUMBER, login="maria", body="LGTM", state="APPROVED")
    before = world.push({"app/debug.py": DEBUG_2})
    deliver(world, "synchronize", before=before)
    reviews = world.fake.repos[REPO].reviews
    assert reviews[ours_["id"]]["state"] == "DISMISSED"
    assert reviews[persons["id"]]["state"] == "APPROVED"
    dismissed = [c.path for c in world.fake.requests("PUT", r"/dismissals$")]
    assert dismissed == [f"/repos/{REPO}/pulls/{NUMBER}/reviews/{ours_['id']}/dismissals"]


def test_a_head_moved_during_the_review_dismisses_nothing(world, deliver, monkeypatch):
    deliver(world, "opened")
    set_policy(auto_approve=True, approve_with_nits=True)
    before = world.push({"app/payments.py": PAYMENTS_2, "app/tools.py": TOOLS_2})
    deliver(world, "synchronize", before=before)
    approval = main_reviews(world)[-1]
    assert approval["state"] == "APPROVED"
    # Findings open on the reviewed head, but the author pushed again meanwhile: the
    # approval is left for the review of the newer head to judge.
    _during_the_review(
        monkeypatch, lambda: world.push({"README.md": "# Store!\n"}), step="approvals_dismiss"
    )
    before = world.push({"app/debug.py": DEBUG_2})
    run = deliver(world, "synchronize", before=before)
    assert world.fake.repos[REPO].reviews[approval["id"]]["state"] == "APPROVED"
    assert not world.fake.requests("PUT", r"/dismissals$")
    assert not any("dismiss" in note for note in Review.objects.get(run=run).notes)


def test_a_dismissal_branch_protection_refuses_is_a_note_not_a_failed_run(world, deliver):
    from reviews.models import Review

    deliver(world, "opened")
    set_policy(auto_approve=True, approve_with_nits=True)
    before = world.push({"app/payments.py": PAYMENTS_2, "app/tools.py": TOOLS_2})
    deliver(world, "synchronize", before=before)
    approval = main_reviews(world)[-1]
    assert approval["state"] == "APPROVED"
    world.fake.inject(
        1, status=403, method="PUT", path=r"/reviews/\d+/dismissals$",
        body={"message": "Dismissing reviews is restricted by branch protection"},
    )  # fmt: skip
    before = world.push({"app/debug.py": DEBUG_2})
    run = deliver(world, "synchronize", before=before)  # completed, not failed
    assert world.fake.repos[REPO].reviews[approval["id"]]["state"] == "APPROVED"
    notes = Review.objects.get(run=run).notes
    assert any(f"could not dismiss Tasuku's earlier approval {approval['id']}" in n for n in notes)
    assert world.fake.check_runs_of(REPO)[-1].conclusion == "failure"


def test_a_maintainer_resolving_a_thread_without_a_code_change_dismisses_it_for_good(
    world, deliver
):
    deliver(world, "opened")
    c = thread_of(world, "deploy.sh", 3)
    world.fake.add_collaborator(REPO, "maria", "write")
    world.fake.person_resolves(REPO, c["id"], login="maria")
    before = world.push({"app/payments.py": PAYMENTS_2})
    deliver(world, "synchronize", before=before)
    assert Dismissal.objects.get().login == "maria"
    # A force push brings a full review that finds C again: it is not posted again.
    rewritten = world.git.commit(
        {"app/payments.py": PAYMENTS_2, "app/tools.py": TOOLS_1, "deploy.sh": DEPLOY},
        parent=world.git.git("rev-parse", "main").strip(),
        branch="feature",
    )
    world.pull.head_sha = rewritten
    world.repo.commits.add(rewritten)
    count = len(world.fake.review_comments_of(REPO, NUMBER))
    run = deliver(world, "synchronize")
    assert run.incremental_since == ""
    assert not [
        x for x in world.fake.review_comments_of(REPO, NUMBER)[count:] if x["path"] == "deploy.sh"
    ]
    shell = Finding.objects.get(review__run=run, path="deploy.sh")
    assert shell.state == "suppressed" and shell.suppression_reason == "dismissed by maria"


def test_a_dismiss_command_from_a_maintainer_found_at_the_next_review_dismisses_it(world, deliver):
    # The reply's webhook never arrived: the next review reads the thread itself.
    deliver(world, "opened")
    c = thread_of(world, "deploy.sh", 3)
    world.fake.add_collaborator(REPO, "maria", "write")
    world.fake.person_comment(
        REPO,
        NUMBER,
        login="maria",
        body="@tasuku-test dismiss TARGET_DIR never has spaces.",
        reply_to=c["first"],
    )
    before = world.push({"app/payments.py": PAYMENTS_2})
    deliver(world, "synchronize", before=before)
    dismissal = Dismissal.objects.get()
    assert (dismissal.login, dismissal.how, dismissal.role) == ("maria", "command", "write")
    assert dismissal.reason == "TARGET_DIR never has spaces."


def test_a_crash_during_reconciliation_then_a_retry_posts_no_second_reply_or_resolution(
    world, deliver, client, test_app
):
    from django.utils import timezone

    from reviews.queue.runs import runs_reap

    deliver(world, "opened")
    before = world.push({"app/payments.py": PAYMENTS_2, "app/tools.py": TOOLS_2})
    # The threads query and A's resolution go through; B's resolution fails three times.
    world.fake.inject(3, status=502, method="POST", path=r"^/graphql$", skip=2)
    body = pull_request_payload(
        world.fake, world.repo, world.pull, action="synchronize", before=before
    )
    post_webhook(client, "pull_request", body, secret=test_app.webhook_secret)
    drain_queue()
    run = ReviewRun.objects.order_by("-id").first()
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and run.stage == "publication"

    ReviewRun.objects.filter(pk=run.pk).update(next_attempt_at=timezone.now())
    runs_reap()
    drain_queue()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    for path, line in (("app/payments.py", 6), ("app/tools.py", 2)):
        thread = thread_of(world, path, line)
        assert len(thread["comments"]) == 2, thread  # the finding and one reply
        assert thread["isResolved"]
    # The push fixed both and raised nothing new: the first review's summary was brought
    # up to date (once, by the retried run), not a second review posted.
    [main] = [r for r in world.fake.reviews_of(REPO, NUMBER) if "tasuku:review:run-" in r["body"]]
    assert f"tasuku:review:run-{run.pk}:" in main["body"]


def test_without_contents_write_threads_are_answered_but_left_open(world, deliver):
    # GitHub resolves a thread for an App only with Contents: write; an installation
    # that granted read-only still gets its reviews and the "verified fixed" reply.
    world.fake.installations[INSTALLATION].permissions = {
        **world.fake.installations[INSTALLATION].permissions,
        "contents": "read",
    }
    deliver(world, "opened")
    before = world.push({"app/payments.py": PAYMENTS_2})
    run = deliver(world, "synchronize", before=before)
    a = thread_of(world, "app/payments.py", 6)
    assert a["comments"][1]["body"].startswith(f"Verified fixed in {world.pull.head_sha[:7]}")
    assert not a["isResolved"]
    review = Review.objects.get(run=run)
    assert any("could not resolve the thread" in note for note in review.notes), review.notes
    assert (
        Finding.objects.get(review__run__head_sha=before, path="app/payments.py").state
        == "resolved"
    )


def test_the_run_page_shows_what_the_run_closed_and_why(world, deliver, admin_client):
    deliver(world, "opened")
    before = world.push({"app/payments.py": PAYMENTS_2, "app/tools.py": TOOLS_2})
    run = deliver(world, "synchronize", before=before)
    page = admin_client.get(f"/runs/{run.pk}/").content.decode()
    assert "Earlier findings closed by this run" in page
    assert "app/payments.py:6 was changed and the problem is gone" in page
    assert "the code around app/tools.py:2 was removed" in page


def test_a_push_with_nothing_new_to_say_updates_the_summary_in_place(world, deliver):
    first = deliver(world, "opened")
    [review] = main_reviews(world)
    assert f"tasuku:review:run-{first.pk}:" in review["body"]
    comments = len(world.fake.review_comments_of(REPO, NUMBER))

    # A push that touches nothing Tasuku reports on: every finding stands, none is new.
    before = world.push({"README.md": "# Store\n\nSells things.\n"})
    second = deliver(world, "synchronize", before=before)
    [updated] = main_reviews(world)  # no second review ...
    assert updated["id"] == review["id"] and updated["state"] == "COMMENTED"
    assert f"tasuku:review:run-{second.pk}:" in updated["body"]  # ... its summary is the new run's
    assert world.pull.head_sha[:7] in updated["body"]
    assert len(world.fake.review_comments_of(REPO, NUMBER)) == comments  # nothing re-posted
    row = Review.objects.get(run=second)
    assert row.github_review_id == review["id"]
    assert any("updated in place" in note for note in row.notes)
    check = [c for c in world.fake.check_runs_of(REPO) if c.head_sha == world.pull.head_sha][-1]
    assert (check.status, check.conclusion) == ("completed", "failure")  # the findings stand

    # A push with a new problem gets a review of its own.
    before = world.push({"app/debug.py": DEBUG_2})
    deliver(world, "synchronize", before=before)
    assert len(main_reviews(world)) == 2


def test_a_summary_someone_else_changed_is_left_as_it_is(world, deliver):
    deliver(world, "opened")
    [review] = main_reviews(world)
    # Someone (or an earlier version) edited the review: it no longer says Tasuku's run.
    world.fake.repos[REPO].reviews[review["id"]]["body"] = "edited by hand"
    before = world.push({"README.md": "# Store\n\nSells things.\n"})
    deliver(world, "synchronize", before=before)
    bodies = [r["body"] for r in world.fake.reviews_of(REPO, NUMBER)]
    assert "edited by hand" in bodies  # left as it is
    assert len(main_reviews(world)) == 1  # and a new review posted instead


def test_a_carried_findings_words_name_the_lines_it_moved_to():
    from reviews.validation.reconcile import text_moved

    evidence = "ruff S602 at app/payments.py:8: `subprocess.call(cmd, shell=True)`"
    assert text_moved(evidence, "app/payments.py", 8, 8, 2) == (
        "ruff S602 at app/payments.py:10: `subprocess.call(cmd, shell=True)`"
    )
    # Only the finding's own lines, and `path:N` only of its own file.
    said = "on line 3; lines 3-4; see app/other.py:3 and app/payments.py:30"
    assert text_moved(said, "app/payments.py", 3, 4, 5) == (
        "on line 8; lines 8-9; see app/other.py:3 and app/payments.py:30"
    )
    assert text_moved(said, "app/payments.py", 3, 4, 0) == said


def test_a_finding_the_rules_stopped_raising_is_outdated_never_verified_fixed():
    """A deterministic checker's finding not raised again after its file changed
    elsewhere was "Verified fixed". If the static reviewer's rules changed between the
    two reviews (Tasuku or a checker upgraded, a rule narrowed), the code fixed nothing:
    the finding is outdated, and the sentence says the rules changed."""
    from reviews.scope.diff import diff_parse
    from reviews.validation.reconcile import OUTDATED, RESOLVED, Earlier, reconcile

    diff = diff_parse(
        "diff --git a/run.sh b/run.sh\n--- a/run.sh\n+++ b/run.sh\n"
        "@@ -1,2 +1,3 @@\n #!/bin/bash\n+set -e\n local x=$(f)\n"
    )
    earlier = [Earlier("f1", "run.sh", 12, 12, checker="shellcheck", deterministic=True)]
    examined = {"run.sh": frozenset({"shellcheck"})}
    kept = reconcile(earlier, set(), diff=diff, head_sha="abc1234", examined=examined)
    assert kept["f1"].state == RESOLVED  # the same rules: its file's change fixed it
    upgraded = reconcile(
        earlier, set(), diff=diff, head_sha="abc1234", examined=examined, rules_changed=True
    )
    assert (upgraded["f1"].state, upgraded["f1"].code_changed) == (OUTDATED, False)
    assert "rules changed" in upgraded["f1"].reason
    assert "not verified fixed" in upgraded["f1"].reason
    # The first review after the upgrade that began recording rules: unknown, not "fixed".
    unknown = reconcile(
        earlier, set(), diff=diff, head_sha="abc1234", examined=examined, rules_unrecorded=True
    )
    assert (unknown["f1"].state, unknown["f1"].code_changed) == (OUTDATED, False)
    assert "were not recorded" in unknown["f1"].reason
    # Its file untouched: it stays open whatever the rules (only a writer closes it then).
    elsewhere = diff_parse(
        "diff --git a/other.sh b/other.sh\n--- a/other.sh\n+++ b/other.sh\n"
        "@@ -1,1 +1,2 @@\n #!/bin/bash\n+set -e\n"
    )
    untouched = reconcile(
        earlier, set(), diff=elsewhere, head_sha="abc1234", examined=examined, rules_changed=True
    )
    assert untouched["f1"].state == "current"


def test_a_review_records_the_rules_that_decided_its_findings(world, deliver):
    """Through the pipeline: the admin turns ruff's S602 off between two pushes, and the
    second (rebased, reviewed whole) changes app/payments.py elsewhere. Its `shell=True`
    finding is not raised again; the code is as it was, so the reply says the rules
    changed — never "Verified fixed"."""
    run = deliver(world, "opened")
    review = Review.objects.get(run=run)
    assert review.rules.startswith("static:") and len(review.rules) == len("static:") + 16
    set_policy(static_rules="-S602")
    before = world.pull.head_sha
    base = world.pull.base_sha
    world.pull.head_sha = world.git.commit(  # a rebase: not a descendant of the last head
        {"app/payments.py": PAYMENTS_1 + "\n\nLIMIT = 3\n", "app/tools.py": TOOLS_1,
         "deploy.sh": DEPLOY}, parent=base, branch="feature",
    )  # fmt: skip
    world.repo.commits.add(world.pull.head_sha)
    second = deliver(world, "synchronize", before=before)
    assert Review.objects.get(run=second).rules != review.rules
    said = thread_of(world, "app/payments.py", 6)["comments"][-1]["body"]
    assert said.startswith(f"Outdated at {world.pull.head_sha[:7]}: ruff no longer reports it")
    assert "rules changed" in said and "Verified fixed" not in said

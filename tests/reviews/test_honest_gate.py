"""An honest gate: the check run and the review tell the truth about the head, whatever
is pushed, replied or planted. Each scenario goes through the real webhook endpoint and
the worker against the fake GitHub."""

from __future__ import annotations

import pytest

from repos.models import Repository
from reviews.models import Dismissal, Finding, Review, ReviewRun, RunStatus
from tests.gitworld import AWS_KEY_LINE, PAYMENTS, REPO, SHELL_TRUE_LINE, world_build
from tests.helpers import drain_queue, post_webhook, pull_request_payload

pytestmark = pytest.mark.django_db

SLUG = "tasuku-test"
KEY_TITLE = "AWS Access Key"


@pytest.fixture
def world(fake_github):
    return world_build(fake_github)


@pytest.fixture
def deliver(client, test_app):
    def send(world, action="opened", **extra):
        body = pull_request_payload(world.fake, world.repo, world.pull, action=action, **extra)
        response = post_webhook(client, "pull_request", body, secret=test_app.webhook_secret)
        assert response.status_code == 202, response.content
        drain_queue()
        run = ReviewRun.objects.order_by("-id").first()
        run.refresh_from_db()
        assert run.status == RunStatus.COMPLETED, (run.status, run.stage, run.reason)
        return run

    return send


@pytest.fixture
def reply(client, test_app):
    """A person's reply in one of Tasuku's threads, as GitHub delivers it."""

    def send(world, parent, body, *, login="stranger", association="NONE"):
        comment = world.fake.person_comment(
            REPO, world.pull.number, login=login, body=body, reply_to=parent["id"]
        )
        comment = {k: v for k, v in comment.items() if not k.startswith("_")}
        comment["author_association"] = association
        payload = {
            "action": "created",
            "comment": comment,
            "pull_request": world.fake._pull_json(world.repo, world.pull),
            "repository": world.fake._repo_json(world.repo),
            "installation": {"id": world.repo.installation_id},
        }
        response = post_webhook(
            client, "pull_request_review_comment", payload, secret=test_app.webhook_secret
        )
        assert response.status_code == 202
        drain_queue()
        return comment

    return send


def set_policy(**values):
    policy = Repository.objects.get(full_name=REPO).policy
    for key, value in values.items():
        setattr(policy, key, value)
    policy.save()


def last_check(world):
    return world.fake.check_runs_of(REPO)[-1]


def ours(comment) -> bool:
    return comment["user"]["type"] == "Bot"


def thread_at(world, path, line):
    [thread] = [
        t
        for t in world.fake.threads_of(REPO, world.pull.number)
        if ours(t["comments"][0])
        and t["comments"][0]["path"] == path
        and t["comments"][0]["line"] == line
    ]
    return thread


def open_titles(run):
    return sorted(
        Finding.objects.filter(review__run=run, state="open").values_list("title", flat=True)
    )


def tasuku_reviews(world):
    return [r for r in world.fake.reviews_of(REPO, world.pull.number) if ours(r)]


# --- 1. A push the engine does not look at carries what is open -------------------------


@pytest.mark.parametrize(
    "files",
    [
        {"README.md": "# Shop\n\nSells widgets, gadgets and gizmos.\n"},
        {"app/payments.py": PAYMENTS.replace("def refund", "# Refunds an order.\ndef refund")},
        {},  # an empty commit
    ],
    ids=["docs-only", "comment-only", "empty"],
)
def test_a_push_triage_finds_trivial_keeps_a_failing_check_failing(world, deliver, files):
    first = deliver(world)
    assert last_check(world).conclusion == "failure"
    before = open_titles(first)
    assert any(KEY_TITLE in t for t in before) and any("shell=True" in t for t in before)

    previous = world.pull.head_sha
    world.push(files, message="docs")
    run = deliver(world, "synchronize", before=previous)

    assert run.reason.startswith("trivial")
    check = last_check(world)
    assert check.head_sha == world.pull.head_sha
    assert check.conclusion == "failure", check.output
    assert "not reviewed in depth" in check.output["title"]
    assert "Not reviewed in depth" in check.output["summary"]
    assert KEY_TITLE in check.output["summary"]
    assert open_titles(run) == before  # carried onto the trivial review, still open
    # The carried findings keep their threads, and the next full review starts from them.
    carried = Finding.objects.get(review__run=run, title__contains=KEY_TITLE)
    assert carried.github_comment_id is not None


def test_a_trivial_push_on_a_clean_pull_request_is_neutral_never_success(fake_github, deliver):
    world = world_build(
        fake_github, head_files={"app/payments.py": "def refund(order_id):\n    return order_id\n"}
    )
    deliver(world)
    assert last_check(world).conclusion == "success"  # reviewed in full, nothing found
    previous = world.pull.head_sha
    world.push({"README.md": "# Shop\n\nTypo fixed.\n"})
    deliver(world, "synchronize", before=previous)
    check = last_check(world)
    assert check.conclusion == "neutral"
    assert check.output["title"] == "No open findings · not reviewed in depth"


def test_a_comment_only_push_moves_carried_findings_to_their_new_lines(world, deliver):
    first = deliver(world)
    previous = world.pull.head_sha
    world.push({"app/payments.py": "# Payments.\n# Refunds.\n" + PAYMENTS})
    run = deliver(world, "synchronize", before=previous)
    assert run.reason.startswith("trivial")
    old = Finding.objects.get(review__run=first, title__contains="shell=True")
    new = Finding.objects.get(review__run=run, title__contains="shell=True")
    assert (old.start_line, new.start_line) == (SHELL_TRUE_LINE, SHELL_TRUE_LINE + 2)
    key = Finding.objects.get(review__run=run, title__contains=KEY_TITLE)
    assert key.start_line == AWS_KEY_LINE + 2
    assert f"app/payments.py:{SHELL_TRUE_LINE + 2}" in last_check(world).output["summary"]


def test_the_budget_stop_carries_open_findings_too(world, deliver):
    from decimal import Decimal

    from repos.models import Installation

    deliver(world)
    Installation.objects.update(monthly_budget_usd=Decimal("0"))
    set_policy(triage_enabled=False)
    previous = world.pull.head_sha
    world.push({"app/util.py": "def util():\n    return 1\n"})
    run = deliver(world, "synchronize", before=previous)
    assert run.reason.startswith("this month's review budget is spent")
    check = last_check(world)
    assert check.conclusion == "failure"
    assert "budget" in check.output["summary"]
    assert any(KEY_TITLE in t for t in open_titles(run))


# --- 2. Who may silence a finding, and how ----------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Is this intended? Looks like a real key to me.",
        "This is not intended, fixing it now",
        "NOT a false positive",
        "false positive, won't fix, by design",
    ],
)
def test_free_text_replies_never_dismiss(world, deliver, reply, text):
    deliver(world)
    key = thread_at(world, "app/payments.py", AWS_KEY_LINE)
    world.fake.add_collaborator(REPO, "maria", "admin")
    reply(world, key["comments"][0], text, login="maria", association="MEMBER")
    assert not Dismissal.objects.exists()
    answer = thread_at(world, "app/payments.py", AWS_KEY_LINE)["comments"][-1]
    assert ours(answer) and f"@{SLUG} dismiss <reason>" in answer["body"]

    set_policy(auto_approve=True)
    previous = world.pull.head_sha
    world.push({"app/util.py": "def util():\n    return 1\n"})
    run = deliver(world, "synchronize", before=previous)
    assert last_check(world).conclusion == "failure"
    assert any(KEY_TITLE in t for t in open_titles(run))
    assert tasuku_reviews(world)[-1]["state"] == "COMMENTED"  # no approval with the key in


def test_a_dismiss_command_from_someone_without_write_access_is_refused(world, deliver, reply):
    deliver(world)
    key = thread_at(world, "app/payments.py", AWS_KEY_LINE)
    world.fake.add_collaborator(REPO, "reader", "triage")
    # Their association says MEMBER (an org member); GitHub's permission says triage.
    reply(world, key["comments"][0], f"@{SLUG} dismiss test key", login="reader",
          association="MEMBER")  # fmt: skip
    assert not Dismissal.objects.exists()
    answer = thread_at(world, "app/payments.py", AWS_KEY_LINE)["comments"][-1]
    assert "Not dismissed" in answer["body"]
    previous = world.pull.head_sha
    world.push({"app/util.py": "def util():\n    return 1\n"})
    deliver(world, "synchronize", before=previous)
    assert last_check(world).conclusion == "failure"


def test_a_dismiss_command_from_a_writer_dismisses_and_records_who_how_and_why(
    world, deliver, reply, staff_client
):
    deliver(world)
    key = thread_at(world, "app/payments.py", AWS_KEY_LINE)
    shell = thread_at(world, "app/payments.py", SHELL_TRUE_LINE)
    # Private org members arrive as CONTRIBUTOR; GitHub's permission endpoint knows better.
    world.fake.add_collaborator(REPO, "lead", "maintain")
    reply(world, key["comments"][0], f"@{SLUG} dismiss it is AWS's documented example key",
          login="lead", association="CONTRIBUTOR")  # fmt: skip
    reply(world, shell["comments"][0], f"@{SLUG} dismiss order ids are integers",
          login="lead", association="CONTRIBUTOR")  # fmt: skip
    dismissal = Dismissal.objects.get(login="lead", reason__contains="documented example")
    assert (dismissal.how, dismissal.role) == ("command", "maintain")

    previous = world.pull.head_sha
    world.push({"app/util.py": "def util():\n    return 1\n"})
    run = deliver(world, "synchronize", before=previous)
    assert not any(KEY_TITLE in t for t in open_titles(run))
    assert last_check(world).conclusion == "success"
    page = staff_client.get(f"/runs/{run.pk}/").content.decode()
    assert "dismissed by lead" in page


def test_a_quoted_dismiss_command_is_not_a_command(world, deliver, reply):
    deliver(world)
    key = thread_at(world, "app/payments.py", AWS_KEY_LINE)
    world.fake.add_collaborator(REPO, "lead", "admin")
    reply(world, key["comments"][0], f"> @{SLUG} dismiss whatever\n\nWho wrote this?",
          login="lead")  # fmt: skip
    assert not Dismissal.objects.exists()


def test_a_thread_resolved_by_a_read_only_user_is_reopened_and_the_finding_stays(world, deliver):
    deliver(world)
    key = thread_at(world, "app/payments.py", AWS_KEY_LINE)
    world.fake.add_collaborator(REPO, "viewer", "read")
    world.fake.person_resolves(REPO, key["id"], login="viewer")
    previous = world.pull.head_sha
    world.push({"app/util.py": "def util():\n    return 1\n"})
    run = deliver(world, "synchronize", before=previous)
    assert not Dismissal.objects.exists()
    assert any(KEY_TITLE in t for t in open_titles(run))
    assert last_check(world).conclusion == "failure"
    thread = thread_at(world, "app/payments.py", AWS_KEY_LINE)
    assert not thread["isResolved"]
    assert thread["comments"][-1]["body"].startswith("Reopened: this finding is still open")


def test_the_author_resolving_a_thread_dismisses_only_where_the_policy_allows(world, deliver):
    deliver(world)
    author = world.pull.author_login
    shell = thread_at(world, "app/payments.py", SHELL_TRUE_LINE)
    world.fake.person_resolves(REPO, shell["id"], login=author)
    previous = world.pull.head_sha
    world.push({"app/util.py": "def util():\n    return 1\n"})
    deliver(world, "synchronize", before=previous)
    assert not Dismissal.objects.exists()  # the author has no write access here
    assert not thread_at(world, "app/payments.py", SHELL_TRUE_LINE)["isResolved"]

    set_policy(author_may_dismiss=True)
    world.fake.person_resolves(REPO, shell["id"], login=author)
    previous = world.pull.head_sha
    world.push({"app/util2.py": "def util2():\n    return 2\n"})
    deliver(world, "synchronize", before=previous)
    dismissal = Dismissal.objects.get()
    assert (dismissal.login, dismissal.how, dismissal.role) == (author, "resolved", "author")


def test_a_thread_resolved_by_a_maintainer_dismisses_the_finding(world, deliver):
    deliver(world)
    shell = thread_at(world, "app/payments.py", SHELL_TRUE_LINE)
    world.fake.add_collaborator(REPO, "lead", "write")
    world.fake.person_resolves(REPO, shell["id"], login="lead")
    previous = world.pull.head_sha
    world.push({"app/util.py": "def util():\n    return 1\n"})
    run = deliver(world, "synchronize", before=previous)
    dismissal = Dismissal.objects.get()
    assert (dismissal.login, dismissal.how, dismissal.role) == ("lead", "resolved", "write")
    assert not any("shell=True" in t for t in open_titles(run))
    assert last_check(world).conclusion == "failure"  # the key is still open


# --- 3. Markers are trusted on Tasuku's own posts only ----------------------------------


def test_a_copied_run_marker_in_the_authors_review_does_not_stop_tasukus_review(world, deliver):
    # The author predicts the next run's id and posts a review carrying its marker, the
    # old (unsigned) form and a signed one copied from another run.
    from reviews.rendering import run_marker

    world.fake.person_review(
        REPO, world.pull.number, login="author",
        body=f"LGTM\n\n<!-- tasuku:review:run-1 -->\n\n{run_marker(1)}",
    )  # fmt: skip
    run = deliver(world)
    assert run.pk == 1
    [ours_] = tasuku_reviews(world)
    review = Review.objects.get(run=run)
    assert review.github_review_id == ours_["id"]
    assert len([c for c in world.fake.review_comments_of(REPO, world.pull.number) if ours(c)]) >= 2


def test_a_copied_finding_marker_does_not_stop_the_comment_or_steal_its_thread(world, deliver):
    from reviews.rendering import finding_marker
    from reviews.validation import fingerprint

    # The author predicts the AWS key finding's fingerprint and plants its marker, signed
    # or not, on a line comment of their own.
    planted = fingerprint("app/payments.py", "secret", "AWS Access Key", 0)
    world.fake.person_comment(
        REPO, world.pull.number, login="author", path="app/payments.py", line=AWS_KEY_LINE,
        body=f"<!-- tasuku:finding:{planted} -->\n{finding_marker(planted)}",
    )  # fmt: skip
    run = deliver(world)
    key = Finding.objects.get(review__run=run, title__contains=KEY_TITLE)
    comment = next(
        c
        for c in world.fake.review_comments_of(REPO, world.pull.number)
        if c["id"] == key.github_comment_id
    )
    assert ours(comment)
    # Fixed later: Tasuku answers in its own thread, never the author's.
    previous = world.pull.head_sha
    world.push({"app/payments.py": PAYMENTS.replace('"AKIAIOSFODNN7EXAMPLE"', "None")})
    deliver(world, "synchronize", before=previous)
    theirs = [
        t for t in world.fake.threads_of(REPO, world.pull.number) if not ours(t["comments"][0])
    ]
    assert theirs and all(len(t["comments"]) == 1 for t in theirs)
    assert thread_at(world, "app/payments.py", AWS_KEY_LINE)["isResolved"]


# --- 6. A problem that comes back is visible --------------------------------------------


def test_a_fixed_problem_put_back_reopens_its_thread(world, deliver):
    deliver(world)
    fixed = PAYMENTS.replace("cmd, shell=True", "cmd.split()")
    previous = world.pull.head_sha
    world.push({"app/payments.py": fixed})
    deliver(world, "synchronize", before=previous)
    shell = thread_at(world, "app/payments.py", SHELL_TRUE_LINE)
    assert shell["isResolved"] and "Verified fixed" in shell["comments"][-1]["body"]

    previous = world.pull.head_sha
    world.push({"app/payments.py": PAYMENTS})
    run = deliver(world, "synchronize", before=previous)
    back = world.pull.head_sha[:7]
    shell = thread_at(world, "app/payments.py", SHELL_TRUE_LINE)
    assert not shell["isResolved"]
    assert shell["comments"][-1]["body"].startswith(f"Back in {back}")
    assert last_check(world).conclusion == "failure"
    finding = Finding.objects.get(review__run=run, title__contains="shell=True")
    assert finding.state == "open" and finding.github_comment_id == shell["comments"][0]["id"]
    # No second thread for the same problem.
    assert len([t for t in world.fake.threads_of(REPO, world.pull.number)
                if ours(t["comments"][0]) and "shell=True" in t["comments"][0]["body"]]) == 1  # fmt: skip

    # Fixed again: the same thread is answered and resolved again.
    previous = world.pull.head_sha
    world.push({"app/payments.py": fixed})
    deliver(world, "synchronize", before=previous)
    shell = thread_at(world, "app/payments.py", SHELL_TRUE_LINE)
    assert shell["isResolved"]
    assert shell["comments"][-1]["body"].startswith(f"Verified fixed in {world.pull.head_sha[:7]}")


# --- 7. Smaller lies --------------------------------------------------------------------


NIT_ONLY = "#!/bin/bash\nset -e\ncp build/app.tar.gz $TARGET_DIR\n"  # SC2086: low, not blocking


@pytest.mark.parametrize("with_nits", [False, True])
def test_approval_with_a_nit_open_follows_the_policy(fake_github, deliver, with_nits):
    world = world_build(fake_github, head_files={"deploy.sh": NIT_ONLY})
    deliver(world)
    set_policy(auto_approve=True, approve_with_nits=with_nits)
    previous = world.pull.head_sha
    world.push({"app/util.py": "def util():\n    return 1\n"})
    run = deliver(world, "synchronize", before=previous)
    assert open_titles(run)  # the nit is open
    assert last_check(world).conclusion == "success"
    review = Review.objects.get(run=run)
    assert review.approved is with_nits
    assert tasuku_reviews(world)[-1]["state"] == ("APPROVED" if with_nits else "COMMENTED")
    if not with_nits:
        assert any("1 finding is open" in n for n in review.notes), review.notes


def test_the_review_body_says_earlier_findings_are_still_open(world, deliver):
    deliver(world)
    set_policy(triage_enabled=False)
    previous = world.pull.head_sha
    world.push({"app/util.py": "def util():\n    return 1\n"})
    deliver(world, "synchronize", before=previous)
    body = tasuku_reviews(world)[-1]["body"]
    assert "no problems found" not in body
    assert "earlier findings are still open on this pull request" in body

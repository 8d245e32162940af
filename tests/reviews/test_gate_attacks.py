"""The gate against an adversarial review: each test is a way someone once made the check
say more than the code deserved (or silenced a finding without the right), and what
happens now. Through the real webhook endpoint and worker against the fake GitHub."""

from __future__ import annotations

import pytest

from reviews.models import Dismissal, Finding, ReviewRun
from tests.gitworld import AWS_KEY_LINE, PAYMENTS, REPO, SHELL_TRUE_LINE, world_build
from tests.reviews import test_honest_gate as gate
from tests.reviews.test_honest_gate import SLUG, last_check, set_policy, thread_at

# The scenario fixtures of the gate's own tests.
world, deliver, reply, claude_reviewer = (
    gate.world, gate.deliver, gate.reply, gate.claude_reviewer
)  # fmt: skip

pytestmark = pytest.mark.django_db

CLEAN = {"app/payments.py": "def refund(order_id):\n    return order_id\n"}
SECRET_LINE = 'AWS_ACCESS_KEY_ID = "AKIAZ2Q7WJ4KXN5BL3TP"'
NO_KEY = PAYMENTS.replace(SECRET_LINE + "\n", "")
UTIL = {"app/util.py": "def util():\n    return 1\n"}


def open_findings(run):
    return list(Finding.objects.filter(review__run=run, state="open"))


def repository_first(world):
    from repos.services import installation_upsert, repository_upsert

    installation = installation_upsert(github_id=world.repo.installation_id, account_login="acme")
    repository_upsert(installation=installation, github_id=world.repo.id, full_name=REPO)


def full_review(client, test_app, world):
    from tests.helpers import drain_queue, issue_comment_payload, post_webhook

    world.fake.add_collaborator(REPO, "maria", "admin")
    body = issue_comment_payload(
        world.fake, world.repo, world.pull.number, body=f"@{SLUG} full review"
    )
    post_webhook(client, "issue_comment", body, secret=test_app.webhook_secret)
    drain_queue()
    return ReviewRun.objects.order_by("-id").first()


@pytest.mark.parametrize(
    "files",
    [
        {"app/changes.py": PAYMENTS},  # "documentation" by its stem
        {"app/payments.py": CLEAN["app/payments.py"] + SECRET_LINE + "  # */\n"},  # "a comment"
        {"docs/deploy.py": PAYMENTS},  # under docs/
    ],
    ids=["stem-changes", "trailing-block-comment", "docs-dir"],
)
def test_what_a_trivial_verdict_skipped_is_reviewed_by_the_next_review(fake_github, deliver, files):
    world = world_build(fake_github, head_files=CLEAN)
    deliver(world)
    previous = world.pull.head_sha
    world.push(files)
    deliver(world, "synchronize", before=previous)
    assert last_check(world).conclusion in ("neutral", "failure")  # never success
    previous = world.pull.head_sha
    world.push(UTIL)
    run = deliver(world, "synchronize", before=previous)
    # The triaged review is no base: the changes it skipped are reviewed now.
    assert last_check(world).conclusion == "failure", last_check(world).output
    assert open_findings(run)


def test_a_force_push_after_a_trivial_review_reviews_what_it_skipped(
    fake_github, deliver, client, test_app
):
    world = world_build(fake_github, head_files=CLEAN)
    deliver(world)
    previous = world.pull.head_sha
    world.push({"app/changes.py": NO_KEY})
    deliver(world, "synchronize", before=previous)
    previous = world.pull.head_sha
    rebased = world.git.commit({**CLEAN, "app/changes.py": NO_KEY, **UTIL}, parent=world.base,
                               message="rebased", branch="feature")  # fmt: skip
    world.pull.head_sha = rebased
    world.repo.commits.add(rebased)
    deliver(world, "synchronize", before=previous)
    assert last_check(world).conclusion == "failure"


def test_findings_past_the_comment_limit_stay_open_and_keep_the_check_failing(fake_github, deliver):
    world = world_build(fake_github)
    repository_first(world)
    set_policy(comment_limit=1)
    first = deliver(world)
    published = Finding.objects.get(review__run=first, published=True)
    assert "AWS" in published.title  # the critical one is posted; shell=True is not
    shell = Finding.objects.get(review__run=first, title__contains="shell=True")
    assert (shell.state, shell.suppression_reason) == ("open", "over the comment limit (1)")
    previous = world.pull.head_sha
    world.push({"app/payments.py": PAYMENTS.replace('"AKIAZ2Q7WJ4KXN5BL3TP"', "None")})
    run = deliver(world, "synchronize", before=previous)
    check = last_check(world)
    assert check.conclusion == "failure"
    assert "shell=True" in check.output["summary"]
    assert any("shell=True" in f.title for f in open_findings(run))


def test_a_new_problem_of_the_same_kind_does_not_inherit_a_dismissal(fake_github, deliver, reply):
    world = world_build(fake_github, head_files={"app/payments.py": NO_KEY})
    deliver(world)
    shell = thread_at(world, "app/payments.py", SHELL_TRUE_LINE - 1)
    world.fake.add_collaborator(REPO, "lead", "maintain")
    reply(world, shell["comments"][0], f"@{SLUG} dismiss order ids are ints", login="lead")
    assert last_check(world).conclusion == "success"
    nuke = NO_KEY.replace(
        "\n\ndef refund",
        '\n\ndef nuke(path):\n    return subprocess.call(f"rm -rf {path}", shell=True)\n\n\ndef refund',
    )
    previous = world.pull.head_sha
    world.push({"app/payments.py": nuke})
    run = deliver(world, "synchronize", before=previous)
    [new] = open_findings(run)
    assert (new.start_line, "shell=True" in new.title) == (6, True)  # in nuke()
    assert last_check(world).conclusion == "failure"


def test_a_sentence_that_mentions_the_command_is_not_a_command(world, deliver, reply):
    deliver(world)
    key = thread_at(world, "app/payments.py", AWS_KEY_LINE)
    world.fake.add_collaborator(REPO, "maria", "admin")
    reply(world, key["comments"][0],
          f"This is a real key. Please nobody @{SLUG} dismiss this, rotate it instead!",
          login="maria", association="MEMBER")  # fmt: skip
    assert not Dismissal.objects.exists()


def test_a_file_too_large_to_read_makes_the_check_neutral_not_success(fake_github, deliver):
    from sandbox.engines.static.common import MAX_FILE_BYTES

    lines = MAX_FILE_BYTES // 100 + 1_000  # just over the limit
    big = PAYMENTS.replace(SECRET_LINE + "\n", "") + ("# " + "x" * 98 + "\n") * lines
    world = world_build(fake_github, head_files={"app/payments.py": big})
    deliver(world)
    check = last_check(world)
    assert check.conclusion == "neutral"
    assert "1 file not reviewed (larger than 8 MB)" in check.output["title"]
    assert "app/payments.py" in check.output["summary"]


def _removed(start, end, title="Removing run() breaks its callers"):
    return {"path": "app/legacy.py", "side": "LEFT", "start_line": start, "end_line": end,
            "severity": "high", "category": "correctness", "title": title,
            "body": "callers of run() now fail", "evidence": "app/other.py calls run()",
            "confidence": 0.95, "blocking": True}  # fmt: skip


def test_a_new_finding_on_removed_lines_in_a_later_push_is_raised(world, claude_reviewer):
    from tests.fakes.models import ToolCall

    claude, deliver_ = claude_reviewer
    claude.script(ToolCall("submit_review", {"findings": []}))
    deliver_(world)
    previous = world.pull.head_sha
    world.push({"app/legacy.py": "import subprocess\n"})  # removes run() (base lines 4-5)
    claude.script(ToolCall("submit_review", {"findings": [_removed(4, 5)]}))
    run = deliver_(world, "synchronize", before=previous)
    assert [f.side for f in open_findings(run)] == ["LEFT"]
    assert last_check(world).conclusion == "failure"


def test_an_open_finding_on_removed_lines_is_not_resolved_by_an_unrelated_edit(
    fake_github, claude_reviewer
):
    from tests.fakes.models import ToolCall

    claude, deliver_ = claude_reviewer
    other = "import subprocess\n\n\ndef other():\n    return {}\n\n\ndef more():\n    return 2\n"
    world = world_build(fake_github, head_files={"app/legacy.py": other.format(1)})
    claude.script(ToolCall("submit_review", {"findings": [_removed(4, 5)]}))
    deliver_(world)
    previous = world.pull.head_sha
    world.push({"app/legacy.py": other.format(11)})  # the previous head's lines 4-5
    claude.script(ToolCall("submit_review", {"findings": []}))
    run = deliver_(world, "synchronize", before=previous)
    assert [f.title for f in open_findings(run)] == ["Removing run() breaks its callers"]
    assert last_check(world).conclusion == "failure"


def test_a_bots_reply_never_dismisses_even_with_a_writers_name(world, deliver):
    deliver(world)
    key = thread_at(world, "app/payments.py", AWS_KEY_LINE)
    world.fake.add_collaborator(REPO, "lead", "admin")
    fake = world.fake
    with fake.lock:
        repo = fake.repos[REPO]
        parent = repo.review_comments[key["comments"][0]["id"]]
        bot = fake._user_json("lead[bot]", "Bot", 4242)
        fake._comment_add(repo, world.pull.number, bot, f"@{SLUG} dismiss echo", parent)
    previous = world.pull.head_sha
    world.push(UTIL)
    deliver(world, "synchronize", before=previous)
    assert not Dismissal.objects.exists()
    assert last_check(world).conclusion == "failure"


def test_a_min_severity_that_would_hide_a_failing_finding_does_not(fake_github, deliver):
    world = world_build(fake_github, head_files={"app/payments.py": NO_KEY})
    repository_first(world)
    from repos.models import RepositoryPolicy

    RepositoryPolicy.objects.update(min_severity="critical")  # saved before the admin refused it
    run = deliver(world)
    assert last_check(world).conclusion == "failure"
    assert any(f.published for f in open_findings(run))

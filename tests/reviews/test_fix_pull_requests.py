"""One-click fixes proposed as a pull request of Tasuku's (reviews/publication/fixes.py), through the
fake GitHub's Git Data API: one branch of Tasuku's, one commit over the head, one pull
request into the head branch, kept up to date and closed when nothing is left."""

from __future__ import annotations

import pytest

from repos.models import RepositoryPolicy
from reviews.models import Finding, FixProposal, PullRequest, Review, ReviewRun, RunStatus
from reviews.publication.fixes import FORK_NOTE, HEAD_NOTE, fixes_request, fixes_send
from reviews.publication.patching import LineFix, fixes_apply
from tests.gitworld import REPO, Symlink, world_build
from tests.helpers import drain_queue, post_webhook, pull_request_payload

pytestmark = pytest.mark.django_db

TIDY = "import os\nimport sys\n\n\ndef main():\n    print(sys.argv)\n"
UTIL = "import json\n\n\ndef name(x):\n    return x.name\n"
HEAD = {"app/tidy.py": TIDY, "app/util.py": UTIL}
BRANCH = "tasuku/fix/pr-7"


@pytest.fixture
def world(fake_github):
    return world_build(fake_github, head_files=HEAD)


def opted_in(world, on: bool = True) -> None:
    from repos.services import installation_upsert, repository_upsert

    installation = installation_upsert(github_id=world.repo.installation_id, account_login="acme")
    repository_upsert(installation=installation, github_id=world.repo.id, full_name=REPO)
    RepositoryPolicy.objects.update(fix_pull_requests=on)


@pytest.fixture
def deliver(client, test_app):
    def send(world, action="opened", **extra):
        body = pull_request_payload(world.fake, world.repo, world.pull, action=action, **extra)
        response = post_webhook(client, "pull_request", body, secret=test_app.webhook_secret)
        assert response.status_code == 202, response.content
        drain_queue()
        run = ReviewRun.objects.order_by("-id").first()
        assert run.status == RunStatus.COMPLETED, (run.stage, run.reason)
        return run

    return send


def fix_pulls(world):
    return [p for p in world.repo.pulls.values() if p.head_ref == BRANCH]


def branch_tip(world) -> str | None:
    try:
        return world.git.git("rev-parse", "--verify", "--quiet", f"refs/heads/{BRANCH}").strip()
    except RuntimeError:
        return None


def parents(world, sha: str) -> list[str]:
    return world.git.git("rev-list", "--parents", "-n", "1", sha).split()[1:]


def review_bodies(world) -> list[str]:
    return [r["body"] for r in world.fake.reviews_of(REPO, world.pull.number)]


def test_two_suggestions_become_one_commit_in_one_pull_request_into_the_head_branch(world, deliver):
    opted_in(world)
    head = world.head
    deliver(world)

    assert Finding.objects.filter(suggestion_applies=True, published=True).count() == 2
    [pull] = fix_pulls(world)
    assert (pull.base_ref, pull.state, pull.author_type) == ("feature", "open", "Bot")
    tip = branch_tip(world)
    assert pull.head_sha == tip
    assert parents(world, tip) == [head]  # one commit, over the head reviewed
    files = world.fake.fix_branch_files(REPO, f"refs/heads/{BRANCH}")
    assert files["app/tidy.py"] == "import sys\n\n\ndef main():\n    print(sys.argv)\n"
    assert files["app/util.py"] == "\n\ndef name(x):\n    return x.name\n"
    assert files["README.md"] == "# Shop\n\nSells widgets.\n"  # the rest is the head's
    # The author's branch is never written: it is where it was, and no ref but Tasuku's
    # was created or moved.
    assert world.git.git("rev-parse", "refs/heads/feature").strip() == head
    ref_writes = world.fake.requests("POST", r"/git/refs$") + world.fake.requests(
        "PATCH", r"/git/refs/"
    )
    assert [c.body["ref"] for c in ref_writes] == [f"refs/heads/{BRANCH}"]
    # Each write of the fixes had a token minted for it alone, revoked after it.
    writes = [
        c for c in world.fake.requests()
        if c.method in ("POST", "PATCH") and ("/git/" in c.path or "/pulls" in c.path)
        and not c.path.endswith("/reviews")
    ]  # fmt: skip
    assert len(writes) >= 4 and len({c.token for c in writes}) == len(writes)
    assert {c.token for c in writes} <= set(world.fake.revoked_tokens)
    # Linked from the review's summary.
    [body] = review_bodies(world)
    assert f"[#{pull.number}](" in body and "2 suggestions are proposed as one commit" in body
    row = FixProposal.objects.get()
    assert (row.status, row.number, row.state, len(row.applied)) == ("sent", pull.number, "open", 2)
    assert "- `app/util.py` line 1: `json` imported but unused" in pull.body


def test_a_later_review_with_one_fix_left_updates_the_same_pull_request(world, deliver):
    opted_in(world)
    deliver(world)
    [first] = fix_pulls(world)
    new_head = world.push({"app/util.py": "def name(x):\n    return x.name\n"}, "drop json")
    deliver(world, action="synchronize", before=world.head)

    assert fix_pulls(world) == [first]  # the same pull request, not a second
    assert len(world.fake.requests("POST", r"/repos/acme/shop/pulls$")) == 1
    assert first.state == "open"
    tip = branch_tip(world)
    assert parents(world, tip) == [new_head]
    files = world.fake.fix_branch_files(REPO, f"refs/heads/{BRANCH}")
    assert files["app/util.py"] == "def name(x):\n    return x.name\n"  # the author's fix
    assert files["app/tidy.py"].startswith("import sys\n")  # the fix still to make
    assert "app/util.py" not in first.body and "`app/tidy.py` line 1" in first.body
    assert [a["path"] for a in FixProposal.objects.get().applied] == ["app/tidy.py"]


def test_a_pull_request_with_nothing_left_to_fix_has_its_fixes_pull_request_closed(world, deliver):
    opted_in(world)
    deliver(world)
    [pull] = fix_pulls(world)
    world.push({"app/util.py": "def name(x):\n    return x.name\n",
                "app/tidy.py": "import sys\n\n\ndef main():\n    print(sys.argv)\n"})  # fmt: skip
    deliver(world, action="synchronize", before=world.head)

    assert pull.state == "closed"
    assert "no one-click fix is left open" in pull.body
    assert branch_tip(world) is None  # Tasuku's branch is deleted
    row = FixProposal.objects.get()
    assert (row.status, row.state, row.applied) == ("sent", "closed", [])


def test_a_merged_pull_request_has_its_fixes_pull_request_closed(world, deliver, client, test_app):
    opted_in(world)
    deliver(world)
    [pull] = fix_pulls(world)
    world.pull.state, world.pull.merged = "closed", True
    body = pull_request_payload(world.fake, world.repo, world.pull, action="closed")
    assert (
        post_webhook(client, "pull_request", body, secret=test_app.webhook_secret).status_code
        == 202
    )
    drain_queue()

    assert pull.state == "closed" and "#7 was merged" in pull.body
    assert branch_tip(world) is None


def test_a_fork_pull_request_gets_no_branch_and_its_summary_says_why(fake_github, deliver):
    world = world_build(fake_github, head_files=HEAD)
    head = world.git.commit(HEAD, parent=world.base, message="from the fork")
    world.repo.commits.add(head)
    world.pull.head_sha, world.head = head, head
    world.pull.head_ref, world.pull.head_repo = "patch-1", "mallory/shop"
    opted_in(world)
    deliver(world)

    assert PullRequest.objects.get().from_fork
    assert Finding.objects.filter(suggestion_applies=True).count() == 2
    [body] = review_bodies(world)
    assert FORK_NOTE in body
    assert not fix_pulls(world) and branch_tip(world) is None
    assert not fake_github.requests("POST", r"/git/") and not FixProposal.objects.exists()


def test_a_repository_that_did_not_opt_in_gets_no_branch_and_no_word_of_one(world, deliver):
    opted_in(world, on=False)
    deliver(world)

    assert Finding.objects.filter(suggestion_applies=True).count() == 2
    assert not fix_pulls(world) and branch_tip(world) is None
    assert not world.fake.requests("POST", r"/git/") and not FixProposal.objects.exists()
    assert "One-click fixes" not in review_bodies(world)[0]


def test_a_head_that_moved_before_the_fixes_were_sent_gets_the_fixes_that_still_apply(
    world, deliver
):
    """A push after the review, before its fixes went out (no review of it yet): the fix
    of the file the push changed is left out, said so; the other is made over the new head."""
    opted_in(world)
    run = deliver(world)
    FixProposal.objects.all().delete()
    world.fake.repos[REPO].pulls.pop(8)
    world.git.git("update-ref", "-d", f"refs/heads/{BRANCH}")
    new_head = world.push(
        {"app/util.py": "# utilities\nimport json\n\n\ndef name(x):\n    return x.name\n"}
    )

    fixes_request(run.pull_request, review=Review.objects.get(run=run))
    assert fixes_send(FixProposal.objects.get().pk) == "sent"

    tip = branch_tip(world)
    assert parents(world, tip) == [new_head]
    files = world.fake.fix_branch_files(REPO, f"refs/heads/{BRANCH}")
    assert files["app/tidy.py"].startswith("import sys\n")
    assert files["app/util.py"].startswith("# utilities\nimport json\n")  # untouched
    row = FixProposal.objects.get()
    assert [a["path"] for a in row.left_out] == ["app/util.py"]
    assert "changed since the review" in row.left_out[0]["why"]
    [pull] = fix_pulls(world)
    assert "**Left out**" in pull.body and "changed since the review" in pull.body


def test_a_refused_pull_request_is_recorded_and_nothing_is_lost(world, deliver):
    opted_in(world)
    world.fake.inject(
        1,
        status=422,
        method="POST",
        path=r"/repos/acme/shop/pulls$",
        body={
            "message": "Validation Failed",
            "documentation_url": "https://docs.github.com/rest",
            "status": "422",
            "errors": [
                {
                    "resource": "PullRequest",
                    "code": "custom",
                    "message": "Repository rule violations found",
                }
            ],
        },  # fmt: skip
    )
    run = deliver(world)

    row = FixProposal.objects.get()
    assert row.status == "failed"
    assert "GitHub refused the fixes pull request" in row.error and "422" in row.error
    assert not fix_pulls(world)
    # The review stands, its findings and their suggestions kept; the next request
    # (a later review, or by hand) proposes them.
    assert Review.objects.get(run=run).github_review_id
    assert Finding.objects.filter(suggestion_applies=True).count() == 2
    fixes_request(run.pull_request)
    drain_queue()
    row.refresh_from_db()
    assert (row.status, row.error) == ("sent", "")
    [pull] = fix_pulls(world)
    assert len(FixProposal.objects.get().applied) == 2


def test_github_unavailable_defers_the_fixes_instead_of_failing_them(world, deliver, settings):
    opted_in(world)
    world.fake.inject(20, status=502, method="POST", path=r"/git/trees$")
    deliver(world)

    row = FixProposal.objects.get()
    assert row.status == "due" and row.deferrals == 1 and "waits for GitHub" in row.error
    assert not fix_pulls(world)
    world.fake.injections.clear()
    FixProposal.objects.filter(pk=row.pk).update(next_attempt_at=None)
    assert fixes_send(row.pk) == "sent"
    assert len(fix_pulls(world)) == 1


def test_an_installation_without_contents_write_is_told_which_permission_is_missing(world, deliver):
    world.fake.installations[world.repo.installation_id].permissions["contents"] = "read"
    opted_in(world)
    deliver(world)

    row = FixProposal.objects.get()
    assert row.status == "failed" and "Contents: Read and write" in row.error
    assert not world.fake.requests("POST", r"/git/") and branch_tip(world) is None


def test_a_branch_of_that_name_left_from_before_is_moved_not_refused(world, deliver):
    """Tasuku's branch exists (a create whose answer was lost, a row since deleted): it is
    Tasuku's, moved by force to the new commit."""
    opted_in(world)
    world.git.commit({"stale.txt": "old\n"}, parent=world.base, branch=BRANCH)
    deliver(world)

    tip = branch_tip(world)
    assert parents(world, tip) == [world.head]
    assert "stale.txt" not in world.fake.fix_branch_files(REPO, f"refs/heads/{BRANCH}")
    assert len(fix_pulls(world)) == 1


# --- applying suggestions (pure) ----------------------------------------------------------


def test_fixes_replace_whole_lines_from_the_bottom_up():
    text = "a\nb\nc\nd\n"
    patched = fixes_apply(text, [LineFix("x", 1, 1, "A"), LineFix("y", 3, 4, "C\nD2\nE\n")])
    assert patched.text == "A\nb\nC\nD2\nE\n"
    assert [f.key for f in patched.applied] == ["x", "y"]


def test_an_empty_suggestion_deletes_its_lines_and_line_endings_are_kept():
    assert fixes_apply("a\r\nb\r\nc\r\n", [LineFix("x", 2, 2, "")]).text == "a\r\nc\r\n"
    assert fixes_apply("a\r\nb\r\n", [LineFix("x", 2, 2, "B")]).text == "a\r\nB\r\n"
    assert fixes_apply("a\nb", [LineFix("x", 2, 2, "B")]).text == "a\nB"  # no final newline


def test_overlapping_and_out_of_range_fixes_are_left_out_with_why():
    patched = fixes_apply(
        "a\nb\nc\n", [LineFix("x", 1, 2, "AB"), LineFix("y", 2, 2, "B"), LineFix("z", 9, 9, "Z")]
    )
    assert patched.text == "AB\nc\n"
    why = dict((f.key, w) for f, w in patched.left_out)
    assert "overlap" in why["y"] and "past the end" in why["z"]


def test_a_refused_proposal_is_shown_in_the_admin_and_sent_again_from_there(
    world, deliver, admin_client
):
    opted_in(world)
    world.fake.installations[world.repo.installation_id].permissions["contents"] = "read"
    deliver(world)
    row = FixProposal.objects.get()
    page = admin_client.get("/admin/reviews/fixproposal/")
    assert page.status_code == 200 and b"tasuku/fix/pr-7" in page.content

    world.fake.installations[world.repo.installation_id].permissions["contents"] = "write"
    from repos.github import caches_clear

    caches_clear()  # the App reads its installation's permissions afresh
    response = admin_client.post(
        "/admin/reviews/fixproposal/",
        {"action": "send_again", "_selected_action": [row.pk]},
    )
    assert response.status_code == 302
    drain_queue()
    row.refresh_from_db()
    assert row.status == "sent" and len(fix_pulls(world)) == 1


def test_a_fixes_pull_request_someone_closed_is_not_opened_again(world, deliver):
    opted_in(world)
    deliver(world)
    [pull] = fix_pulls(world)
    pull.state = "closed"  # a maintainer declined it
    world.push({"README.md": "# Shop\n\nSells widgets, now.\n"})
    deliver(world, action="synchronize", before=world.head)

    assert fix_pulls(world) == [pull] and pull.state == "closed"
    row = FixProposal.objects.get()
    assert row.state == "declined" and "without merging it" in row.outcome
    assert branch_tip(world) is None
    assert len(world.fake.requests("POST", r"/repos/acme/shop/pulls$")) == 1


def test_a_send_that_would_change_nothing_writes_nothing(world, deliver):
    opted_in(world)
    deliver(world)
    writes = len([c for c in world.fake.requests() if c.method in ("POST", "PATCH", "PUT")])
    row = FixProposal.objects.get()
    fixes_request(row.pull_request)
    assert fixes_send(row.pk) == "sent"
    row.refresh_from_db()
    assert row.outcome.startswith("up to date")
    assert len([c for c in world.fake.requests() if c.method in ("POST", "PATCH", "PUT")]) == writes


def test_when_no_suggestion_applies_to_the_new_head_nothing_is_proposed_and_the_summary_says_so(
    world, deliver
):
    opted_in(world)
    world.fake.inject(1, status=422, method="POST", path=r"/repos/acme/shop/pulls$")
    run = deliver(world)  # its pull request refused: nothing open yet
    world.push({"app/tidy.py": "# tidy\n" + TIDY, "app/util.py": "# util\n" + UTIL})
    fixes_request(run.pull_request, review=Review.objects.get(run=run))
    assert fixes_send(FixProposal.objects.get().pk) == "sent"

    assert not fix_pulls(world) and branch_tip(world) is None
    row = FixProposal.objects.get()
    assert len(row.left_out) == 2 and "nothing to propose" in row.outcome
    [body] = review_bodies(world)
    assert "**One-click fixes:** nothing is proposed" in body
    assert body.count("**One-click fixes:**") == 1


def test_a_review_without_one_click_suggestions_makes_no_job_and_no_call(fake_github, deliver):
    world = world_build(fake_github)  # its findings offer no one-click fix
    opted_in(world)
    deliver(world)
    assert Finding.objects.exists()
    assert not Finding.objects.filter(suggestion_applies=True).exists()
    assert not FixProposal.objects.exists() and not fake_github.requests(path=r"/git/")
    assert "One-click fixes" not in review_bodies(world)[0]


def test_a_suggestion_on_a_workflow_file_is_left_out_and_said_so(world, deliver):
    opted_in(world)
    run = deliver(world)
    model = Finding.objects.filter(review__run=run).first()
    model.pk, model.path, model.fingerprint = None, ".github/workflows/ci.yml", "wf" * 10
    model.suggestion = "    permissions: write-all"
    model.save()
    fixes_request(run.pull_request)
    assert fixes_send(FixProposal.objects.get().pk) == "sent"

    row = FixProposal.objects.get()
    assert [(a["path"], a["why"]) for a in row.left_out] == [
        (".github/workflows/ci.yml", "Tasuku does not change workflow files")
    ]
    assert ".github/workflows/ci.yml" not in world.fake.fix_branch_files(
        REPO, f"refs/heads/{BRANCH}"
    )
    assert len(row.applied) == 2


# --- attacks (s45-atk2) -------------------------------------------------------------------


def test_a_pull_request_whose_head_branch_is_named_like_tasukus_own_is_never_written(
    world, deliver
):
    """An author who names their branch `tasuku/fix/pr-7` before opening #7: Tasuku's
    branch would be the head branch itself, and moving it would push to the author's
    branch. No ref is written, no pull request opened, and the row says why."""
    world.git.git("update-ref", f"refs/heads/{BRANCH}", world.head)
    world.pull.head_ref = BRANCH
    opted_in(world)
    deliver(world)
    [body] = review_bodies(world)
    assert HEAD_NOTE in body and "proposed as one commit on Tasuku's branch" not in body
    assert not FixProposal.objects.exists()
    # The sender itself refuses too (a row asked for before, Send again in the admin).
    fixes_request(PullRequest.objects.get())
    drain_queue()

    assert branch_tip(world) == world.head  # the author's branch, untouched
    assert not world.fake.requests("POST", r"/git/") and not world.fake.requests(
        "PATCH", r"/git/refs/"
    )
    assert not [p for p in world.repo.pulls.values() if p.number != world.pull.number]
    row = FixProposal.objects.get()
    assert row.status == "sent" and "Tasuku's own" in row.outcome


def test_a_fixes_pull_request_of_a_fixes_pull_request_is_never_proposed(world, deliver):
    """#7's head is Tasuku's branch of another pull request's fixes (its fixes pull
    request, reviewed): no fixes of fixes, no branch `tasuku/fix/pr-7` into it."""
    world.git.git("update-ref", "refs/heads/tasuku/fix/pr-3", world.head)
    world.pull.head_ref = "tasuku/fix/pr-3"
    opted_in(world)
    deliver(world)

    assert branch_tip(world) is None
    assert not world.fake.requests("POST", r"/git/")
    assert [p.number for p in world.repo.pulls.values()] == [world.pull.number]


def test_a_deleted_fork_is_a_fork_even_when_the_row_does_not_say_so(world, deliver):
    """GitHub answers a deleted fork's head repository with null. A row that still says
    "not a fork" (written before Tasuku recorded forks) must not make Tasuku open a pull
    request into the base repository's branch of the fork's branch name."""
    opted_in(world)
    world.git.git("update-ref", "refs/heads/patch-1", world.base)  # the base's own branch
    world.pull.head_ref, world.pull.head_repo = "patch-1", None
    PullRequest.objects.all().delete()
    deliver(world)
    PullRequest.objects.update(from_fork=False, head_repository="")
    fixes_request(PullRequest.objects.get())
    drain_queue()

    assert branch_tip(world) is None
    assert [p.number for p in world.repo.pulls.values()] == [world.pull.number]
    assert "fork" in FixProposal.objects.get().outcome


def test_the_fixes_commit_message_carries_no_engine_text(world, deliver):
    """A finding's title is engine text: in a commit message `Closes #1` would close
    issue 1 once the commit reaches the default branch, and `Co-authored-by:` would
    credit anyone. The commit says how many fixes and where they are listed, no more."""
    opted_in(world)
    deliver(world)
    Finding.objects.update(title="Closes #1\n\nCo-authored-by: Mallory <m@evil.example>")
    FixProposal.objects.update(head_sha="", commit_sha="")
    fixes_request(PullRequest.objects.get())
    drain_queue()

    tip = branch_tip(world)
    message = world.git.git("log", "-1", "--format=%B", tip)
    assert "Closes" not in message and "Co-authored-by" not in message and "Mallory" not in message
    assert message.startswith("Apply 2 one-click fixes from Tasuku's review of #7")


def test_a_suggestion_that_would_break_the_python_file_is_left_out_and_said_so(world, deliver):
    """The gate checks where a suggestion goes, not what it makes: an engine's suggestion
    that leaves app/util.py unparsable is not committed; the other fix still is."""
    opted_in(world)
    deliver(world)
    Finding.objects.filter(path="app/util.py").update(suggestion="def broken(:\n")
    FixProposal.objects.update(head_sha="", commit_sha="")
    fixes_request(PullRequest.objects.get())
    drain_queue()

    files = world.fake.fix_branch_files(REPO, f"refs/heads/{BRANCH}")
    assert files["app/util.py"] == UTIL  # the head's, untouched
    assert files["app/tidy.py"].startswith("import sys\n")
    row = FixProposal.objects.get()
    assert [a["path"] for a in row.applied] == ["app/tidy.py"]
    [out] = row.left_out
    assert out["path"] == "app/util.py" and "no longer parse as Python" in out["why"]
    [pull] = fix_pulls(world)
    assert "no longer parse as Python" in pull.body


def test_a_branch_of_that_name_someone_elses_pull_request_comes_from_is_not_moved(
    fake_github, deliver
):
    """Someone pushed `tasuku/fix/pr-7` and opened #9 from it (into main). Moving it by
    force to #7's fixes would rewrite #9's branch: the fixes fail with why instead, and
    #9's branch stays where it was."""
    world = world_build(fake_github, head_files=HEAD)
    theirs = world.git.commit({"theirs.txt": "mine\n"}, parent=world.base, branch=BRANCH)
    from tests.fakes.github.state import Pull

    world.fake.add_pull(
        REPO, Pull(number=9, title="Mine", head_sha=theirs, base_sha=world.base, head_ref=BRANCH)
    )
    opted_in(world)
    deliver(world)

    assert branch_tip(world) == theirs
    row = FixProposal.objects.get()
    assert row.status == "failed" and "open pull request #9" in row.error
    assert not world.fake.requests("PATCH", r"/git/refs/")


def test_tasukus_own_pull_request_whose_record_was_lost_is_adopted_not_refused(world, deliver):
    """The branch and its pull request are there but the row forgot them (a sender that
    died before recording): that pull request is Tasuku's (into the head branch), so the
    branch is moved and the same pull request edited — not refused as someone else's."""
    opted_in(world)
    deliver(world)
    [pull] = fix_pulls(world)
    FixProposal.objects.update(number=None, url="", state="", commit_sha="", head_sha="")
    fixes_request(PullRequest.objects.get())
    drain_queue()

    row = FixProposal.objects.get()
    assert (row.status, row.number, row.error) == ("sent", pull.number, "")
    assert fix_pulls(world) == [pull] and pull.state == "open"


def test_a_fix_on_a_symlink_or_through_one_is_left_out_and_no_mode_changes(fake_github, deliver):
    """A finding whose path is a symlink at the head (`app/link.py` → /etc/passwd), or
    reaches a file through a symlinked directory (`app/dir/util.py`, `app/dir` → `.`):
    left out, not written; the one file Tasuku writes keeps its mode (100644)."""
    world = world_build(
        fake_github,
        head_files={**HEAD, "app/link.py": Symlink("/etc/passwd"), "app/dir": Symlink(".")},
    )
    opted_in(world)
    deliver(world)
    Finding.objects.filter(path="app/util.py").update(path="app/link.py")
    tidy = Finding.objects.get(path="app/tidy.py")
    tidy.pk, tidy.fingerprint, tidy.path = None, "through-dir", "app/dir/util.py"
    tidy.save()
    FixProposal.objects.update(head_sha="", commit_sha="")
    fixes_request(PullRequest.objects.get())
    drain_queue()

    row = FixProposal.objects.get()
    assert [a["path"] for a in row.applied] == ["app/tidy.py"]
    assert sorted(o["path"] for o in row.left_out) == ["app/dir/util.py", "app/link.py"]
    [tree_call] = world.fake.requests("POST", r"/git/trees$")[-1:]
    assert [(e["path"], e["mode"]) for e in tree_call.body["tree"]] == [("app/tidy.py", "100644")]
    tip = branch_tip(world)
    modes = world.git.git("ls-tree", "-r", tip).splitlines()
    assert any(line.startswith("120000") and line.endswith("app/link.py") for line in modes)

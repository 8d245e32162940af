"""Every word Tasuku says is true: no disk state, path, pragma, delivery order, reviewer
combination or command makes the check, the summary, a reply or an approval say more
than happened. Each case goes through the real webhook endpoint and the worker's tasks
against the fake GitHub."""

from __future__ import annotations

import contextlib
import subprocess
from datetime import timedelta

import pytest
from django.utils import timezone

from reviews.models import Review, ReviewRun, RunAttempt, RunStatus
from reviews.queue.runs import runs_reap
from tests.gitworld import PAYMENTS, REPO, world_build
from tests.helpers import drain_queue, post_webhook, pull_request_payload

pytestmark = pytest.mark.django_db

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

    return send


def last_check(world):
    return world.fake.check_runs_of(REPO)[-1]


def tasuku_reviews(world):
    return [r for r in world.fake.reviews_of(REPO, world.pull.number) if r["user"]["type"] == "Bot"]


def retry_now() -> None:
    """The run's backoff is over: the reaper rings it and a worker takes it."""
    past = timezone.now() - timedelta(seconds=1)
    ReviewRun.objects.filter(next_attempt_at__isnull=False).update(
        next_attempt_at=past, rung_at=past - timedelta(seconds=1)
    )
    runs_reap()
    drain_queue()


@contextlib.contextmanager
def small_disk(path, size: str):
    """A tmpfs of `size` mounted at `path` (the test is skipped where this process may
    not mount one)."""
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


# --- 1. A full disk is never a clean review ---------------------------------------------

BIG = "\0" * 600_000  # a binary file, larger than the small disk: nothing checks it


def test_a_full_workspace_disk_fails_the_checkout_instead_of_reviewing_what_was_written(
    fake_github, deliver, settings, tmp_path
):
    # The key sorts after the big file: git writes the big one first and fills the disk.
    world = world_build(fake_github, head_files={"app/a_big.bin": BIG, "app/payments.py": PAYMENTS})
    with small_disk(tmp_path / "disk", "512k") as disk:
        settings.TASUKU_WORKSPACE_ROOT = str(disk)
        deliver(world)
        run = ReviewRun.objects.get()
        assert run.status == RunStatus.QUEUED  # to be tried again, not reviewed
        attempt = RunAttempt.objects.get(run=run)
        assert attempt.error_code == "workspace-write", attempt.error
        assert attempt.stage == "clone"
        assert not Review.objects.exists()
        assert not tasuku_reviews(world)
        assert last_check(world).conclusion is None  # still under way: never success

    # The same head with room to check it out: reviewed, and the key fails it.
    settings.TASUKU_WORKSPACE_ROOT = str(tmp_path)
    retry_now()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, run.reason
    check = last_check(world)
    assert check.conclusion == "failure"
    assert KEY_TITLE in check.output["summary"]


# --- 4. The newest head always gets its review ------------------------------------------


def _events(world, pushes: int):
    """The pull request opened, then `pushes` pushes: each event's payload as GitHub
    built it when it happened (its head then), and the heads oldest first."""
    import dataclasses

    heads = [world.pull.head_sha]
    events = [("opened", dataclasses.replace(world.pull), {})]
    for n in range(pushes):
        before = world.pull.head_sha
        world.push({"app/payments.py": PAYMENTS.replace("refund", f"refund{n}")}, message=f"p{n}")
        heads.append(world.pull.head_sha)
        events.append(("synchronize", dataclasses.replace(world.pull), {"before": before}))
    return events, heads


def _every_order(count: int):
    import itertools

    return list(itertools.permutations(range(count)))


@pytest.mark.parametrize("worker", ["busy", "idle"])
@pytest.mark.parametrize("order", _every_order(3) + _every_order(4), ids=str)
def test_every_delivery_order_ends_with_the_newest_head_reviewed(
    fake_github, client, test_app, order, worker
):
    """Two and three pushes after the opening, their deliveries in every order; the
    worker takes each as it comes (idle) or all of them after the last (busy)."""
    from reviews.models import PullRequest

    world = world_build(fake_github)
    events, heads = _events(world, len(order) - 1)
    newest = heads[-1]
    seen_newest = False
    for index in order:
        action, pull, extra = events[index]
        body = pull_request_payload(world.fake, world.repo, pull, action=action, **extra)
        response = post_webhook(client, "pull_request", body, secret=test_app.webhook_secret)
        assert response.status_code == 202
        if worker == "idle":
            drain_queue()
        known = PullRequest.objects.values_list("head_sha", flat=True).first()
        # Once the newest head is on record, no late delivery takes it back.
        assert not (seen_newest and known != newest), (order, known)
        seen_newest = seen_newest or known == newest
    drain_queue()

    assert PullRequest.objects.get().head_sha == newest
    # The newest head's run was never cancelled, by any delivery.
    assert not ReviewRun.objects.filter(head_sha=newest, status=RunStatus.CANCELLED)
    reviewed = ReviewRun.objects.filter(head_sha=newest, status=RunStatus.COMPLETED)
    assert reviewed.count() == 1 and Review.objects.filter(run__in=reviewed).exists()
    checks = [c for c in world.fake.check_runs_of(REPO) if c.head_sha == newest]
    assert checks[-1].conclusion == "failure"  # the key: reviewed, not superseded
    # Every superseded check names a newer commit than its own, never an older one.
    for check in world.fake.check_runs_of(REPO):
        title = (check.output or {}).get("title") or ""
        if title.startswith("Superseded by "):
            newer = next(h for h in heads if h.startswith(title.removeprefix("Superseded by ")))
            assert heads.index(newer) > heads.index(check.head_sha), (order, title)


def test_a_redelivered_old_event_supersedes_nothing(world, deliver, client, test_app):
    import dataclasses

    opened = dataclasses.replace(world.pull)
    deliver(world)
    before = world.pull.head_sha
    world.push({"app/payments.py": PAYMENTS + "\n# later\n"})
    deliver(world, "synchronize", before=before)
    runs = ReviewRun.objects.count()
    # GitHub (or Tasuku's own recovery) redelivers the opening event, hours late.
    body = pull_request_payload(world.fake, world.repo, opened, action="opened")
    assert (
        post_webhook(client, "pull_request", body, secret=test_app.webhook_secret).status_code
        == 202
    )
    drain_queue()
    assert ReviewRun.objects.count() == runs  # nothing new, nothing cancelled
    assert not ReviewRun.objects.filter(status=RunStatus.CANCELLED, head_sha=world.pull.head_sha)
    assert last_check(world).head_sha == world.pull.head_sha
    assert last_check(world).conclusion == "failure"


def test_a_run_that_finds_a_newer_head_with_no_run_makes_one_before_it_steps_aside(
    world, deliver, client, test_app
):
    deliver(world)
    before = world.pull.head_sha
    world.push({"app/payments.py": PAYMENTS + "\n# A\n"})
    body = pull_request_payload(world.fake, world.repo, world.pull, action="synchronize",
                                before=before)  # fmt: skip
    assert (
        post_webhook(client, "pull_request", body, secret=test_app.webhook_secret).status_code
        == 202
    )
    a = world.pull.head_sha
    # Pushed again before A's run starts, and that push's delivery never comes.
    world.push({"app/payments.py": PAYMENTS + "\n# B\n"})
    b = world.pull.head_sha
    drain_queue()

    a_run = ReviewRun.objects.get(head_sha=a)
    assert (a_run.status, a_run.superseded_by) == (RunStatus.CANCELLED, b)
    [a_check] = [c for c in world.fake.check_runs_of(REPO) if c.head_sha == a]
    assert a_check.output["title"] == f"Superseded by {b[:7]}"
    assert "the newer commit is reviewed instead" in a_check.output["summary"]
    b_run = ReviewRun.objects.get(head_sha=b)
    assert b_run.status == RunStatus.COMPLETED
    assert last_check(world).head_sha == b and last_check(world).conclusion == "failure"


# --- 5. An approval stands for every reviewer -------------------------------------------

CLEAN_HEAD = {"app/payments.py": "def refund(order_id):\n    return order_id\n"}


@pytest.fixture
def two_reviewers(settings, fake_anthropic):
    """`static` and a model reviewer on the repository, auto-approval on; the model
    reviewer's name sorts before `static` or after it (who runs first)."""
    from repos.models import Reviewer
    from tests.fakes.models import ANTHROPIC_TEST_KEY

    settings.ANTHROPIC_BASE_URL = fake_anthropic.base_url
    settings.ANTHROPIC_API_KEY = ANTHROPIC_TEST_KEY

    def make(slug):
        Reviewer.objects.create(
            slug=slug, engine="anthropic", model="claude-sonnet-5-5",
            default_for_new_repositories=True,
        )  # fmt: skip
        return fake_anthropic

    return make


def _auto_approve():
    from repos.models import Repository

    policy = Repository.objects.get(full_name=REPO).policy
    policy.auto_approve = True
    policy.save()


def _clean_model_review(model):
    from tests.fakes.models import ToolCall

    model.script(ToolCall("submit_review", {"findings": []}))


@pytest.mark.parametrize("model_slug", ["aaa-claude", "zzz-claude"])
def test_a_clean_reviewer_never_approves_over_another_reviewers_open_findings(
    fake_github, deliver, two_reviewers, model_slug
):
    model = two_reviewers(model_slug)
    world = world_build(fake_github)
    deliver(world, "opened")  # the repository is learnt; its policy made
    _auto_approve()
    previous = world.pull.head_sha
    world.push({"README.md": "# Shop\n\nMore.\n"})
    for _ in range(2):
        _clean_model_review(model)
    deliver(world, "synchronize", before=previous)

    assert not [r for r in tasuku_reviews(world) if r["state"] == "APPROVED"]
    model_run = ReviewRun.objects.filter(reviewer__slug=model_slug).latest("pk")
    notes = " ".join(Review.objects.get(run=model_run).notes)
    assert "not approved: static" in notes, notes
    static_checks = [c for c in world.fake.check_runs_of(REPO) if c.name == "Tasuku · static"]
    assert static_checks[-1].conclusion == "failure"


@pytest.mark.parametrize("model_slug", ["aaa-claude", "zzz-claude"])
def test_two_clean_reviewers_approve_once_and_a_later_finding_dismisses_it(
    fake_github, deliver, two_reviewers, model_slug
):
    model = two_reviewers(model_slug)
    world = world_build(fake_github, head_files=CLEAN_HEAD)
    _clean_model_review(model)
    deliver(world, "opened")
    _auto_approve()
    previous = world.pull.head_sha
    world.push(
        {
            "app/payments.py": CLEAN_HEAD["app/payments.py"]
            + "\n\ndef total(a, b):\n    return a + b\n"
        }
    )
    _clean_model_review(model)
    deliver(world, "synchronize", before=previous)
    approvals = [r for r in tasuku_reviews(world) if r["state"] == "APPROVED"]
    assert len(approvals) == 1 and approvals[0]["commit_id"] == world.pull.head_sha

    # A push with a key: the model reviewer finds nothing, static finds the key.
    previous = world.pull.head_sha
    world.push({"app/payments.py": PAYMENTS})
    _clean_model_review(model)
    deliver(world, "synchronize", before=previous)
    states = [r["state"] for r in tasuku_reviews(world)]
    assert "APPROVED" not in states and "DISMISSED" in states


# --- 2. A name is no hiding place; the safety checks read every added line --------------

KEY_LINE = 'AWS_ACCESS_KEY_ID = "AKIAZ2Q7WJ4KXN5BL3TP"\n'
SHELL_RUN = "import os\n\n\ndef run(cmd):\n    os.system('sh -c ' + cmd)\n"


def _open_rules(run):
    from reviews.models import Finding

    return sorted(Finding.objects.filter(review__run=run, state="open").values_list("path", "rule"))


def test_a_tree_the_base_vendors_stays_out_of_review_but_not_out_of_the_secret_checks(
    fake_github, deliver
):
    world = world_build(fake_github)
    # The base vendors a library already; the pull request adds a module to it.
    base = world.git.commit(
        {"vendor/helpers/__init__.py": ""}, parent=world.base, branch="main", message="vendor"
    )
    head = world.git.commit(
        {"vendor/helpers/run.py": KEY_LINE + SHELL_RUN}, parent=base, branch="feature"
    )
    world.pull.base_sha, world.pull.head_sha = base, head
    world.repo.commits.update({base, head})
    deliver(world)
    run = ReviewRun.objects.get()
    assert [tuple(f) for f in run.filtered] == [
        ("vendor/helpers/run.py", "vendored or dependency folder")
    ]
    # Its shell call is the vendored project's business; a committed key is everyone's.
    assert _open_rules(run) == [("vendor/helpers/run.py", "detect-secrets:AWS Access Key")]
    assert last_check(world).conclusion == "failure"


@pytest.mark.parametrize("glob", ["vendor/", "**/*.py"])
def test_a_path_the_admin_excluded_is_excluded_by_that_rule_and_still_checked_for_secrets(
    fake_github, deliver, glob
):
    from repos.models import Repository

    world = world_build(fake_github, head_files=CLEAN_HEAD)
    deliver(world)  # the repository is learnt
    policy = Repository.objects.get(full_name=REPO).policy
    policy.excluded_paths = glob  # one glob a line
    policy.save()
    previous = world.pull.head_sha
    world.push({"vendor/helpers/run.py": KEY_LINE + SHELL_RUN})
    deliver(world, "synchronize", before=previous)
    run = ReviewRun.objects.latest("pk")
    filtered = [tuple(f) for f in run.filtered]
    assert ("vendor/helpers/run.py", "excluded by the repository's policy") in filtered
    assert ("vendor/helpers/run.py", "detect-secrets:AWS Access Key") in _open_rules(run)
    assert not [r for _, r in _open_rules(run) if r.startswith("ruff:")]


# --- 3. A pull request's own suppression is no fix --------------------------------------

SILENCED = PAYMENTS.replace(
    '"AKIAZ2Q7WJ4KXN5BL3TP"', '"AKIAZ2Q7WJ4KXN5BL3TP"  # pragma: allowlist secret'
).replace("shell=True)", "shell=True)  # noqa: S602")
# (the copy line rewritten too: an incremental review re-examines the lines it changes)
DEPLOY_SILENCED = "#!/bin/bash\nset -e\n# shellcheck disable=SC2115\nrm -rf $TARGET_DIR/ \n"


def _silence(world, deliver):
    previous = world.pull.head_sha
    world.push({"app/payments.py": SILENCED, "deploy.sh": DEPLOY_SILENCED}, message="quiet")
    deliver(world, "synchronize", before=previous)
    return ReviewRun.objects.latest("pk")


def _our_threads(world):
    return [
        t for t in world.fake.threads_of(REPO, world.pull.number)
        if t["comments"][0]["user"]["type"] == "Bot"
    ]  # fmt: skip


def test_a_pull_requests_own_pragmas_leave_its_findings_open_and_say_so(world, deliver):
    from reviews.models import Finding

    deliver(world)
    assert last_check(world).conclusion == "failure"
    run = _silence(world, deliver)

    check = last_check(world)
    assert check.conclusion == "failure", check.output
    still = {f.rule: f for f in Finding.objects.filter(review__run=run, state="open")}
    assert "`# noqa: S602` on line 8" in still["ruff:S602"].suppressed_in_pr
    assert "pragma: allowlist secret" in still["detect-secrets:AWS Access Key"].suppressed_in_pr
    assert "shellcheck disable=SC2115" in still["shellcheck:SC2115"].suppressed_in_pr
    assert "(suppressed in this pull request by" in check.output["summary"]
    for thread in _our_threads(world):
        said = [c["body"] for c in thread["comments"][1:]]
        assert not thread["isResolved"], said
        assert not any("Verified fixed" in b for b in said), said
        assert any(b.startswith("Still open in") and "suppressed in this pull request" in b
                   for b in said), said  # fmt: skip


def test_a_repository_may_honour_a_pull_requests_own_suppressions(world, deliver):
    from repos.models import Repository
    from reviews.models import Finding

    deliver(world)
    policy = Repository.objects.get(full_name=REPO).policy
    policy.honour_pr_suppressions = True
    policy.save()
    run = _silence(world, deliver)

    assert not Finding.objects.filter(review__run=run, state="open").exists()
    reasons = Finding.objects.filter(review__run=run, state="suppressed").values_list(
        "suppression_reason", flat=True
    )
    assert all("suppressed in this pull request by" in r for r in reasons), list(reasons)
    assert last_check(world).conclusion == "success"
    for thread in _our_threads(world):
        said = [c["body"] for c in thread["comments"][1:]]
        assert thread["isResolved"] and any(b.startswith("Suppressed in") for b in said)
        assert not any("Verified fixed" in b for b in said)


def test_a_suppression_the_base_already_has_is_honoured(fake_github, deliver):
    from reviews.models import Finding

    world = world_build(fake_github)
    base = world.git.commit({"app/tool.py": "import os\nos.system('ls')  # noqa: S605\n"},
                            parent=world.base, branch="main")  # fmt: skip
    # The pull request rewrites the line and keeps the base's pragma.
    head = world.git.commit({"app/tool.py": "import os\nos.system('ls -l')  # noqa: S605\n"},
                            parent=base, branch="feature")  # fmt: skip
    world.pull.base_sha, world.pull.head_sha = base, head
    world.repo.commits.update({base, head})
    deliver(world)
    [finding] = Finding.objects.filter(path="app/tool.py", rule="ruff:S605")
    assert finding.state == "suppressed"
    assert "as in the base branch" in finding.suppression_reason
    assert last_check(world).conclusion == "success"


# --- 6. Languages nobody linted are said out loud: the coverage ledger ------------------

GO_MAIN = (
    'package main\n\nimport "os/exec"\n\nfunc main() {\n\texec.Command("sh", "-c", "ls").Run()\n}\n'
)


BROKEN_SCRIPT = '#!/bin/bash\nset -e\nif [ -n "$X" ]; then\n  echo ok\n'  # no `fi`


@pytest.mark.parametrize(
    ("base", "files", "language"),
    [
        ({}, {"infra/main.tf": 'resource "null_resource" "refund" {}\n'}, "Terraform"),
        ({}, {"cmd/main.go": GO_MAIN}, "Go"),
        # The script already does not parse; the change touches another line of it.
        ({"deploy/run.sh": BROKEN_SCRIPT},
         {"deploy/run.sh": BROKEN_SCRIPT.replace("set -e", "set -eu")},
         "shellcheck could not parse it"),
    ],
    ids=["terraform", "go", "unparseable shell"],
)  # fmt: skip
def test_a_change_no_checker_could_read_is_neutral_and_named_never_no_problems_found(
    fake_github, deliver, base, files, language
):
    world = world_build(fake_github, head_files=files)
    if base:
        start = world.git.commit(base, parent=world.base, branch="main")
        head = world.git.commit(files, parent=start, branch="feature")
        world.pull.base_sha, world.pull.head_sha = start, head
        world.repo.commits.update({start, head})
    deliver(world)
    [path] = files
    check = last_check(world)
    assert check.conclusion == "neutral", check.output
    assert check.output["title"].startswith(
        "No problems found in what was reviewed · 1 file not reviewed"
    )
    assert check.output["title"] != "No problems found"
    assert path in check.output["summary"] and language in check.output["summary"]
    [review] = tasuku_reviews(world)
    assert "no problems found in the changed lines" not in review["body"]
    assert "**1 changed file was not reviewed**" in review["body"]
    stored = Review.objects.get().coverage
    [entry] = [e for e in stored if e["path"] == path]
    assert entry["status"] == "not reviewed" and language in entry["reason"]
    # The secret checks read it all the same.
    assert "detect-secrets" in entry["by"]


def test_every_changed_file_is_in_the_ledger_with_what_read_it(fake_github, deliver):
    world = world_build(fake_github, head_files={
        "app/payments.py": "def refund(order_id):\n    return order_id\n",
        "README.md": "# Shop\n\nMore.\n", "web/package-lock.json": "{}\n",
    })  # fmt: skip
    deliver(world)
    ledger = {e["path"]: e for e in Review.objects.get().coverage}
    assert ledger["app/payments.py"]["status"] == "reviewed"
    assert ledger["app/payments.py"]["by"] == ["ruff", "detect-secrets", "hygiene"]
    assert ledger["README.md"]["status"] == "reviewed"
    assert ledger["web/package-lock.json"]["status"] == "excluded"
    assert ledger["web/package-lock.json"]["reason"] == "lock file"
    assert last_check(world).conclusion == "success"
    assert last_check(world).output["title"] == "No problems found"
    assert (
        "**Coverage:** 2 reviewed, 1 excluded by a rule, 0 not reviewed"
        in last_check(world).output["summary"]
    )


def test_a_finding_whose_file_its_checker_no_longer_reads_is_not_verified_fixed(world, deliver):
    """A push that makes the file unreadable to its checker (too large, say) is no fix:
    the finding stays open, and its thread is not told "Verified fixed"."""
    from reviews.models import Finding
    from sandbox.engines.static.common import MAX_FILE_BYTES

    deliver(world)
    previous = world.pull.head_sha
    padding = ("# " + "x" * 98 + "\n") * (MAX_FILE_BYTES // 100 + 1_000)
    world.push({"app/payments.py": PAYMENTS.replace("subprocess.call(cmd, shell=True)",
                                                    "subprocess.call(cmd, shell=True)  # x") + padding})  # fmt: skip
    deliver(world, "synchronize", before=previous)
    run = ReviewRun.objects.latest("pk")
    shell = Finding.objects.get(review__run=run, rule="ruff:S602")
    assert shell.state == "open"
    check = last_check(world)
    assert check.conclusion == "failure"
    said = [
        c["body"] for t in world.fake.threads_of(REPO, world.pull.number) for c in t["comments"]
    ]
    assert not any("Verified fixed" in b for b in said)


def test_the_run_page_shows_the_ledger(fake_github, deliver, staff_client):
    world = world_build(fake_github, head_files={"cmd/main.go": GO_MAIN, "app/a.py": "X = 1\n"})
    deliver(world)
    page = staff_client.get(f"/runs/{ReviewRun.objects.get().pk}/").content.decode()
    assert "<h2>Coverage" in page
    assert "<code>cmd/main.go</code>" in page and "no checker for Go" in page
    assert "ruff, detect-secrets, hygiene" in page


@pytest.mark.parametrize(
    "path",
    ["vendor/helpers/run.py", "app/payments.generated.py", "fixtures/setup.py", "dist/app.js",
     "web/yarn.lock", "__snapshots__/app.snap", "static/app.min.js", "app/migrations/0002_keys.py"],
)  # fmt: skip
def test_a_key_the_pull_request_adds_under_any_default_family_fails_the_check(
    fake_github, deliver, path
):
    world = world_build(fake_github, head_files={path: KEY_LINE, "package.json": "{}\n"})
    deliver(world)
    check = last_check(world)
    assert check.conclusion == "failure", (path, check.output)
    assert KEY_TITLE in check.output["summary"]


def test_the_walkthrough_names_what_the_reviewer_did_not_review(fake_github, deliver):
    world = world_build(fake_github, head_files={"cmd/main.go": GO_MAIN})
    deliver(world)
    [walkthrough] = [
        c for c in world.fake.issue_comments_of(REPO, world.pull.number)
        if c["user"]["type"] == "Bot"
    ]  # fmt: skip
    assert "**Not reviewed**: `cmd/main.go` (no checker for Go" in walkthrough["body"]


def test_a_push_github_does_not_show_yet_is_waited_for_not_superseded_by_its_parent(
    world, deliver, client, test_app
):
    """GitHub's API can name the previous head for a few seconds after the push whose
    webhook Tasuku already has: the run waits and asks again; it never makes a run for
    the older commit, nor says it was superseded by it."""
    deliver(world)
    parent = world.pull.head_sha
    world.push({"app/payments.py": PAYMENTS + "\n# pushed\n"})
    pushed = world.pull.head_sha
    body = pull_request_payload(world.fake, world.repo, world.pull, action="synchronize",
                                before=parent)  # fmt: skip
    world.pull.head_sha = parent  # GitHub's API lags behind its own webhook
    assert (
        post_webhook(client, "pull_request", body, secret=test_app.webhook_secret).status_code
        == 202
    )
    drain_queue()
    run = ReviewRun.objects.get(head_sha=pushed)
    assert run.status == RunStatus.QUEUED and "lags behind the push" in run.reason
    assert ReviewRun.objects.filter(head_sha=parent).count() == 1  # the first review's only
    assert not any(
        (c.output or {}).get("title", "").startswith("Superseded")
        for c in world.fake.check_runs_of(REPO)
    )

    world.pull.head_sha = pushed  # GitHub catches up
    retry_now()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert last_check(world).head_sha == pushed and last_check(world).conclusion == "failure"


def test_a_pull_request_cannot_silence_its_own_checks_by_editing_the_linters_configuration(
    fake_github, deliver
):
    """The base branch's ruff configuration is the repository's word: its ignores are
    honoured, and the pull request's edit of the file changes nothing — said in the
    review's limitations."""
    from reviews.models import Finding

    world = world_build(fake_github, head_files=CLEAN_HEAD)
    base = world.git.commit(
        {"pyproject.toml": '[tool.ruff.lint]\nignore = ["F841"]\n'},
        parent=world.base, branch="main", message="lint config",
    )  # fmt: skip
    head = world.git.commit(
        {"pyproject.toml": '[tool.ruff.lint]\nignore = ["F841", "S602"]\n',
         "app/tool.py": "import subprocess\n\n\ndef run(cmd):\n    unused = 1\n"
                        "    return subprocess.call(cmd, shell=True)\n"},
        parent=base, branch="feature",
    )  # fmt: skip
    world.pull.base_sha, world.pull.head_sha = base, head
    world.repo.commits.update({base, head})
    deliver(world)
    rules = set(Finding.objects.filter(state="open").values_list("rule", flat=True))
    assert "ruff:S602" in rules  # the pull request's own ignore does not count
    assert "ruff:F841" not in rules  # the base's does
    review = Review.objects.get()
    assert any("changes the linters' configuration" in text for text in review.limitations)

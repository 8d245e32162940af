"""The gateway's GitHub Actions calls (workflow_dispatch, workflows, runs) against the
fake GitHub server."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from repos import github
from repos.github import GitHubError, RepoRef
from repos.github.actions import look_schedule
from tests.fakes.github.actions import workflow_yaml

REPO = "acme/widgets"
WHERE = RepoRef(installation_id=11, repository_id=501, full_name=REPO)
DISPATCHES = r"/actions/workflows/[^/]+/dispatches$"


@pytest.fixture(autouse=True)
def quick_looks(settings):
    """A dispatched run is looked for over 1 s (from 0.025 s, doubling), not 20 s."""
    settings.TASUKU_ACTIONS_FIND_SECONDS = 1.0


@pytest.fixture
def world(fake_github):
    fake_github.add_installation(11, "acme")
    repo, git = fake_github.add_git_repo(REPO, installation_id=11, repo_id=501)
    git.commit({"README.md": "# Widgets\n"}, message="base", branch="main")
    fake_github.add_workflow(REPO)
    return repo


def dispatch(**overrides):
    params = dict(
        workflow="tasuku.yml",
        ref="main",
        inputs={"tasuku_run_id": "77"},
        run_name="Tasuku run 77",
    )
    params.update(overrides)
    return github.gateway().workflow_dispatch(WHERE, **params)


def refusal(**overrides) -> GitHubError:
    with pytest.raises(GitHubError) as caught:
        dispatch(**overrides)
    return caught.value


def main_sha(fake_github) -> str:
    return fake_github._resolve_ref(fake_github.repos[REPO], "main")[1]


# --- dispatching ---


def test_it_starts_the_workflow_on_the_branch_and_returns_the_run(world, fake_github):
    started = dispatch()
    [run] = fake_github.actions_runs_of(REPO)
    assert started.workflow_run_id == run.id
    assert started.run_url == f"{fake_github.url}/repos/{REPO}/actions/runs/{run.id}"
    assert started.html_url == f"{fake_github.url}/{REPO}/actions/runs/{run.id}"
    assert (run.path, run.ref, run.head_sha, run.inputs) == (
        ".github/workflows/tasuku.yml",
        "refs/heads/main",
        main_sha(fake_github),
        {"tasuku_run_id": "77"},
    )
    assert (run.status, run.run_attempt, run.display_title) == ("queued", 1, "Tasuku run 77")
    [post] = fake_github.requests("POST", DISPATCHES)
    assert post.body == {
        "ref": "main",
        "inputs": {"tasuku_run_id": "77"},
        "return_run_details": True,
    }


def test_the_token_is_scoped_to_the_repository_and_actions_write(world, fake_github):
    dispatch()
    [mint] = fake_github.requests("POST", "/access_tokens")
    assert mint.body == {"repository_ids": [501], "permissions": {"actions": "write"}}


def test_a_workflow_path_or_file_name_both_work(world, fake_github):
    dispatch(workflow=".github/workflows/tasuku.yml")
    dispatch(workflow="tasuku.yml", inputs={"tasuku_run_id": "78"}, run_name="Tasuku run 78")
    assert [r.inputs["tasuku_run_id"] for r in fake_github.actions_runs_of(REPO)] == ["77", "78"]
    assert {c.path for c in fake_github.requests("POST", DISPATCHES)} == {
        f"/repos/{REPO}/actions/workflows/tasuku.yml/dispatches"
    }


# --- refusals that name their fix ---


def test_a_repository_without_the_workflow_is_told_to_add_it(world, fake_github):
    fake_github.remove_workflow(REPO)
    error = refusal()
    assert (error.permanent, error.status) == (True, 404)
    assert error.message == (
        "Could not start the workflow .github/workflows/tasuku.yml in acme/widgets: GitHub "
        "has no such workflow on the default branch (main) — add Tasuku's workflow file there."
    )
    assert fake_github.actions_runs_of(REPO) == []


def test_a_workflow_without_a_dispatch_trigger_is_told_to_add_one(world, fake_github):
    fake_github.add_workflow(REPO, on_dispatch=False)
    error = refusal()
    assert (error.permanent, error.status) == (True, 422)
    assert "has no `workflow_dispatch` trigger on main" in error.message
    assert "add `on: workflow_dispatch` with the inputs Tasuku sends (tasuku_run_id)" in (
        error.message
    )


def test_an_unknown_branch_is_reported(world):
    error = refusal(ref="trunk")
    assert (error.permanent, error.status) == (True, 422)
    assert "GitHub found no branch trunk — the default branch may have been renamed" in (
        error.message
    )


def test_inputs_the_workflow_does_not_declare_are_named(world):
    error = refusal(inputs={"tasuku_run_id": "77", "nonce": "x"})
    assert error.permanent
    assert 'does not declare every input Tasuku sends (Unexpected inputs provided: ["nonce"])' in (
        error.message
    )
    assert "declare nonce, tasuku_run_id under `on.workflow_dispatch.inputs`" in error.message


def test_a_required_input_tasuku_does_not_send_is_named(world, fake_github):
    fake_github.add_workflow(REPO, inputs=["tasuku_run_id", "environment"])
    error = refusal()
    assert error.permanent
    assert "requires an input Tasuku does not send (Required input 'environment' not provided)" in (
        error.message
    )


def test_a_disabled_workflow_is_reported(world, fake_github):
    fake_github.disable_workflow(REPO)
    error = refusal()
    assert error.permanent
    assert "the workflow is disabled — enable it in the repository's Actions tab" in (error.message)


def test_an_app_without_actions_write_is_told_to_ask_for_it(world, fake_github):
    fake_github.installations[11].permissions["actions"] = "read"
    error = refusal()
    assert (error.permanent, error.status) == (True, 422)  # GitHub mints no such token
    assert error.message.endswith(
        "the App may not run workflows there — give it the Actions permission (read and "
        "write) and accept the new permission on the installation."
    )
    assert fake_github.requests("POST", DISPATCHES) == []


def test_a_403_from_the_dispatch_itself_gets_the_same_advice(world, fake_github):
    fake_github.inject(
        1,
        status=403,
        method="POST",
        path=DISPATCHES,
        body={"message": "Resource not accessible by integration", "status": "403"},
    )
    error = refusal()
    assert (error.permanent, error.status) == (True, 403)
    assert "give it the Actions permission" in error.message
    assert len(fake_github.requests("POST", DISPATCHES)) == 1


def test_more_than_25_inputs_are_refused_before_asking_github(world, fake_github):
    inputs = {f"input{i}": "x" for i in range(26)}
    error = refusal(inputs=inputs)
    assert error.permanent
    assert error.message.endswith("26 inputs, but GitHub accepts at most 25.")
    assert fake_github.requests("POST", DISPATCHES) == []


# --- retries without a second run ---


def test_a_502_before_github_acted_is_retried_and_starts_one_run(world, fake_github):
    fake_github.inject(1, status=502, method="POST", path=DISPATCHES)
    started = dispatch()
    [run] = fake_github.actions_runs_of(REPO)
    assert started.workflow_run_id == run.id
    assert [c.status for c in fake_github.requests("POST", DISPATCHES)] == [502, 200]
    # it looked for a run the first try might have started (for as long as GitHub takes
    # to create one), and found none
    looks = fake_github.requests("GET", r"/actions/workflows/tasuku.yml/runs$")
    assert len(looks) == len(look_schedule()) == 6  # 1 s here: 0.025 s, doubling


def test_the_looks_for_a_dispatched_run_start_at_half_a_second_in_production():
    assert look_schedule(20.0) == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 2.5]
    assert look_schedule(1.0) == pytest.approx([0.025, 0.05, 0.1, 0.2, 0.4, 0.225])


@pytest.mark.parametrize(
    "failure", [{"status": 502}, {"status": None, "disconnect": True}], ids=["502", "dropped"]
)
def test_a_dispatch_whose_answer_was_lost_is_found_not_sent_again(world, fake_github, failure):
    dispatch(inputs={"tasuku_run_id": "76"}, run_name="Tasuku run 76")  # an earlier run
    fake_github.inject(1, method="POST", path=DISPATCHES, after=True, **failure)
    started = dispatch()
    runs = fake_github.actions_runs_of(REPO)
    assert [r.inputs["tasuku_run_id"] for r in runs] == ["76", "77"]
    assert started.workflow_run_id == runs[1].id
    assert started.html_url == f"{fake_github.url}/{REPO}/actions/runs/{runs[1].id}"
    assert len(fake_github.requests("POST", DISPATCHES)) == 2  # one each


def test_a_lost_answer_is_not_resent_when_runs_cannot_be_told_apart(world, fake_github):
    fake_github.add_workflow(REPO, run_name=None)  # every run shows the workflow's name
    fake_github.inject(1, status=502, method="POST", path=DISPATCHES, after=True)
    error = refusal()
    assert error.permanent
    assert "so it was not sent again; a run may have started" in error.message
    assert len(fake_github.actions_runs_of(REPO)) == 1
    assert len(fake_github.requests("POST", DISPATCHES)) == 1


def test_without_a_run_name_a_failed_dispatch_is_never_repeated(world, fake_github):
    fake_github.inject(1, status=502, method="POST", path=DISPATCHES, after=True)
    error = refusal(run_name=None)
    assert (error.permanent, error.status) == (False, 502)
    assert len(fake_github.actions_runs_of(REPO)) == 1
    assert len(fake_github.requests("POST", DISPATCHES)) == 1


def test_a_rate_limited_dispatch_waits_and_starts_one_run(world, fake_github):
    fake_github.rate_limit(1, status=429, retry_after=0, method="POST", path=DISPATCHES)
    started = dispatch()
    [run] = fake_github.actions_runs_of(REPO)
    assert started.workflow_run_id == run.id


def test_a_github_that_answers_204_is_asked_which_run_it_started(world, fake_github):
    # A GitHub that ignores return_run_details: the run exists, its id is not returned.
    fake_github.inject(1, status=204, body="", method="POST", path=DISPATCHES, after=True)
    started = dispatch()
    [run] = fake_github.actions_runs_of(REPO)
    assert started.workflow_run_id == run.id
    fake_github.inject(1, status=204, body="", method="POST", path=DISPATCHES, after=True)
    error = refusal(inputs={"tasuku_run_id": "78"}, run_name=None)
    assert error.permanent
    assert "did not say which run it is" in error.message


# --- a GitHub that does not say which run it started (GitHub Enterprise Server) ---

RUNS = r"/actions/workflows/tasuku.yml/runs$"


def test_a_server_that_refuses_return_run_details_is_sent_the_dispatch_without_it(
    world, fake_github
):
    # GHES 3.17-3.19: the key is not in their API; the run is found by its run-name.
    fake_github.actions_behave(run_details="refused")
    started = dispatch()
    [run] = fake_github.actions_runs_of(REPO)
    assert started.workflow_run_id == run.id
    assert started.html_url == f"{fake_github.url}/{REPO}/actions/runs/{run.id}"
    posts = fake_github.requests("POST", DISPATCHES)
    assert [(c.status, "return_run_details" in c.body) for c in posts] == [
        (422, True),
        (204, False),
    ]
    # this server is not offered the key again
    dispatch(inputs={"tasuku_run_id": "78"}, run_name="Tasuku run 78")
    assert [c.status for c in fake_github.requests("POST", DISPATCHES)] == [422, 204, 204]
    assert len(fake_github.actions_runs_of(REPO)) == 2


def test_a_run_github_creates_late_is_looked_for_until_it_is_listed(world, fake_github):
    fake_github.actions_behave(run_details="ignored", run_delay=0.6)
    started = dispatch()
    [run] = fake_github.actions_runs_of(REPO)
    assert started.workflow_run_id == run.id
    looks = [c.status for c in fake_github.requests("GET", RUNS)]
    # looked again and again (0.025 s, 0.075 s, ... 0.775 s), and no more once listed
    assert 1 < len(looks) < len(look_schedule()) and set(looks) == {200}


def test_a_run_not_listed_in_time_is_returned_as_none_and_found_later(world, fake_github):
    # GitHub creates the run only once the test says so (a fixed delay raced the
    # dispatch's own wait on a busy machine): not within the dispatch's second, then.
    fake_github.actions_behave(run_details="ignored", run_delay=10_000)
    assert dispatch() is None  # accepted; GitHub has not created the run within 1 s
    [run] = fake_github.actions_runs_of(REPO)
    gateway = github.gateway()
    since = datetime.now(UTC) - timedelta(minutes=10)
    find = dict(workflow="tasuku.yml", ref="main", run_name="Tasuku run 77", since=since)
    assert gateway.workflow_run_find(WHERE, **find) is None
    run.created_at = time.time()  # GitHub creates it now
    assert gateway.workflow_run_find(WHERE, **find).workflow_run_id == run.id
    assert len(fake_github.requests("POST", DISPATCHES)) == 1


def test_a_lost_answer_of_a_run_created_late_is_found_not_sent_again(world, fake_github):
    # The dispatch took effect, its answer was lost, and GitHub lists the run 0.6 s later.
    fake_github.actions_behave(run_delay=0.6)
    fake_github.inject(1, status=502, method="POST", path=DISPATCHES, after=True)
    started = dispatch()
    [run] = fake_github.actions_runs_of(REPO)
    assert started.workflow_run_id == run.id
    assert len(fake_github.requests("POST", DISPATCHES)) == 1


def test_a_persons_look_alike_run_is_not_taken_for_the_dispatch(world, fake_github):
    fake_github.actions_behave(run_details="ignored")
    copy = fake_github.actions_dispatch_as(REPO, "mallory", {"tasuku_run_id": "77"})
    assert copy.display_title == "Tasuku run 77"
    started = dispatch()
    ours = [r for r in fake_github.actions_runs_of(REPO) if r.actor_login != "mallory"]
    assert [started.workflow_run_id] == [r.id for r in ours]


def test_without_a_run_name_a_204_dispatch_names_the_fix(world, fake_github):
    fake_github.add_workflow(REPO, run_name=None)  # every run shows the workflow's name
    fake_github.actions_behave(run_details="ignored")
    error = refusal()
    assert error.permanent
    assert "the workflow's runs cannot be told apart" in error.message
    assert "add the `run-name` of Tasuku's workflow file" in error.message
    assert len(fake_github.requests("POST", DISPATCHES)) == 1


def test_a_run_older_than_the_dispatch_or_on_another_branch_is_not_ours(world, fake_github):
    dispatch()
    [run] = fake_github.actions_runs_of(REPO)
    gateway = github.gateway()
    shown = gateway.actions_run_get(WHERE, run_id=run.id)
    since = datetime.now(UTC) - timedelta(minutes=10)
    ours = dict(run_name="Tasuku run 77", ref="main", since=since, workflow="tasuku.yml")
    assert gateway.workflow_run_ours(shown, **ours)
    assert not gateway.workflow_run_ours(shown, **{**ours, "run_name": "Tasuku run 78"})
    assert not gateway.workflow_run_ours(shown, **{**ours, "ref": "feature"})
    assert not gateway.workflow_run_ours(shown, **{**ours, "workflow": "ci.yml"})
    later = datetime.now(UTC) + timedelta(minutes=1)
    assert not gateway.workflow_run_ours(shown, **{**ours, "since": later})


# --- reading workflows and runs ---


def test_a_workflow_is_read_by_file_name_path_or_id(world, fake_github):
    gateway = github.gateway()
    workflow = gateway.workflow_get(WHERE, workflow="tasuku.yml")
    assert (workflow.name, workflow.path, workflow.state) == (
        "Tasuku",
        ".github/workflows/tasuku.yml",
        "active",
    )
    assert gateway.workflow_get(WHERE, workflow=".github/workflows/tasuku.yml") == workflow
    assert gateway.workflow_get(WHERE, workflow=str(workflow.id)) == workflow
    [mint] = fake_github.requests("POST", "/access_tokens")
    assert mint.body["permissions"] == {"actions": "read"}


def test_a_missing_workflow_reads_as_none(world, fake_github):
    fake_github.add_workflow(REPO, ".github/workflows/ci.yml", content=workflow_yaml())
    fake_github.remove_workflow(REPO)
    gateway = github.gateway()
    assert gateway.workflow_get(WHERE, workflow="tasuku.yml") is None
    assert gateway.workflow_get(WHERE, workflow="ci.yml").path == ".github/workflows/ci.yml"


def test_reading_without_the_actions_permission_names_it(world, fake_github):
    del fake_github.installations[11].permissions["actions"]
    with pytest.raises(GitHubError) as caught:
        github.gateway().workflow_get(WHERE, workflow="tasuku.yml")
    assert caught.value.permanent
    assert caught.value.message.startswith(
        "Could not read the workflow .github/workflows/tasuku.yml in acme/widgets: the App "
        "may not run workflows there"
    )


def test_a_runs_status_and_conclusion_are_read(world, fake_github):
    started = dispatch()
    gateway = github.gateway()
    run = gateway.actions_run_get(WHERE, run_id=started.workflow_run_id)
    assert (run.status, run.conclusion, run.run_attempt, run.event) == (
        "queued",
        None,
        1,
        "workflow_dispatch",
    )
    assert (run.head_branch, run.head_sha, run.display_title) == (
        "main",
        main_sha(fake_github),
        "Tasuku run 77",
    )
    fake_github.actions_run_complete(REPO, started.workflow_run_id, conclusion="cancelled")
    run = gateway.actions_run_get(WHERE, run_id=started.workflow_run_id)
    assert (run.status, run.conclusion, run.html_url) == (
        "completed",
        "cancelled",
        started.html_url,
    )
    with pytest.raises(GitHubError) as caught:
        gateway.actions_run_get(WHERE, run_id=1)
    assert (caught.value.permanent, caught.value.status) == (True, 404)


def test_the_default_branch_is_read_with_the_repository(world, fake_github):
    fake_github.repos[REPO].default_branch = "trunk"
    assert github.gateway().repository_get(WHERE).default_branch == "trunk"

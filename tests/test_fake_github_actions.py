"""The fake GitHub's Actions behave like GitHub's where Tasuku depends on them: workflow
dispatch and runs (through PyGithub), the OIDC issuer (verified with PyJWT's
PyJWKClient, as a relying party would), the runner's token endpoint, and forged
tokens."""

from __future__ import annotations

import time

import jwt
import pytest
import requests
from github import Auth, Github, GithubException

from repos import github
from tests.fakes.github.actions import workflow_yaml
from tests.helpers import payload

REPO = "acme/widgets"
AUDIENCE = "https://tasuku.test"


@pytest.fixture
def world(fake_github):
    fake_github.add_installation(5, "acme")
    _, git = fake_github.add_git_repo(REPO, installation_id=5, repo_id=77)
    git.commit({"README.md": "# Widgets\n"}, message="base", branch="main")
    git.commit({"README.md": "# Widgets, faster\n"}, message="feature", branch="feature")
    fake_github.add_workflow(REPO)
    return fake_github


def api(fake_github, **token_args) -> Github:
    token = github.gateway().installation_token(5, **token_args)
    return Github(auth=Auth.Token(token.token), base_url=fake_github.url, retry=None, lazy=True)


def post_dispatch(fake_github, body, *, workflow="tasuku.yml", **token_args):
    client = api(fake_github, **token_args)
    return client.requester.requestJsonAndCheck(
        "POST", f"/repos/{REPO}/actions/workflows/{workflow}/dispatches", input=body
    )


def refused(fake_github, body, **kwargs) -> tuple[int, str]:
    with pytest.raises(GithubException) as caught:
        post_dispatch(fake_github, body, **kwargs)
    return caught.value.status, caught.value.data["message"]


def started_run(fake_github, run_id: str = "77"):
    _, data = post_dispatch(
        fake_github,
        {"ref": "main", "inputs": {"tasuku_run_id": run_id}, "return_run_details": True},
    )
    return next(r for r in fake_github.actions_runs_of(REPO) if r.id == data["workflow_run_id"])


def verify(fake_github, token: str, *, audience: str = AUDIENCE) -> dict:
    """What a relying party does: discovery, then the JWKS key named by the token's kid."""
    discovery = requests.get(
        f"{fake_github.oidc_issuer}/.well-known/openid-configuration", timeout=5
    ).json()
    key = jwt.PyJWKClient(discovery["jwks_uri"], cache_keys=False).get_signing_key_from_jwt(token)
    return jwt.decode(
        token,
        key.key,
        algorithms=discovery["id_token_signing_alg_values_supported"],
        audience=audience,
        issuer=discovery["issuer"],
        options={"require": ["exp", "iat", "nbf", "iss", "aud", "sub"]},
    )


# --- workflows and dispatch ---


def test_a_dispatch_answers_204_unless_run_details_are_asked_for(world):
    status_headers, data = post_dispatch(world, {"ref": "main", "inputs": {"tasuku_run_id": "1"}})
    assert data is None
    assert [c.status for c in world.requests("POST", "/dispatches$")] == [204]
    _, data = post_dispatch(
        world, {"ref": "main", "inputs": {"tasuku_run_id": "2"}, "return_run_details": True}
    )
    second = world.actions_runs_of(REPO)[1]
    assert data == {
        "workflow_run_id": second.id,
        "run_url": f"{world.url}/repos/{REPO}/actions/runs/{second.id}",
        "html_url": f"{world.url}/{REPO}/actions/runs/{second.id}",
    }
    assert (second.run_number, second.status, second.run_attempt) == (2, "queued", 1)


def test_an_enterprise_server_without_run_details_refuses_or_ignores_the_key(world):
    body = {"ref": "main", "inputs": {"tasuku_run_id": "1"}, "return_run_details": True}
    world.actions_behave(run_details="refused")
    assert refused(world, body) == (
        422,
        'Invalid request.\n\n"return_run_details" is not a permitted key.',
    )
    assert world.actions_runs_of(REPO) == []
    del body["return_run_details"]
    assert post_dispatch(world, body)[1] is None
    world.actions_behave(run_details="ignored")
    assert post_dispatch(world, {**body, "return_run_details": True})[1] is None
    assert [c.status for c in world.requests("POST", "/dispatches$")] == [422, 204, 204]
    assert len(world.actions_runs_of(REPO)) == 2


def test_a_run_created_late_is_listed_and_found_only_once_created(world):
    world.actions_behave(run_delay=0.5)
    run = started_run(world)  # its id is in the answer
    repo = api(world).get_repo(REPO)
    assert repo.get_workflow("tasuku.yml").get_runs().totalCount == 0
    with pytest.raises(GithubException) as caught:
        repo.requester.requestJsonAndCheck("GET", f"/repos/{REPO}/actions/runs/{run.id}")
    assert caught.value.status == 404
    time.sleep(0.6)
    [listed] = repo.get_workflow("tasuku.yml").get_runs(event="workflow_dispatch")
    assert (listed.id, listed.display_title) == (run.id, "Tasuku run 77")
    assert listed.created_at.timestamp() >= int(run.created_at)


def test_a_person_can_run_the_workflow_with_any_inputs(world):
    run = world.actions_dispatch_as(REPO, "mallory", {"tasuku_run_id": "77"})
    read = api(world).get_repo(REPO).get_workflow_run(run.id)
    assert (read.display_title, read.actor.login, read.actor.type) == (
        "Tasuku run 77",
        "mallory",
        "User",
    )


def test_a_run_is_read_through_pygithub(world):
    run = started_run(world)
    read = api(world).get_repo(REPO).get_workflow_run(run.id)
    assert (read.id, read.status, read.conclusion, read.event, read.head_branch) == (
        run.id,
        "queued",
        None,
        "workflow_dispatch",
        "main",
    )
    assert (read.head_sha, read.path, read.run_attempt) == (run.head_sha, run.path, 1)
    assert read.display_title == "Tasuku run 77"
    assert read.actor.login == "tasuku-test[bot]"


def test_a_workflow_is_found_by_file_name_or_id_on_the_default_branch(world):
    repo = api(world).get_repo(REPO)
    workflow = repo.get_workflow("tasuku.yml")
    assert (workflow.name, workflow.path, workflow.state) == (
        "Tasuku",
        ".github/workflows/tasuku.yml",
        "active",
    )
    assert repo.get_workflow(workflow.id).path == workflow.path
    world.add_workflow(REPO, ".github/workflows/lint.yml", branch="feature")
    with pytest.raises(GithubException) as caught:  # only on a branch, not the default
        assert repo.get_workflow("lint.yml").path
    assert caught.value.status == 404
    assert caught.value.data == {
        "message": "Not Found",
        "documentation_url": "https://docs.github.com/rest",
        "status": "404",
    }


def test_dispatch_refusals_carry_githubs_messages(world):
    body = {"ref": "main", "inputs": {"tasuku_run_id": "1"}}
    assert refused(world, body, workflow="nope.yml") == (404, "Not Found")
    assert refused(world, {**body, "ref": "nope"}) == (422, "No ref found for: nope")
    with world.contract.tolerated():  # requests GitHub's description refuses, on purpose
        assert refused(world, {"inputs": {}})[0] == 422
        many = {f"i{n}": "x" for n in range(26)}
        status, message = refused(world, {**body, "inputs": many})
    assert refused(world, {**body, "inputs": {"tasuku_run_id": "1", "x": "2"}}) == (
        422,
        'Unexpected inputs provided: ["x"]',
    )
    assert refused(world, {"ref": "main"}) == (422, "Required input 'tasuku_run_id' not provided")
    assert (status, "25" in message) == (422, True)
    assert refused(world, body, permissions={"actions": "read"}) == (
        403,
        "Resource not accessible by integration",
    )
    world.add_workflow(REPO, on_dispatch=False, branch="feature")
    assert refused(world, {**body, "ref": "feature"}) == (
        422,
        "Workflow does not have 'workflow_dispatch' trigger",
    )
    world.disable_workflow(REPO)
    assert refused(world, body)[1] == "Cannot trigger a 'workflow_dispatch' on a disabled workflow"
    assert world.actions_runs_of(REPO) == []


def test_the_file_at_the_dispatched_ref_decides_trigger_and_inputs(world):
    world.add_workflow(
        REPO, content=workflow_yaml(inputs={"who": {"default": "me"}}), branch="feature"
    )
    post_dispatch(world, {"ref": "refs/heads/feature"})
    [run] = world.actions_runs_of(REPO)
    assert (run.ref, run.head_branch, run.inputs) == (
        "refs/heads/feature",
        "feature",
        {"who": "me"},
    )
    assert run.display_title == "Tasuku run"  # its run-name names an input it lacks


def test_workflow_runs_list_newest_first_with_filters(world):
    first, second = started_run(world, "1"), started_run(world, "2")
    url = f"/repos/{REPO}/actions/workflows/tasuku.yml/runs"
    client = api(world)
    _, data = client.requester.requestJsonAndCheck(
        "GET", url, parameters={"event": "workflow_dispatch"}
    )
    assert [r["id"] for r in data["workflow_runs"]] == [second.id, first.id]
    assert data["total_count"] == 2
    world.actions_run_complete(REPO, first.id, conclusion="failure")
    for params, expected in [
        ({"status": "failure"}, [first.id]),
        ({"status": "queued"}, [second.id]),
        ({"branch": "feature"}, []),
        ({"created": ">=2000-01-01"}, [second.id, first.id]),
        ({"created": "<2000-01-01"}, []),
        ({"event": "push"}, []),
    ]:
        _, data = client.requester.requestJsonAndCheck("GET", url, parameters=params)
        assert [r["id"] for r in data["workflow_runs"]] == expected, params


def test_driving_a_run_returns_the_workflow_run_webhook_payloads(world):
    run = started_run(world)
    started = world.actions_run_start(REPO, run.id)
    assert (started["action"], started["workflow_run"]["status"]) == ("in_progress", "in_progress")
    done = world.actions_run_complete(REPO, run.id, conclusion="cancelled")
    recorded = payload("workflow_run", "completed")
    assert set(done) == set(recorded) | {"installation"}
    assert set(done["workflow_run"]) >= set(recorded["workflow_run"])
    assert done["action"] == "completed"
    assert done["installation"]["id"] == 5
    assert done["repository"]["full_name"] == REPO
    wr = done["workflow_run"]
    assert (wr["id"], wr["status"], wr["conclusion"], wr["run_attempt"]) == (
        run.id,
        "completed",
        "cancelled",
        1,
    )
    assert (wr["head_sha"], wr["head_branch"], wr["event"], wr["path"]) == (
        run.head_sha,
        "main",
        "workflow_dispatch",
        ".github/workflows/tasuku.yml",
    )
    assert (done["workflow"]["id"], done["workflow"]["path"]) == (run.workflow_id, run.path)
    assert done["sender"]["login"] == "tasuku-test[bot]"
    again = world.actions_run_rerun(REPO, run.id)
    assert (again["action"], again["workflow_run"]["run_attempt"]) == ("requested", 2)
    assert again["workflow_run"]["conclusion"] is None


# --- the OIDC issuer ---


def test_discovery_and_jwks_answer_like_githubs_issuer(world):
    for url in (world.url, world.oidc_issuer):
        discovery = requests.get(f"{url}/.well-known/openid-configuration", timeout=5).json()
        assert discovery["issuer"] == world.oidc_issuer
        assert discovery["jwks_uri"] == f"{world.url}/.well-known/jwks"
        assert discovery["id_token_signing_alg_values_supported"] == ["RS256"]
    [key] = requests.get(f"{world.url}/.well-known/jwks", timeout=5).json()["keys"]
    assert set(key) >= {"kid", "kty", "n", "e", "alg", "use"}
    assert (key["kty"], key["alg"], key["use"], key["kid"]) == (
        "RSA",
        "RS256",
        "sig",
        world.oidc_signing_kid,
    )
    assert requests.get(f"{world.url}/elsewhere/.well-known/jwks", timeout=5).status_code == 404


def test_a_minted_token_verifies_and_carries_the_runs_claims(world):
    run = started_run(world)
    token = world.oidc_token(run, audience=AUDIENCE)
    header = jwt.get_unverified_header(token)
    assert (header["alg"], header["kid"], header["typ"]) == ("RS256", world.oidc_signing_kid, "JWT")
    claims = verify(world, token)
    workflow_ref = f"{REPO}/.github/workflows/tasuku.yml@refs/heads/main"
    assert {k: claims[k] for k in (
        "iss", "aud", "sub", "repository", "repository_id", "repository_owner",
        "repository_owner_id", "run_id", "run_number", "run_attempt", "ref", "ref_type", "sha",
        "event_name", "workflow", "workflow_ref", "job_workflow_ref", "runner_environment", "actor",
    )} == {
        "iss": world.oidc_issuer,
        "aud": AUDIENCE,
        "sub": f"repo:{REPO}:ref:refs/heads/main",
        "repository": REPO,
        "repository_id": "77",
        "repository_owner": "acme",
        "repository_owner_id": "1000",
        "run_id": str(run.id),
        "run_number": "1",
        "run_attempt": "1",
        "ref": "refs/heads/main",
        "ref_type": "branch",
        "sha": run.head_sha,
        "event_name": "workflow_dispatch",
        "workflow": "Tasuku",
        "workflow_ref": workflow_ref,
        "job_workflow_ref": workflow_ref,
        "runner_environment": "github-hosted",
        "actor": "tasuku-test[bot]",
    }  # fmt: skip
    assert claims["nbf"] <= claims["iat"] < claims["exp"]
    assert (
        claims["jti"]
        != jwt.decode(
            world.oidc_token(run, audience=AUDIENCE), options={"verify_signature": False}
        )["jti"]
    )
    default_audience = jwt.decode(world.oidc_token(run), options={"verify_signature": False})
    assert default_audience["aud"] == "https://github.com/acme"


def test_the_immutable_subject_format_names_owner_and_repository_ids(world):
    run = started_run(world)
    claims = verify(world, world.oidc_token(run, audience=AUDIENCE, immutable_sub=True))
    assert claims["sub"] == "repo:acme@1000/widgets@77:ref:refs/heads/main"
    world.oidc_immutable_sub.add(REPO)
    assert verify(world, world.oidc_token(run, audience=AUDIENCE))["sub"] == claims["sub"]


def test_forged_claims_differ_as_asked(world):
    run = started_run(world)

    def claims(**overrides):
        return verify(world, world.oidc_token(run, audience=AUDIENCE, **overrides))

    other = claims(repository="evil/widgets", repository_id="666")
    assert (other["repository"], other["repository_owner"], other["repository_id"]) == (
        "evil/widgets",
        "evil",
        "666",
    )
    assert other["sub"] == "repo:evil/widgets:ref:refs/heads/main"
    assert other["workflow_ref"] == "evil/widgets/.github/workflows/tasuku.yml@refs/heads/main"
    assert claims(run_id="1")["run_id"] == "1"
    assert claims(workflow_path=".github/workflows/other.yml")["job_workflow_ref"] == (
        f"{REPO}/.github/workflows/other.yml@refs/heads/main"
    )
    branch = claims(ref="refs/heads/feature")
    assert (branch["sub"], branch["workflow_ref"]) == (
        f"repo:{REPO}:ref:refs/heads/feature",
        f"{REPO}/.github/workflows/tasuku.yml@refs/heads/feature",
    )
    assert claims(event_name="pull_request_target")["event_name"] == "pull_request_target"
    assert "sha" not in claims(sha=None)
    with pytest.raises(jwt.ExpiredSignatureError):
        verify(world, world.oidc_token(run, audience=AUDIENCE, issued_at=time.time() - 3600))
    with pytest.raises(jwt.InvalidAudienceError):
        verify(world, world.oidc_token(run, audience="https://elsewhere.test"))
    with pytest.raises(jwt.InvalidIssuerError):
        verify(world, world.oidc_token(run, audience=AUDIENCE, iss="https://evil.test"))


def test_tokens_signed_by_a_stranger_do_not_verify(world):
    run = started_run(world)
    with pytest.raises(jwt.PyJWKClientError):  # its kid is not in the JWKS
        verify(world, world.oidc_token_unknown_kid(run, audience=AUDIENCE))
    forged = world.oidc_token_wrong_key(run, audience=AUDIENCE)
    assert jwt.get_unverified_header(forged)["kid"] == world.oidc_signing_kid
    with pytest.raises(jwt.InvalidSignatureError):
        verify(world, forged)
    unsigned = world.oidc_token_unsigned(run, audience=AUDIENCE)
    assert jwt.get_unverified_header(unsigned)["alg"] == "none"
    with pytest.raises(jwt.InvalidAlgorithmError):
        verify(world, unsigned)


def test_keys_rotate_and_retire(world):
    run = started_run(world)
    old_kid = world.oidc_signing_kid
    old_token = world.oidc_token(run, audience=AUDIENCE)
    new_kid = world.oidc_add_key()
    assert world.oidc_signing_kid == new_kid != old_kid
    assert [k["kid"] for k in world.oidc_jwks()["keys"]] == [old_kid, new_kid]
    new_token = world.oidc_token(run, audience=AUDIENCE)
    assert jwt.get_unverified_header(new_token)["kid"] == new_kid
    assert verify(world, old_token)["run_id"] == verify(world, new_token)["run_id"]
    world.oidc_retire_key(old_kid)
    with pytest.raises(jwt.PyJWKClientError):
        verify(world, old_token)
    assert verify(world, new_token)
    world.reset()
    assert world.oidc_jwks()["keys"][0]["kid"] == old_kid  # the first key is back


# --- the runner's token endpoint ---


def test_a_job_gets_a_token_for_its_run_and_audience(world):
    run = started_run(world)
    env = world.actions_runner_env(REPO, run.id)
    assert "?" in env["ACTIONS_ID_TOKEN_REQUEST_URL"]
    assert (env["GITHUB_REPOSITORY"], env["GITHUB_RUN_ID"], env["GITHUB_RUN_ATTEMPT"]) == (
        REPO,
        str(run.id),
        "1",
    )
    assert run.status == "in_progress"  # the job started

    def ask(token: str, audience: str = AUDIENCE) -> requests.Response:
        return requests.get(
            f"{env['ACTIONS_ID_TOKEN_REQUEST_URL']}&audience={audience}",
            headers={"Authorization": f"bearer {token}"},
            timeout=5,
        )

    answer = ask(env["ACTIONS_ID_TOKEN_REQUEST_TOKEN"])
    assert answer.status_code == 200
    claims = verify(world, answer.json()["value"])
    assert (claims["run_id"], claims["aud"], claims["repository"]) == (str(run.id), AUDIENCE, REPO)
    assert ask("not-the-token").status_code == 401
    other = started_run(world, "78")
    other_token = world.actions_runner_env(REPO, other.id)["ACTIONS_ID_TOKEN_REQUEST_TOKEN"]
    assert ask(other_token).status_code == 401  # another job's token
    world.actions_run_complete(REPO, run.id)
    assert ask(env["ACTIONS_ID_TOKEN_REQUEST_TOKEN"]).status_code == 401  # the job ended

"""The docker runner: the engine in a locked-down, named, self-destructing container,
driven through the real docker SDK against the fake Docker Engine (tests/fakes/docker).
The last test runs the static engine in a real container when a Docker engine answers."""

from __future__ import annotations

import ast
import contextlib
import importlib.metadata
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
import requests

from sandbox.contract import ChangedFile, LineRange, ReviewJob, ReviewResult, ReviewSummary
from sandbox.errors import ProviderError, SandboxError
from sandbox.runners.docker import (
    HOME,
    USER,
    DockerLimits,
    DockerSandbox,
    container_name,
    docker_client,
    engine_run,
)
from sandbox.runners.local import MAX_OUTPUT
from tests.fakes.docker import FakeDocker, Invocation, Program

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "tasuku-engine:latest"
NAME = "tasuku-run-7-1"
LIMITS = DockerLimits(
    wall_seconds=5, grace_seconds=5, memory_bytes=512 * 1024**2, cpus=1.5, pids=128
)
RESULT = ReviewResult(engine="static", summary=ReviewSummary(validation="ruff: clean"))


@pytest.fixture(scope="module")
def docker_server() -> Iterator[FakeDocker]:
    fake = FakeDocker().start()
    yield fake
    fake.stop()


@pytest.fixture
def fake(docker_server: FakeDocker) -> Iterator[FakeDocker]:
    """The fake Docker Engine, emptied, holding the engine image. Whatever a test does,
    no container may be left behind."""
    docker_server.reset()
    docker_server.add_image(IMAGE, User=USER, WorkingDir="/workspace")
    docker_server.program = Program(stdout=RESULT.model_dump_json().encode())
    yield docker_server
    left = [c.name for c in docker_server.containers.values()]
    assert left == [], f"containers left behind: {left}"


@pytest.fixture
def client(fake: FakeDocker) -> Iterator[docker.DockerClient]:
    client = docker.DockerClient(base_url=fake.url)
    yield client
    client.close()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "workspace" / "checkout"
    root.mkdir(parents=True)
    (root / "app.py").write_text("print('hello')\n")
    return root


def job(**kwargs: object) -> ReviewJob:
    return ReviewJob(
        job_id="job-1",
        repository="a/b",
        pull_request=1,
        base_sha="a" * 40,
        head_sha="b" * 40,
        **kwargs,
    )


def run(client: docker.DockerClient, checkout: Path, engine: str = "static", **kwargs):
    kwargs = {"limits": LIMITS, "image": IMAGE, "name": NAME, **kwargs}
    return engine_run(engine, job(), checkout, client=client, **kwargs)


def failing(code: int, last_line: dict | None = None, *, noise: bytes = b"") -> Program:
    line = json.dumps(last_line).encode() + b"\n" if last_line else b""
    return Program(exit_code=code, stderr=noise + line)


def removed_by_force(fake: FakeDocker, ref: str) -> bool:
    return any(
        call.query.get("force") == "True" for call in fake.calls_to("DELETE", f"/containers/{ref}")
    )


# --- the container specification ---


def test_it_runs_the_engine_in_a_locked_down_container(fake, client, checkout):
    run(client, checkout)
    [container] = fake.created
    config, host = container.config, container.host_config
    assert config["Image"] == IMAGE
    assert config["Cmd"] == [
        "timeout", "-s", "KILL", "5",
        "python", "-I", "-m", "sandbox.run_engine", "static", "--job-file", "/job/job.json",
    ]  # fmt: skip
    assert host["Init"] is False  # the timer is PID 1
    assert config["User"] == "10001:10001"
    assert config["WorkingDir"] == "/workspace"
    mounts = {mount["Target"]: mount for mount in host["Mounts"]}
    assert set(mounts) == {"/workspace", "/job/job.json"}
    assert mounts["/workspace"]["Source"] == str(checkout)
    assert all(mount["Type"] == "bind" and mount["ReadOnly"] for mount in mounts.values())
    assert not host.get("Binds")
    assert host["ReadonlyRootfs"] is True
    assert set(host["Tmpfs"]) == {"/tmp", HOME}
    assert "size=268435456" in host["Tmpfs"]["/tmp"]
    assert "uid=10001,gid=10001,mode=0700" in host["Tmpfs"][HOME]
    assert host["Memory"] == host["MemorySwap"] == 512 * 1024**2
    assert host["NanoCpus"] == 1_500_000_000
    assert host["PidsLimit"] == 128
    assert host["CapDrop"] == ["ALL"]
    assert host["SecurityOpt"] == ["no-new-privileges:true"]
    assert host["NetworkMode"] == "none"
    assert not host.get("AutoRemove")
    assert host["LogConfig"] == {
        "Type": "json-file",
        "Config": {"max-size": "60m", "max-file": "1"},
    }
    assert config["Labels"]["tasuku.sandbox"] == "engine"


def test_a_static_engine_gets_no_network_and_no_key(fake, client, checkout):
    run(client, checkout)
    [container] = fake.created
    assert container.host_config["NetworkMode"] == "none"
    assert Invocation(container.config).env == {
        "HOME": HOME,
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
    }


def test_a_model_engine_reaches_only_the_operators_network_with_only_its_key(
    fake, client, checkout
):
    fake.add_network("tasuku-model-api")
    run(
        client,
        checkout,
        "anthropic",
        allow_env={"ANTHROPIC_API_KEY": "sk-ant-test"},
        network="tasuku-model-api",
        proxy="http://egress:3128",
    )
    [container] = fake.created
    assert container.host_config["NetworkMode"] == "tasuku-model-api"
    env = Invocation(container.config).env
    assert env.pop("ANTHROPIC_API_KEY") == "sk-ant-test"
    assert env.pop("HTTPS_PROXY") == env.pop("https_proxy") == "http://egress:3128"
    assert set(env) == {"HOME", "TMPDIR", "LANG", "LC_ALL"}


def test_the_engine_never_sees_the_workers_github_credentials(fake, client, checkout, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_installationtoken")
    monkeypatch.setenv("GITHUB_PRIVATE_KEY", "-----BEGIN RSA PRIVATE KEY-----")
    monkeypatch.setenv("SECRET_KEY", "django")
    run(client, checkout, allow_env={"OPENAI_API_KEY": "sk-test"})
    [container] = fake.created
    env = Invocation(container.config).env
    assert set(env) == {"OPENAI_API_KEY", "HOME", "TMPDIR", "LANG", "LC_ALL"}
    assert "ghs_" not in json.dumps(container.config)


@pytest.mark.parametrize(
    "allow_env",
    [
        {"GITHUB_TOKEN": "t"},
        {"GH_TOKEN": "t"},
        {"OPENAI_API_KEY": "ghs_installationtoken"},
        {"KEY": "github_pat_11ABC"},
    ],
)
def test_it_refuses_to_hand_a_github_credential_to_an_engine(fake, client, checkout, allow_env):
    with pytest.raises(SandboxError, match="never gets a GitHub credential") as caught:
        run(client, checkout, allow_env=allow_env)
    assert caught.value.permanent and caught.value.code == "sandbox-credential"
    assert fake.created == []


def test_it_refuses_networks_that_reach_more_than_the_model_api(fake, client, checkout):
    with pytest.raises(SandboxError, match="cannot be 'host'") as caught:
        run(client, checkout, network="host")
    assert caught.value.permanent and caught.value.code == "docker-network"
    with pytest.raises(SandboxError, match="needs a Docker network") as caught:
        run(client, checkout, proxy="http://egress:3128")
    assert caught.value.code == "docker-network"
    assert fake.created == []


def test_a_network_the_operator_has_not_created_is_a_permanent_error(fake, client, checkout):
    with pytest.raises(SandboxError, match="network tasuku-model-api not found") as caught:
        run(client, checkout, network="tasuku-model-api")
    assert caught.value.permanent


# --- name and lifecycle ---


def test_the_container_is_named_after_the_run_and_its_attempt(fake, client, checkout):
    assert container_name(7, 1) == NAME
    run(client, checkout, name=container_name(7, 1))
    assert [c.name for c in fake.created] == [NAME]
    assert [call.query["name"] for call in fake.calls_to("POST", "/containers/create")] == [NAME]


def test_a_stale_container_with_the_same_name_is_removed_first(fake, client, checkout):
    stale = fake.add_container(NAME, IMAGE)  # a killed worker's, still running
    result = run(client, checkout)
    assert result == RESULT
    assert stale.removed and stale.killed_with == [9]
    paths = [(call.method, call.path) for call in fake.calls]
    assert paths.index(("DELETE", f"/containers/{NAME}")) < paths.index(
        ("POST", "/containers/create")
    )
    assert removed_by_force(fake, NAME)


def test_a_successful_run_returns_the_engines_review_result_and_removes_the_container(
    fake, client, checkout
):
    assert run(client, checkout) == RESULT
    [container] = fake.created
    assert container.removed
    assert removed_by_force(fake, container.id)
    lifecycle = [(c.method, c.path.replace(container.id, "ID")) for c in fake.calls]
    assert lifecycle.index(("POST", "/containers/ID/start")) < lifecycle.index(
        ("POST", "/containers/ID/wait")
    )
    [logs] = fake.calls_to("GET", "/containers/.*/logs")
    assert (logs.query["stdout"], logs.query["stderr"]) == ("1", "0")


def test_the_job_reaches_the_engine_as_a_read_only_file_deleted_afterwards(fake, client, checkout):
    seen: dict[str, object] = {}

    def engine(invocation: Invocation) -> Program:
        path = invocation.cmd[invocation.cmd.index("--job-file") + 1]
        given = ReviewJob.model_validate_json(invocation.read(path))
        seen["host_file"] = invocation.host_path(path)
        seen["mode"] = invocation.host_path(path).stat().st_mode & 0o777
        summary = ReviewSummary(validation=f"reviewed {given.job_id} of {given.repository}")
        return Program(
            stdout=ReviewResult(engine="static", summary=summary).model_dump_json().encode()
        )

    fake.program = engine
    result = run(client, checkout)
    assert result.summary.validation == "reviewed job-1 of a/b"
    assert seen["mode"] == 0o644  # readable by the engine's user, which is not the worker's
    assert not Path(str(seen["host_file"])).parent.exists()


def test_the_container_is_removed_when_the_callers_block_fails(fake, client, checkout):
    with (
        pytest.raises(KeyError),
        DockerSandbox(client, name=NAME, image=IMAGE, limits=LIMITS) as box,
    ):
        box.run("static", job(), checkout)
        raise KeyError("the caller's own failure")
    [container] = fake.created
    assert container.removed


@pytest.mark.parametrize(
    ("program", "fails"),
    [
        (Program(stdout=RESULT.model_dump_json().encode()), False),
        (Program(exit_code=3, stderr=b'{"error": "ValueError: boom"}\n'), True),
        (Program(oom=True), True),
        (Program(stdout=b"not json"), True),
        (Program(hang=True), True),
        (Program(stuck=True), True),
    ],
    ids=["success", "failure", "oom", "bad output", "timeout", "stuck"],
)
def test_the_container_is_killed_and_removed_in_every_case(fake, client, checkout, program, fails):
    fake.program = program
    limits = DockerLimits(wall_seconds=0.3, grace_seconds=0.5)
    with pytest.raises(SandboxError) if fails else contextlib.nullcontext():
        run(client, checkout, limits=limits)
    [container] = fake.created
    assert container.removed and not container.running
    assert removed_by_force(fake, container.id)


# --- how a run ends ---


def test_an_engine_failure_it_understood_keeps_its_stage_and_retryability(fake, client, checkout):
    fake.program = failing(
        4,
        {"error": "The model API is overloaded (529).", "stage": "provider", "permanent": False,
         "code": "provider-unavailable"},
        noise=b"Traceback (most recent call last):\n  ...\n",
    )  # fmt: skip
    with pytest.raises(ProviderError) as caught:
        run(client, checkout, "anthropic")
    assert str(caught.value) == "The model API is overloaded (529)."
    assert caught.value.stage == "provider"
    assert not caught.value.permanent
    assert caught.value.code == "provider-unavailable"  # its code crosses with it


def test_an_engine_failure_from_an_image_that_names_no_code_gets_its_classs(fake, client, checkout):
    fake.program = failing(
        4, {"error": "The model API is overloaded (529).", "stage": "provider", "permanent": False}
    )
    with pytest.raises(ProviderError) as caught:
        run(client, checkout, "anthropic")
    assert caught.value.code == "provider-error"


def test_an_engine_crash_is_a_permanent_sandbox_error_with_its_reason(fake, client, checkout):
    fake.program = failing(3, {"error": "ValueError: no diff", "code": "internal-error"})
    with pytest.raises(SandboxError, match=r"failed \(exit 3\): ValueError: no diff") as caught:
        run(client, checkout)
    assert caught.value.stage == "sandbox"
    assert caught.value.permanent
    assert caught.value.code == "internal-error"  # a bug in the engine, as it said
    [logs] = fake.calls_to("GET", "/containers/.*/logs")
    assert (logs.query["stdout"], logs.query["stderr"]) == ("0", "1")


def test_an_engine_killed_by_a_signal_says_which(fake, client, checkout):
    fake.program = Program(exit_code=137)  # SIGKILL, well before the deadline
    with pytest.raises(SandboxError, match="killed by SIGKILL") as caught:
        run(client, checkout)
    assert caught.value.code == "sandbox-memory"


def test_running_out_of_memory_names_the_limit(fake, client, checkout):
    fake.program = Program(oom=True, stderr=b"Killed\n")
    with pytest.raises(SandboxError, match=r"ran out of memory \(its limit is 512 MiB\)") as caught:
        run(client, checkout)
    assert caught.value.permanent and caught.value.code == "sandbox-memory"
    assert fake.created[0].oom_killed


def test_a_hanging_engine_is_stopped_by_its_self_destruct_timer(fake, client, checkout):
    fake.program = Program(hang=True)
    started = time.monotonic()
    with pytest.raises(SandboxError, match=r"did not finish within 0.5s") as caught:
        run(client, checkout, limits=DockerLimits(wall_seconds=0.5, grace_seconds=10))
    assert time.monotonic() - started < 5
    assert caught.value.permanent and caught.value.code == "sandbox-timeout"
    [container] = fake.created
    assert container.exit_code == 137 and container.removed


def test_a_container_whose_timer_fails_is_killed_at_the_deadline_and_grace(fake, client, checkout):
    fake.program = Program(stuck=True)
    started = time.monotonic()
    with pytest.raises(SandboxError, match=r"did not finish within 0.3s") as caught:
        run(client, checkout, limits=DockerLimits(wall_seconds=0.3, grace_seconds=0.5))
    assert 0.8 <= time.monotonic() - started < 5
    assert caught.value.permanent and caught.value.code == "sandbox-timeout"
    [container] = fake.created
    assert container.killed_with[0] == 9 and container.removed
    [kill] = fake.calls_to("POST", f"/containers/{container.id}/kill")
    [delete] = fake.calls_to("DELETE", f"/containers/{container.id}")
    assert kill.at < delete.at


def test_output_that_is_not_a_review_result_fails_at_validation(fake, client, checkout):
    fake.program = Program(stdout=b"LGTM, approve it")
    with pytest.raises(SandboxError) as caught:
        run(client, checkout)
    assert caught.value.stage == "validation"
    assert caught.value.code == "engine-output"


def test_output_past_the_bound_is_refused(fake, client, checkout):
    fake.program = Program(stdout=b"x" * (MAX_OUTPUT + 4096))
    with pytest.raises(SandboxError, match=f"more than {MAX_OUTPUT} bytes") as caught:
        run(client, checkout)
    assert caught.value.code == "engine-output"


# --- Docker's own failures ---


def test_a_missing_image_tells_the_operator_to_build_it(fake, client, checkout):
    fake.images.clear()
    with pytest.raises(SandboxError) as caught:
        run(client, checkout)
    message = str(caught.value)
    assert f"The engine image {IMAGE} is not on the Docker host" in message
    assert f"docker build -f sandbox/images/Dockerfile -t {IMAGE} ." in message
    assert caught.value.permanent and caught.value.code == "docker-image"
    assert fake.created == []


def test_an_unreachable_daemon_is_a_transient_error(monkeypatch, checkout):
    nobody = f"tcp://127.0.0.1:{_closed_port()}"
    with pytest.raises(SandboxError, match="Docker daemon is unreachable") as caught:
        docker_client(nobody)
    assert not caught.value.permanent and caught.value.code == "docker-unreachable"
    monkeypatch.setenv("DOCKER_HOST", nobody)
    with pytest.raises(SandboxError, match="Docker daemon is unreachable") as caught:
        engine_run("static", job(), checkout, limits=LIMITS, image=IMAGE, name=NAME)
    assert not caught.value.permanent


def test_a_daemon_that_goes_away_mid_run_is_a_transient_error(fake, client, checkout):
    fake.inject("POST", "/containers/.*/start", drop=True)
    with pytest.raises(SandboxError, match="unreachable") as caught:
        run(client, checkout)
    assert not caught.value.permanent and caught.value.code == "docker-unreachable"
    assert fake.created[0].removed


def test_a_container_created_by_a_call_whose_answer_was_lost_is_removed(fake, client, checkout):
    fake.inject("POST", "/containers/create", drop=True, after=True)
    with pytest.raises(SandboxError, match="unreachable") as caught:
        run(client, checkout)
    assert not caught.value.permanent
    [container] = fake.created
    assert container.removed
    assert len(fake.calls_to("DELETE", f"/containers/{NAME}")) == 2  # stale check, clean-up


@pytest.mark.parametrize(
    ("status", "permanent", "code"),
    [(500, False, "docker-unreachable"), (409, False, "docker-unreachable"),
     (400, True, "docker-refused")],
)  # fmt: skip
def test_docker_refusals_are_permanent_and_its_failures_transient(
    fake, client, checkout, status, permanent, code
):
    fake.inject("POST", "/containers/create", status=status, message="computer says no")
    with pytest.raises(
        SandboxError, match="Docker could not create the container: computer says no"
    ) as caught:
        run(client, checkout)
    assert caught.value.permanent is permanent
    assert caught.value.code == code


def test_docker_host_chooses_the_daemon(fake, checkout, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", fake.url)
    monkeypatch.delenv("DOCKER_TLS_VERIFY", raising=False)
    monkeypatch.delenv("DOCKER_CERT_PATH", raising=False)
    result = engine_run("static", job(), checkout, limits=LIMITS, image=IMAGE, name=NAME)
    assert result == RESULT


# --- the engine's side and the image ---


def test_run_engine_reads_its_job_from_a_file(tmp_path, checkout):
    job_file = tmp_path / "job.json"
    job_file.write_text(
        job(
            changed_files=(
                ChangedFile(path="app.py", status="added", added=(LineRange(start=1, end=1),)),
            )
        ).model_dump_json()
    )
    completed = subprocess.run(
        [sys.executable, "-I", "-m", "sandbox.run_engine", "static", "--job-file", str(job_file)],
        cwd=checkout,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert ReviewResult.model_validate_json(completed.stdout).engine == "static"
    usage = subprocess.run(
        [sys.executable, "-I", "-m", "sandbox.run_engine", "static", "--job-file"],
        capture_output=True,
        timeout=60,
    )
    assert usage.returncode == 2 and b"[--job-file PATH]" in usage.stderr


def test_the_image_installs_what_the_project_pins_and_runs_as_the_runners_user():
    pinned = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    wanted = _image_requirements()
    assert wanted and all(line in pinned for line in wanted)
    dockerfile = (ROOT / "sandbox/images/Dockerfile").read_text()
    assert f"USER {USER}" in dockerfile
    assert f"--home-dir {HOME}" in dockerfile


def test_the_image_has_every_package_the_engines_import():
    # Not in the image: the worker's side, and tasuku-runner (it runs in an Actions job
    # with the whole project installed).
    worker_side = {"runners", "management", "apps.py", "checks.py", "workspace.py",
                   "actions_runner.py"}  # fmt: skip
    modules = set()
    for path in (ROOT / "sandbox").rglob("*.py"):
        if worker_side & set(path.relative_to(ROOT / "sandbox").parts):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules.add(node.module.split(".")[0])
    third_party = modules - set(sys.stdlib_module_names) - {"sandbox", "__future__"}
    distributions = importlib.metadata.packages_distributions()
    needed = {
        re.sub(r"[-_.]+", "-", dist).lower()
        for module in third_party
        for dist in distributions[module]
    }
    listed = {re.split(r"[<>=!~\[; ]", line)[0].lower() for line in _image_requirements()}
    assert needed <= listed, f"add to sandbox/images/requirements.txt: {needed - listed}"


def _image_requirements() -> list[str]:
    lines = (ROOT / "sandbox/images/requirements.txt").read_text().splitlines()
    return [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]


# --- a real Docker engine ---


@pytest.mark.docker
def test_the_static_engine_reviews_in_a_real_container(tmp_path):
    client = _real_docker()
    image = os.environ.get("TASUKU_TEST_DOCKER_IMAGE") or _build_image(client)
    checkout = tmp_path / "ws" / "checkout"
    checkout.mkdir(parents=True)
    (checkout / "app.py").write_text(
        "import subprocess\nCMD = 'make'\nsubprocess.call(CMD, shell=True)\n"
    )
    # A checkout's own package and site hooks must not run in place of Tasuku's.
    (checkout / "sandbox").mkdir()
    (checkout / "sandbox" / "__init__.py").write_text("raise SystemExit('hijacked')\n")
    review = job(
        changed_files=(
            ChangedFile(path="app.py", status="added", added=(LineRange(start=3, end=3),)),
        )
    )
    name = container_name(f"test-{os.getpid()}", 1)
    result = engine_run(
        "static",
        review,
        checkout,
        limits=DockerLimits(wall_seconds=300),
        image=image,
        name=name,
        client=client,
    )
    assert [f["rule"] for f in result.findings] == ["ruff:S602"]
    with pytest.raises(docker.errors.NotFound):
        client.containers.get(name)
    client.close()


def _real_docker() -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=10)
        client.ping()
    except (docker.errors.DockerException, requests.RequestException) as exc:
        pytest.skip(f"no Docker engine answers: {exc}")
    return client


def _build_image(client: docker.DockerClient) -> str:
    tag = "tasuku-engine:test"
    dockerfile = "sandbox/images/Dockerfile"
    if shutil.which("docker"):  # BuildKit, which honours the Dockerfile's own .dockerignore
        subprocess.run(
            ["docker", "build", "-f", dockerfile, "-t", tag, "."],
            cwd=ROOT,
            check=True,
            timeout=3600,
        )
    else:
        client.images.build(path=str(ROOT), dockerfile=dockerfile, tag=tag, rm=True)
    return tag


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]

"""`tasuku-runner`'s own behaviour against a stub Tasuku and token service: it keeps
the OIDC request variables away from the engine, retries network errors and 5xx (a
result is accepted once, so repeating is safe), refuses a checkout at another head, and
reports an engine failure as a failure."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sandbox import actions_runner
from sandbox.contract import ReviewJob, ReviewResult


class Stub:
    def __init__(self, head_sha: str) -> None:
        self.head_sha = head_sha
        self.engine = "static"
        self.fail_next: dict[str, list[int | str]] = {}
        self.results: list[dict] = []
        self.tokens_asked: list[str] = []
        self.auth_seen: list[str] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def job(self) -> dict:
        job = ReviewJob(job_id="9", repository="acme/shop", pull_request=7, base_sha="0" * 40,
                        head_sha=self.head_sha)  # fmt: skip
        return {"status": "review", "run": 9, "reason": "", "engine": self.engine,
                "head_sha": self.head_sha, "job": job.model_dump(mode="json")}  # fmt: skip

    def _handler(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _answer(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _failure(self, path: str) -> bool:
                planned = stub.fail_next.get(path) or []
                if not planned:
                    return False
                what = planned.pop(0)
                if what == "drop":
                    self.connection.close()
                else:
                    self._answer(int(what), {"error": "try again"})
                return True

            def do_GET(self) -> None:
                if self.path.startswith("/token"):
                    assert self.headers["Authorization"] == "bearer request-token"
                    stub.tokens_asked.append(self.path)
                    self._answer(200, {"value": f"jwt-{len(stub.tokens_asked)}"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                stub.auth_seen.append(self.headers["Authorization"])
                if self._failure(self.path):
                    return
                if self.path == "/api/runner/job":
                    self._answer(200, stub.job())
                elif self.path == "/api/runner/result":
                    stub.results.append(body)
                    first = len(stub.results) == 1
                    self._answer(200, {"status": "accepted" if first else "already accepted",
                                       "run": 9})  # fmt: skip

        return Handler


@pytest.mark.parametrize("engine_name", ["anthropic", "static"])
def test_the_engine_never_sees_the_oidc_request_variables(
    checkout, runner_env, monkeypatch, engine_name
):
    root, head = checkout
    stub = Stub(head)
    stub.engine = engine_name
    summary = runner_env(stub)
    seen = {}

    def engine(engine_name, job, workspace):
        import os

        seen["env"] = dict(os.environ)
        seen["files"] = sorted(p.name for p in workspace.iterdir())
        return ReviewResult(engine=engine_name, findings=[
            {"path": "app.py", "start_line": 1, "end_line": 1, "severity": "low",
             "category": "style", "title": "Prints | on import", "body": "b"}])  # fmt: skip

    monkeypatch.setattr(actions_runner, "engine_run", engine)
    assert actions_runner.main(["--url", stub.url, "--checkout", str(root)]) == 0
    assert "ACTIONS_ID_TOKEN_REQUEST_URL" not in seen["env"]
    assert "ACTIONS_ID_TOKEN_REQUEST_TOKEN" not in seen["env"]
    # .git sanitised away, and AGENTS.md from an agent's checkout: static reads it as text.
    assert seen["files"] == (["app.py"] if engine_name == "anthropic" else ["AGENTS.md", "app.py"])
    # The audience is Tasuku's URL; each request carries a freshly minted token.
    assert all(f"audience={stub.url.replace(':', '%3A').replace('/', '%2F')}" in p
               for p in stub.tokens_asked)  # fmt: skip
    assert stub.auth_seen == ["Bearer jwt-1", "Bearer jwt-2"]
    [posted] = stub.results
    assert posted["result"]["findings"][0]["title"] == "Prints | on import"
    assert "| low | `app.py:1` | Prints \\| on import |" in summary.read_text()


def test_network_errors_and_5xx_are_retried(checkout, runner_env, monkeypatch):
    root, head = checkout
    stub = Stub(head)
    runner_env(stub)
    stub.fail_next = {"/api/runner/job": [503, "drop"], "/api/runner/result": ["drop", 502]}
    monkeypatch.setattr(actions_runner, "engine_run",
                        lambda e, j, w: ReviewResult(engine=e))  # fmt: skip
    assert actions_runner.main(["--url", stub.url, "--checkout", str(root)]) == 0
    assert len(stub.results) == 1  # the dropped and 502 tries never reached the handler


def test_a_checkout_at_another_head_is_reported_as_a_failure(checkout, runner_env):
    root, _ = checkout
    stub = Stub("f" * 40)
    runner_env(stub)
    assert actions_runner.main(["--url", stub.url, "--checkout", str(root)]) == 1
    [posted] = stub.results
    assert "the job reviews ffffffffffff" in posted["failure"]


def test_without_id_token_permission_it_says_what_to_add(monkeypatch, tmp_path):
    monkeypatch.delenv("ACTIONS_ID_TOKEN_REQUEST_URL", raising=False)
    assert actions_runner.main(["--url", "http://tasuku.test", "--checkout", str(tmp_path)]) == 2


def test_a_refusal_is_not_retried(checkout, runner_env):
    root, head = checkout
    stub = Stub(head)
    runner_env(stub)
    stub.fail_next = {"/api/runner/job": [403]}
    assert actions_runner.main(["--url", stub.url, "--checkout", str(root)]) == 1
    assert len(stub.auth_seen) == 1 and not stub.results


# --- secondary repositories ---


class SecondaryStub(Stub):
    """Tasuku answering with a job that names secondary repositories, and (`given`) what
    it hands the runner beside the job to read each: a clone URL and a token."""

    def __init__(self, head_sha: str, secondaries: list, given: list) -> None:
        super().__init__(head_sha)
        self.secondaries, self.given = secondaries, given

    def job(self) -> dict:
        answer = super().job()
        job = ReviewJob.model_validate(answer["job"])
        answer["job"] = job.model_copy(update={"secondaries": tuple(self.secondaries)}).model_dump(
            mode="json"
        )
        answer["secondaries"] = self.given
        return answer


def test_the_runner_fetches_a_secondary_with_its_own_token_and_the_engine_never_sees_it(
    checkout, runner_env, monkeypatch, fake_github
):
    from repos import github
    from sandbox.contract import Secondary
    from tests.gitworld import SHARED, SHARED_INSTALLATION, SHARED_PINNED, shared_build

    root, head = checkout
    shared = shared_build(fake_github)
    token = github.gateway().contents_token(
        github.RepoRef(SHARED_INSTALLATION, shared.repo.id, SHARED), handed_out=True
    )
    pinned = Secondary(full_name=SHARED, commit=shared.pinned, path=f"secondary/{SHARED}")
    unreadable = Secondary(full_name="acme-libs/hidden", commit="c" * 40,
                           path="secondary/acme-libs/hidden")  # fmt: skip
    given = [{**pinned.model_dump(), "clone_url": f"{fake_github.url}/{SHARED}.git",
              "token": token, "api_url": fake_github.url}]  # fmt: skip
    stub = SecondaryStub(head, [pinned, unreadable], given)
    runner_env(stub)
    seen = {}

    def engine(engine_name, job, workspace):
        import os

        seen["env"] = dict(os.environ)
        seen["job"] = job.model_dump_json()
        tree = pinned.location(workspace)
        seen["money"] = (tree / "lib" / "money.py").read_text()
        seen["files"] = sorted(p.name for p in tree.iterdir())
        seen["writable"] = os.stat(tree / "lib" / "money.py").st_mode & 0o222
        return ReviewResult(engine=engine_name)

    monkeypatch.setattr(actions_runner, "engine_run", engine)
    assert actions_runner.main(["--url", stub.url, "--checkout", str(root)]) == 0
    assert seen["money"] == SHARED_PINNED
    assert seen["files"] == ["docs", "lib", "money"]  # sanitised: no AGENTS.md, no link out
    assert seen["writable"] == 0
    # The engine is told of the secondary it has, not of the one it could not get, and
    # nothing it is given or inherits holds the token, which is revoked before it runs.
    job = ReviewJob.model_validate_json(seen["job"])
    assert [s.full_name for s in job.secondaries] == [SHARED]
    assert token not in seen["job"] and token not in json.dumps(seen["env"])
    assert fake_github.revoked_tokens == [token]
    [posted] = stub.results
    assert token not in json.dumps(posted)
    [limitation] = posted["result"]["summary"]["limitations"]
    assert limitation == (
        "The secondary repository acme-libs/hidden was not mounted: Tasuku could not give "
        "the runner a way to read it."
    )


# --- a CLI engine's skills and connectors, on the runner ---


class CliStub(Stub):
    """Tasuku answering with a job for a CLI engine with a skill and a connector, and
    making each connector call the runner forwards (`/api/runner/connector`)."""

    def __init__(self, head_sha: str, engine: str) -> None:
        super().__init__(head_sha)
        self.engine = engine
        self.connector_calls: list[tuple[str, dict]] = []

    def job(self) -> dict:
        from sandbox.contract import ConnectorTool, Limits, SkillDocument

        answer = super().job()
        job = ReviewJob.model_validate(answer["job"]).model_copy(update={
            "model": "m-1", "limits": Limits(steps=6, deadline_seconds=90),
            "skill_documents": (SkillDocument(name="payments", description="Money",
                                              body="PAYMENTS-BODY"),),
            "connectors": (ConnectorTool(name="jira_ticket", input_schema={"type": "object"}),),
        })  # fmt: skip
        return answer | {"engine": self.engine, "job": job.model_dump(mode="json")}

    def _handler(self):
        base = super()._handler()
        stub = self

        class Handler(base):
            def do_POST(self) -> None:
                if self.path != "/api/runner/connector":
                    return super().do_POST()
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.connector_calls.append((self.headers["Authorization"], body))
                self._answer(200, {"status": "ok", "content": "PAY-3 is about refunds",
                                   "duration_ms": 5, "bytes": 22})  # fmt: skip

        return Handler


@pytest.mark.parametrize("cli, engine, key", [("claude", "claude-code", "ANTHROPIC_API_KEY"),
                                              ("codex", "codex", "OPENAI_API_KEY")])  # fmt: skip
def test_a_cli_engine_on_the_runner_loads_the_skill_and_its_connector_call_reaches_tasuku(
    checkout, runner_env, monkeypatch, tmp_path, cli, engine, key
):
    from sandbox.runners import local
    from tests.fakes.cli_agents import fake_cli_install, script_write

    root, head = checkout
    stub = CliStub(head, engine)
    runner_env(stub)
    seen_file = tmp_path / "seen.json"
    script = script_write(tmp_path / "script.json", seen=seen_file, skill="payments",
                          answer={"findings": [], "summary": {"confidence": 0.7}},
                          calls=[{"name": "jira_ticket", "input": {"key": "PAY-3"}}])  # fmt: skip
    bin_dir = fake_cli_install(tmp_path / "bin", cli, script)
    monkeypatch.setenv(key, "sk-runner")
    real = local.engine_run

    def with_fake_on_path(*args, allow_env=None, **kwargs):
        path = f"{bin_dir}:{local.scrubbed_environment('/tmp')['PATH']}"
        return real(*args, allow_env={**(allow_env or {}), "PATH": path}, **kwargs)

    monkeypatch.setattr(local, "engine_run", with_fake_on_path)
    assert actions_runner.main(["--url", stub.url, "--checkout", str(root)]) == 0

    seen = json.loads(seen_file.read_text())
    assert seen["skill_loaded"] == "Skill payments: Money\n\nPAYMENTS-BODY"
    [(auth, body)] = stub.connector_calls
    assert auth.startswith("Bearer jwt-") and body == {"name": "jira_ticket",
                                                       "input": {"key": "PAY-3"}}  # fmt: skip
    assert "PAY-3 is about refunds" in seen["calls"][0]["text"]
    # The OIDC request token never reaches the CLI, the server or a file in the CLI's home.
    given = json.dumps([seen["env"], seen["server_env"], seen["files"]])
    assert "request-token" not in given and "ACTIONS_ID_TOKEN" not in given
    [posted] = stub.results
    entries = [e for e in posted["result"]["transcript"] if e["kind"] == "connector"]
    assert [e["connector"]["status"] for e in entries] == ["ok"]
    assert posted["result"]["usage"]["connectors"] == {"calls": 1, "failures": 0}

"""The demo (`python -m tests.fakes.serve`, README "Try it without GitHub") as a newcomer
runs it: on free ports, its settings in the env file only while it runs (whatever stops
it), every run a pull request Tasuku has not seen, and the pull request's page on the fake
GitHub to look at. Tasuku is stood in for by a server that checks each delivery's
signature and answers as Tasuku's intake does."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

from tests.contract.webhooks import webhook_violations
from webhooks.signature import signature_valid

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.database_free


class StandIn:
    """Tasuku's webhook intake, as far as the demo can tell: signed deliveries
    accepted (the secret read from the env file the demo wrote), pings answered 200."""

    def __init__(self, env_file: Path) -> None:
        self.env_file = env_file
        self.deliveries: list[tuple[str, dict]] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                secret = re.search(r'GITHUB_WEBHOOK_SECRET="([^"]+)"', env_file.read_text())
                signed = secret and signature_valid(
                    secret.group(1), body, self.headers["X-Hub-Signature-256"]
                )
                event = self.headers["X-GitHub-Event"]
                if signed:  # stored before the answer, as Tasuku's intake does
                    stand_in.deliveries.append((event, json.loads(body)))
                self.send_response(401 if not signed else 200 if event == "ping" else 202)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def demo(env_file: Path, tasuku: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "tests.fakes.serve", "--env-file", str(env_file),
         "--tasuku", tasuku, *args],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
        # faulthandler: a demo that does not stop is made to print where each thread was.
        env={**{k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"},
             "PYTHONFAULTHANDLER": "1"},
    )  # fmt: skip


def stopped(process: subprocess.Popen, stop: int) -> str:
    """`stop` sent and the demo's standard error once it exited; one that has not exited
    within a minute is aborted (faulthandler prints its threads' stacks) and the test
    fails with them. (Its standard output is read as it comes: `Output`.)"""
    process.send_signal(stop)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        process.wait(timeout=30)
        err = process.stderr.read()
        raise AssertionError(f"the demo did not stop on signal {stop}:\n{err[-4000:]}") from None
    return process.stderr.read()


class Output:
    """The demo's standard output, read line by line as it comes."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self.waiting = threading.Event()  # it waits for Enter: everything sent
        self.reader = threading.Thread(target=self._read, args=(process.stdout,), daemon=True)
        self.reader.start()

    def text(self) -> str:
        """All of it, once the demo has exited."""
        self.reader.join(timeout=10)
        return "".join(self.lines)

    def _read(self, stream) -> None:  # type: ignore[no-untyped-def]
        for line in stream:
            self.lines.append(line)
            if line.startswith("Press Enter to push"):
                self.waiting.set()
        self.waiting.set()  # it exited


def run_once(env_file: Path, stop: int) -> tuple[str, str, str]:
    """One demo run until it has sent its pull request and waits for Enter, then `stop`
    sent: (the pull request's full name and number, its page's HTML, the demo's output)."""
    tasuku = StandIn(env_file)
    process = demo(env_file, tasuku.url)
    output = Output(process)
    try:
        assert output.waiting.wait(60) and process.poll() is None, "".join(output.lines) + (
            process.stderr.read() if process.poll() is not None else ""
        )
        assert "GITHUB_API_URL" in env_file.read_text()  # while it runs
        events = [event for event, _ in tasuku.deliveries]
        assert events == ["ping", "installation", "pull_request"]
        # What the demo sends is what GitHub sends: each held to its published schema,
        # as a test's own deliveries are (tests/helpers.py, `post_webhook`).
        for event, body in tasuku.deliveries:
            assert webhook_violations(event, body) == [], (event, webhook_violations(event, body))
        pull = tasuku.deliveries[-1][1]
        assert pull["action"] == "opened"
        page = requests.get(pull["pull_request"]["html_url"], timeout=10)
        assert page.status_code == 200 and "Add refunds" in page.text
        name = f"{pull['repository']['full_name']}#{pull['number']}"
        err = stopped(process, stop)
    finally:
        if process.poll() is None:
            process.kill()
        tasuku.close()
    assert process.returncode == 0, err
    return name, page.text, output.text()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_any_stop_takes_the_demos_settings_out_of_the_env_file(tmp_path, stop):
    env_file = tmp_path / ".env"
    env_file.write_text("SECRET_KEY=kept-as-it-was\n")
    run_once(env_file, stop)
    assert env_file.read_text() == "SECRET_KEY=kept-as-it-was\n"


def test_every_run_is_a_pull_request_tasuku_has_not_seen(tmp_path):
    env_file = tmp_path / ".env"
    first, _, said = run_once(env_file, signal.SIGTERM)
    assert "The pull request as GitHub would show it: http://127.0.0.1:" in said
    second, _, _ = run_once(env_file, signal.SIGTERM)
    # Another repository each run: new to Tasuku, so the default reviewers reach it.
    assert first.split("#")[0] != second.split("#")[0]
    assert not env_file.exists()  # nothing else was in it


def test_a_busy_port_is_said_in_a_line_and_nothing_is_written(tmp_path):
    env_file = tmp_path / ".env"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        process = demo(env_file, "http://127.0.0.1:9", "--port", str(port))
        out, err = process.communicate(timeout=60)
    assert process.returncode == 1
    assert err.strip() == (
        f"Cannot serve the fake GitHub on port {port} (Address already in use): leave --port "
        "out for any free port, or name another."
    )
    assert not env_file.exists()

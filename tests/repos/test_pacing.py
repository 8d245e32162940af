"""An installation's writes to GitHub: a few at once, then one a second; reads unpaced
(repos/github/pacing.py)."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import pytest

from repos import github
from repos.github import RepoRef
from repos.github.pacing import WritePacer
from tests.fakes.github import Pull

ROOT = Path(__file__).resolve().parents[2]
HEAD = "a" * 40


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_burst_goes_at_once_then_one_write_a_second():
    clock = Clock()
    pacer = WritePacer(burst=6, interval=1.0, clock=clock, sleep=clock.sleep)
    waits = [pacer.wait("inst") for _ in range(9)]
    assert waits[:6] == [0.0] * 6
    assert waits[6:] == [1.0, 1.0, 1.0]


def test_no_minute_ever_holds_more_than_the_burst_and_one_a_second():
    """GitHub allows 80 content-creating requests a minute: a stream of writes stays at
    burst + 60 in any window of 60 seconds."""
    clock = Clock()
    pacer = WritePacer(burst=6, interval=1.0, clock=clock, sleep=clock.sleep)
    sent = []
    for _ in range(300):
        pacer.wait("inst")
        sent.append(clock.now)
        clock.now += 0.05  # the write itself
    most = max(sum(1 for t in sent if start <= t < start + 60) for start in sent)
    assert most <= 6 + 60


def test_an_idle_installation_gets_its_burst_back_and_others_are_not_held_up():
    clock = Clock()
    pacer = WritePacer(burst=3, interval=1.0, clock=clock, sleep=clock.sleep)
    for _ in range(5):
        pacer.wait("busy")
    assert pacer.delay("other") == 0.0  # each installation has its own bucket
    clock.now += 10
    assert [pacer.wait("busy") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert pacer.wait("busy") == 1.0


def test_writers_waiting_at_once_go_one_after_another():
    pacer = WritePacer(burst=1, interval=0.1)
    delays: list[float] = []
    lock = threading.Lock()

    def take() -> None:
        seconds = pacer.delay("inst")
        with lock:
            delays.append(seconds)

    threads = [threading.Thread(target=take) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Each took its own place: 0, 0.1, 0.2, 0.3, 0.4 seconds out (give or take the clock).
    assert [round(d, 1) for d in sorted(delays)] == [0.0, 0.1, 0.2, 0.3, 0.4]


def test_no_interval_means_no_pacing():
    assert WritePacer(burst=1, interval=0).wait("inst") == 0.0


@pytest.fixture
def world(fake_github):
    fake_github.add_installation(11, "acme")
    repo = fake_github.add_repo("acme/widgets", installation_id=11, repo_id=501)
    fake_github.add_pull(
        "acme/widgets", Pull(number=5, title="Faster", head_sha=HEAD, base_sha="b" * 40)
    )
    return repo


@pytest.mark.django_db
def test_the_gateway_paces_an_installations_writes_but_not_its_reads(world, fake_github, settings):
    settings.GITHUB_SECONDS_BETWEEN_WRITES = "0.5"
    settings.GITHUB_WRITE_BURST = "2"
    gateway = github.gateway()
    where = RepoRef(installation_id=11, repository_id=501, full_name="acme/widgets")
    gateway.pull_request_get(where, number=5)  # the token minted: the writes wait for nothing else
    run = gateway.check_run_create(
        where, name="Tasuku · static", head_sha=HEAD, external_id="1", details_url="http://t/1"
    )
    for status in ("in_progress", "in_progress", "in_progress"):
        gateway.check_run_update(where, check_run_id=run.id, status=status)
    for _ in range(3):
        gateway.pull_request_get(where, number=5)

    writes = [
        c.at
        for c in fake_github.requests()
        if c.method in ("POST", "PATCH") and "/check-runs" in c.path
    ]
    reads = [c.at for c in fake_github.requests("GET", r"/pulls/5$")]
    assert len(writes) == 4 and len(reads) == 4
    # (When each arrived.) Two at once, then one every 0.5 s; the reads right after the
    # last write, none waiting its turn: paced, the third would come 1.5 s after it. (The
    # bound was 0.3 s, which three round trips on a busy machine overran once in CI.)
    assert writes[1] - writes[0] < 0.45  # paced, 0.5 s and its round trip
    assert writes[3] - writes[0] >= 0.9
    assert writes[3] - writes[2] >= 0.4
    assert reads[-1] - writes[-1] < 1.0


def _keywords(call: ast.Call) -> dict[str, ast.expr]:
    return {k.arg: k.value for k in call.keywords if k.arg}


def test_every_call_that_changes_something_on_github_is_paced():
    """A `_repo_call` whose function sends a POST, PATCH, PUT or DELETE, creates through
    PyGithub or runs a GraphQL mutation says so (`write=True` or `creates=True`)."""
    changing = ('"POST"', '"PATCH"', '"PUT"', '"DELETE"', ".create_", ".edit(", "MUTATION")
    unpaced = []
    for path in sorted((ROOT / "repos" / "github").glob("*.py")):
        source = path.read_text()
        tree = ast.parse(source)
        for outer in ast.walk(tree):
            if not isinstance(outer, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            inner = {
                node.name: ast.get_source_segment(source, node) or ""
                for node in ast.walk(outer)
                if isinstance(node, ast.FunctionDef) and node is not outer
            }
            for node in ast.walk(outer):
                if not (
                    isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "_repo_call"
                ):
                    continue
                keywords = _keywords(node)
                fn = keywords.get("fn")
                body = inner.get(fn.id, "") if isinstance(fn, ast.Name) else ""
                paced = any(
                    isinstance(keywords.get(k), ast.Constant) and keywords[k].value is True
                    for k in ("write", "creates")
                )
                if any(sign in body for sign in changing) and not paced:
                    unpaced.append(f"{path.name}: {outer.name}")
    assert not unpaced, unpaced

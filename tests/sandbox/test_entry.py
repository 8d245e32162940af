"""A sandboxed program (sandbox/entry.py) imports its engine with the garbage collector
off, then freezes what it imported and runs the job with the collector on
(sandbox/loading.py)."""

from __future__ import annotations

import gc
import io

import pytest
from pydantic import BaseModel

from sandbox.entry import Program


class Job(BaseModel):
    n: int


class Result(BaseModel):
    doubled: int


@pytest.fixture
def collector():
    was = gc.isenabled()
    yield
    gc.enable() if was else gc.disable()


def test_the_engine_is_imported_with_the_collector_off_and_runs_with_it_on(
    collector, monkeypatch, capsys, tmp_path
):
    seen = {}
    frozen = gc.get_freeze_count()

    def start(engine: str):
        seen["loading"] = gc.isenabled()
        seen["imported"] = [[engine] for _ in range(500)]  # what an import keeps

        def handler(job: Job, checkout) -> Result:
            seen["running"] = gc.isenabled()
            return Result(doubled=job.n * 2)

        return handler

    monkeypatch.setattr("sys.stdin", io.StringIO('{"n": 21}'))
    monkeypatch.chdir(tmp_path)
    program = Program("run_test", ("static",), Job, start)
    assert program.main(["run_test", "static"]) == 0
    assert capsys.readouterr().out == '{"doubled":42}'
    assert seen["loading"] is False
    assert seen["running"] is True and gc.isenabled()
    assert gc.get_freeze_count() >= frozen + len(seen["imported"])


def test_an_engine_that_fails_to_import_leaves_the_collector_on(collector, monkeypatch):
    def start(engine: str):
        raise ImportError("no module named 'anthropic'")

    monkeypatch.setattr("sys.stdin", io.StringIO('{"n": 1}'))
    with pytest.raises(ImportError):
        Program("run_test", ("static",), Job, start).main(["run_test", "static"])
    assert gc.isenabled()

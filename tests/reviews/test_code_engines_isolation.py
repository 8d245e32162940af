"""Engines that execute code (the claude-code and codex CLIs) never run beside the
worker's secrets: refused on the `local` runner, in the admin and at run time, unless the
operator accepts the risk by name."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from repos.models import Reviewer
from repos.policy import ReviewerConfig
from reviews.engines import boundary as engines
from sandbox.contract import ReviewJob
from sandbox.errors import SandboxError

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("engine", ["claude-code", "codex"])
def test_a_cli_engine_on_the_local_runner_is_a_configuration_error(engine, settings):
    reviewer = Reviewer(slug="agent", engine=engine, model="m", runner="local")
    with pytest.raises(ValidationError) as refused:
        reviewer.full_clean()
    assert "does not isolate it from the worker's secrets" in str(refused.value)
    assert "docker runner" in str(refused.value)
    Reviewer(slug="agent2", engine=engine, model="m", runner="docker").full_clean()
    settings.TASUKU_ALLOW_CODE_ON_LOCAL_RUNNER = True
    reviewer.full_clean()  # the operator accepted the risk by name


@pytest.mark.parametrize("engine", ["claude-code", "codex"])
def test_a_cli_engine_moved_onto_the_local_runner_is_refused_at_run_time(
    engine, tmp_path, monkeypatch
):
    """A repository's policy can override a reviewer's runner: the run refuses too."""
    started = []
    monkeypatch.setattr("sandbox.runners.local.engine_run", lambda *a, **kw: started.append(1))
    row = Reviewer(slug="agent", engine=engine, model="m", runner="docker")
    config = ReviewerConfig(slug="agent", engine=engine, model="m", runner="local")
    job = ReviewJob(job_id="1", repository="a/b", pull_request=1, base_sha="a" * 40,
                    head_sha="b" * 40)  # fmt: skip
    with pytest.raises(SandboxError) as refused:
        engines.engine_run(row, config, job, tmp_path, run_name="r")
    assert refused.value.permanent and "TASUKU_ALLOW_CODE_ON_LOCAL_RUNNER" in str(refused.value)
    assert not started


def test_the_api_engines_and_static_still_run_locally(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr("sandbox.runners.local.engine_run", lambda *a, **kw: started.append(a[0]))
    job = ReviewJob(job_id="1", repository="a/b", pull_request=1, base_sha="a" * 40,
                    head_sha="b" * 40)  # fmt: skip
    for engine, model in (("static", ""), ("anthropic", "claude-sonnet-5-5")):
        row = Reviewer(slug=engine, engine=engine, model=model, runner="local")
        config = ReviewerConfig(slug=engine, engine=engine, model=model, runner="local")
        engines.engine_run(row, config, job, tmp_path, run_name="r")
    assert started == ["static", "anthropic"]

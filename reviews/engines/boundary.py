"""The worker's side of the sandbox boundary: what an engine is given (its one key, its
server, its model's price, the earlier findings to rule on), which runner runs it, and
triage by the reviewer's fast model.

The engine receives only what its provider needs: the static engine nothing, the
Anthropic engines ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL), the OpenAI engines
OPENAI_API_KEY (and OPENAI_BASE_URL). Never a GitHub credential, never a connector's:
a reviewer with connectors gets the socket of a bridge back to this worker and the
run's token for it (sandbox/connectors.py), and the worker makes each call
(reviews/engines/connectors.py).
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable
from functools import cache
from importlib import metadata
from pathlib import Path

from django.conf import settings

from repos.credentials import KeyUnreadable
from repos.models import Reviewer
from repos.policy import CODE_ENGINES, LOCAL_CODE_REFUSED, ReviewerConfig, Runner
from reviews.engines.connectors import RunConnectors
from reviews.models import Finding
from sandbox.checks import memory_bytes
from sandbox.connectors import ConnectorBridge
from sandbox.contract import (
    ConnectorTool,
    EarlierFinding,
    Explorers,
    Price,
    ReviewJob,
    ReviewResult,
    Severity,
    WebResearch,
)
from sandbox.engines import PROVIDERS, REGISTRY
from sandbox.engines.static.common import default_checker_megabytes
from sandbox.errors import ProviderError, SandboxError
from sandbox.prices import price_for, prices_parse
from sandbox.runners import docker as docker_runner
from sandbox.runners import local as local_runner

# Runners that review elsewhere: the pipeline hands them the job and stops; the result
# is posted back and the run goes on from it. The runner's package sits above this module
# and registers its dispatcher from `ready()` (reviews/apps.py).
DISPATCHERS: dict[str, Callable[..., str]] = {}


def dispatcher_register(runner: str, dispatch: Callable[..., str]) -> None:
    DISPATCHERS[runner] = dispatch


def dispatcher_for(runner: str) -> Callable[..., str] | None:
    return DISPATCHERS.get(runner)


@cache
def running_version() -> str:
    """Tasuku's installed version, read at the process's first review and kept: the code
    a process runs does not change when a newer version is installed beside it later
    (reading the installed packages' metadata at every review cost milliseconds each)."""
    try:
        return metadata.version("tasuku")
    except metadata.PackageNotFoundError:  # a checkout that was never installed
        return "unknown"


def job_digest(job: ReviewJob, reviewer: Reviewer, *, revision: str = "") -> str:
    """What identifies the engine's work: everything the engine is given but the job's
    id and the earlier findings (those come from the review whose result a same-head
    re-review would reuse), with the reviewer's engine and runner, the revision of its
    definition (`revision`: what of it the job does not carry, such as the base URL,
    counts too) and Tasuku's version. Two jobs with one digest get the same review from the engine."""
    given = job.model_dump_json(exclude={"job_id", "earlier_findings"})
    text = f"{running_version()}\0{reviewer.engine}\0{reviewer.runner}\0{revision}\0{given}"
    return hashlib.sha256(text.encode()).hexdigest()


def model_price(model: str) -> Price | None:
    return price_for(model, prices_parse(settings.TASUKU_MODEL_PRICES)) if model else None


# At most this many explorers at once, whatever a reviewer's limit for the whole review.
EXPLORERS_AT_ONCE = 4


def explorers_for(config: ReviewerConfig) -> Explorers | None:
    """The explorers a reviewer may send (None: no explorer model, or an engine that
    does not run Tasuku's tools)."""
    if not config.explorer_model or not REGISTRY[config.engine].tasuku_tools:
        return None
    return Explorers(
        model=config.explorer_model,
        price=model_price(config.explorer_model),
        per_call=min(EXPLORERS_AT_ONCE, config.explorer_limit),
        per_review=config.explorer_limit,
    )


def web_research_for(config: ReviewerConfig) -> WebResearch | None:
    """Web research, when the reviewer allows it and can do it: an engine running
    Tasuku's tools, on a runner with a way out. The docker runner's engine reaches only
    the model API (the admin refuses the combination; a repository's policy moving the
    reviewer onto docker turns it off here)."""
    if not config.web_research or not REGISTRY[config.engine].tasuku_tools:
        return None
    if Runner(config.runner) == Runner.DOCKER:
        return None
    return WebResearch(
        provider=settings.TASUKU_WEB_PROVIDER, search_url=settings.TASUKU_WEB_SEARCH_URL
    )


def connectors_for(config: ReviewerConfig) -> tuple[ConnectorTool, ...]:
    """The connectors a job offers: the reviewer's, for a model engine (the API engines
    as their own tools, the CLI engines through a local MCP server); the static engine
    calls none."""
    if not REGISTRY[config.engine].connectors:
        return ()
    return config.connectors


def engine_environment(reviewer: Reviewer) -> dict[str, str]:
    """The provider key and server for `reviewer`'s engine: the reviewer's own, else
    the site's (settings). Empty for the static engine."""
    provider = reviewer.provider
    if not provider:
        return {}
    key_name, url_name = PROVIDERS[provider].variables
    try:
        key = reviewer.api_key() or getattr(settings, key_name)
    except KeyUnreadable as exc:
        raise ProviderError(str(exc), permanent=True, code="provider-key-unreadable") from exc
    url = reviewer.base_url or getattr(settings, url_name)
    env = {}
    if key:
        env[key_name] = key
    if url:
        env[url_name] = url
    return env


def earlier_for_job(
    earlier: list[Finding],
    answers: dict[str, str] | None = None,
    rulings: dict[str, str] | None = None,
) -> tuple[EarlierFinding, ...]:
    """The earlier open findings, for the engine to rule on (id = fingerprint), with the
    author's answer to each and the reviewer's previous ruling in a review pass."""
    answers = answers or {}
    rulings = rulings or {}
    return tuple(
        EarlierFinding(
            id=f.fingerprint,
            path=f.path,
            start_line=max(f.start_line, 1),
            end_line=max(f.end_line, f.start_line, 1),
            severity=Severity(f.severity),
            category=f.category,
            title=f.title[:200],
            body=f.body[:2000],
            answer=answers.get(f.fingerprint, "")[:4000],
            ruling=rulings.get(f.fingerprint, "")[:4000],
        )
        for f in earlier
    )


def engine_run(
    reviewer: Reviewer,
    config: ReviewerConfig,
    job: ReviewJob,
    root: Path,
    *,
    run_name: str,
    connectors: RunConnectors | None = None,
) -> ReviewResult:
    """Run the reviewer's engine on the checkout with its runner. `connectors`: the
    run's connector calls, when its job offers connectors: a bridge is opened beside the
    checkout for the engine's calls, and closed (the calls recorded) when it ends."""
    if not job.connectors or connectors is None:
        return _engine_run(reviewer, config, job, root, run_name=run_name)
    bridge = ConnectorBridge(
        connectors.handle, directory=root.resolve().parent, live=connectors.live
    )
    try:
        with bridge:
            return _engine_run(reviewer, config, job, root, run_name=run_name, bridge=bridge)
    finally:
        connectors.save()


def _engine_run(
    reviewer: Reviewer,
    config: ReviewerConfig,
    job: ReviewJob,
    root: Path,
    *,
    run_name: str,
    bridge: ConnectorBridge | None = None,
) -> ReviewResult:
    seconds = int(settings.TASUKU_SANDBOX_TIMEOUT)
    env = engine_environment(reviewer)
    runner = Runner(config.runner)
    if (
        runner == Runner.LOCAL
        and config.engine in CODE_ENGINES
        and not settings.TASUKU_ALLOW_CODE_ON_LOCAL_RUNNER
    ):
        # Also when a repository's policy moved the reviewer onto the local runner.
        raise SandboxError(
            LOCAL_CODE_REFUSED.format(engine=config.engine), permanent=True, code="runner-refused"
        )
    if runner == Runner.LOCAL:
        return local_runner.engine_run(
            config.engine,
            job,
            root,
            limits=local_runner.Limits(wall_seconds=seconds, cpu_seconds=seconds),
            allow_env=env,
            name=run_name,
            **({"connectors": bridge} if bridge is not None else {}),
        )
    if runner == Runner.DOCKER:
        return docker_engine_run(
            config, job, root, env=env, seconds=seconds, name=run_name, bridge=bridge
        )
    raise SandboxError(
        f"The {runner.value} runner is not available.", permanent=True, code="runner-unavailable"
    )


def engine_stop(config: ReviewerConfig, run_name: str) -> bool:
    """Stop the engine running `run_name` on this worker's runner (a cancelled run).
    Whether one was running; a runner elsewhere is not stopped from here."""
    runner = Runner(config.runner)
    if runner == Runner.LOCAL:
        return local_runner.engine_stop(run_name)
    if runner == Runner.DOCKER:
        return docker_runner.engine_stop(run_name)
    return False


def docker_engine_run(
    config: ReviewerConfig,
    job: ReviewJob,
    root: Path,
    *,
    env: dict,
    seconds: int,
    name: str,
    bridge: ConnectorBridge | None = None,
) -> ReviewResult:
    limits = docker_runner.DockerLimits(
        wall_seconds=seconds,
        grace_seconds=settings.TASUKU_DOCKER_GRACE_SECONDS,
        memory_bytes=memory_bytes(settings.TASUKU_DOCKER_MEMORY) or 4 * 1024**3,
        cpus=float(settings.TASUKU_DOCKER_CPUS),
        pids=int(settings.TASUKU_DOCKER_PIDS),
    )
    # Model engines reach their API through the operator's egress network and proxy; the
    # static engine gets no network at all.
    model_engine = REGISTRY[config.engine].model_engine
    if not model_engine:
        env = {
            **env,
            "TASUKU_STATIC_CHECKER_MEMORY_MB": str(checker_megabytes(limits.memory_bytes)),
        }
    return docker_runner.engine_run(
        config.engine,
        job,
        root,
        limits=limits,
        image=settings.TASUKU_DOCKER_IMAGE,
        name=name,
        allow_env=env,
        network=(settings.TASUKU_DOCKER_NETWORK or None) if model_engine else None,
        proxy=(settings.TASUKU_DOCKER_PROXY or None) if model_engine else None,
        **({"connectors": bridge} if bridge is not None else {}),
    )


def checker_megabytes(container_bytes: int) -> int:
    """The static engine's checker limit in a container: TASUKU_STATIC_CHECKER_MEMORY_MB,
    but at most three quarters of the container's memory, so that a checker that needs
    more fails its own allocation (the review is partial) before the container's memory
    limit kills the engine with every other checker's findings."""
    raw = str(settings.TASUKU_STATIC_CHECKER_MEMORY_MB).strip()
    wanted = int(raw) if raw.isdigit() and int(raw) > 0 else default_checker_megabytes()
    return max(1, min(wanted, container_bytes * 3 // 4 // (1024 * 1024)))


def conversation_for(engine: str):
    """The API conversation a model triage uses for `engine`'s provider."""
    # A provider's SDK is loaded by the first triage that needs it, not by every process.
    facts = REGISTRY.get(engine)
    if facts is None or facts.provider is None:
        return None
    module, name = facts.provider.conversation.split(":")
    return getattr(importlib.import_module(module), name)

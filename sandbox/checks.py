"""System check: the time limits must nest, or work is killed or run twice.

The sandbox's wall-clock limit < the worker's task timeout (Q_CLUSTER["timeout"], after
which django-q2 kills the worker) < the broker's redelivery time (Q_CLUSTER["retry"],
after which an unacknowledged task is handed out again); and a run's heartbeat comes
sooner than its lease ends.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from django.conf import settings
from django.core.checks import Error, register

from sandbox.prices import PriceTableError, prices_parse
from sandbox.workspace import workspace_root_problem


@register("tasuku")
def time_limits_check(app_configs: object = None, **kwargs: object) -> list:
    errors = []
    raw = {
        "TASUKU_SANDBOX_TIMEOUT": settings.TASUKU_SANDBOX_TIMEOUT,
        "Q_TIMEOUT": settings.Q_TIMEOUT,
        "Q_RETRY": settings.Q_RETRY,
        "TASUKU_WORKERS": settings.TASUKU_WORKERS,
    }
    for variable, value in raw.items():
        if not str(value).strip().isdigit() or int(value) <= 0:
            errors.append(
                Error(
                    f"{variable} must be a positive whole number of "
                    f"{'workers' if variable == 'TASUKU_WORKERS' else 'seconds'}, "
                    f"not {value!r}.",
                    id="tasuku.E010",
                )
            )
    if errors:
        return errors
    # The docker runner lets a container run its grace period past the sandbox's timer.
    sandbox = int(settings.TASUKU_SANDBOX_TIMEOUT) + settings.TASUKU_DOCKER_GRACE_SECONDS
    timeout = settings.Q_CLUSTER.get("timeout")
    retry = settings.Q_CLUSTER.get("retry")
    if not timeout or not retry or not (sandbox < timeout < retry):
        errors.append(
            Error(
                "Time limits out of order: need TASUKU_SANDBOX_TIMEOUT "
                f"({settings.TASUKU_SANDBOX_TIMEOUT}) + {settings.TASUKU_DOCKER_GRACE_SECONDS} s "
                f"< Q_TIMEOUT ({timeout}) < Q_RETRY ({retry}).",
                hint=(
                    "A sandbox outliving the worker's timeout is killed mid-review; a "
                    "timeout past the retry time makes the broker hand the task out twice."
                ),
                id="tasuku.E011",
            )
        )
    lease, beat = settings.TASUKU_RUN_LEASE_SECONDS, settings.TASUKU_RUN_HEARTBEAT_SECONDS
    if not beat < lease:
        errors.append(
            Error(
                f"Run leases out of order: need TASUKU_RUN_HEARTBEAT_SECONDS ({beat}) "
                f"< TASUKU_RUN_LEASE_SECONDS ({lease}).",
                hint="A lease that ends before its renewal hands a healthy worker's run to "
                "another: the run executes twice. Twice the heartbeat or more is safe.",
                id="tasuku.E012",
            )
        )
    return errors


@register("tasuku")
def model_prices_check(app_configs: object = None, **kwargs: object) -> list:
    try:
        prices_parse(settings.TASUKU_MODEL_PRICES)
    except PriceTableError as exc:
        return [
            Error(
                f"TASUKU_MODEL_PRICES is malformed: {exc}.",
                hint='Example: {"my-model": [0.5, 1.5], "other": {"input": 3, "output": 15}}',
                id="tasuku.E020",
            )
        ]
    return []


@register("tasuku")
def web_provider_check(app_configs: object = None, **kwargs: object) -> list:
    """The web research provider must import and have `search` and `fetch`, or every
    review of a reviewer with web research on would fail in its engine."""
    import importlib

    path = settings.TASUKU_WEB_PROVIDER
    module, _, name = path.rpartition(":" if ":" in path else ".")
    try:
        provider = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        problem = f"cannot be imported ({exc})"
    else:
        if callable(getattr(provider, "search", None)) and callable(
            getattr(provider, "fetch", None)
        ):
            return []
        problem = "has no search(query) and fetch(url)"
    return [
        Error(
            f"TASUKU_WEB_PROVIDER {path!r} {problem}.",
            hint="Name a class as module:Class; the default is sandbox.agent.tools.web:HttpWeb.",
            id="tasuku.E021",
        )
    ]


def memory_bytes(text: str) -> int | None:
    """ "4g", "512m", "1073741824" as bytes; None when malformed."""
    value = text.strip().lower()
    units = {"k": 1024, "m": 1024**2, "g": 1024**3}
    factor = units.get(value[-1:], 1) if value else 1
    number = value[:-1] if value[-1:] in units else value
    try:
        result = int(float(number) * factor)
    except ValueError:
        return None
    return result if result > 0 else None


@register("tasuku")
def docker_settings_check(app_configs: object = None, **kwargs: object) -> list:
    errors = []
    if memory_bytes(settings.TASUKU_DOCKER_MEMORY) is None:
        errors.append(
            Error(
                f"TASUKU_DOCKER_MEMORY must be a size such as 4g or 512m, not "
                f"{settings.TASUKU_DOCKER_MEMORY!r}.",
                id="tasuku.E030",
            )
        )
    try:
        cpus_ok = float(settings.TASUKU_DOCKER_CPUS) > 0
    except ValueError:
        cpus_ok = False
    if not cpus_ok:
        errors.append(
            Error(
                f"TASUKU_DOCKER_CPUS must be a positive number, not "
                f"{settings.TASUKU_DOCKER_CPUS!r}.",
                id="tasuku.E031",
            )
        )
    if (
        not str(settings.TASUKU_DOCKER_PIDS).strip().isdigit()
        or int(settings.TASUKU_DOCKER_PIDS) < 16
    ):
        errors.append(
            Error(
                f"TASUKU_DOCKER_PIDS must be a whole number of at least 16, not "
                f"{settings.TASUKU_DOCKER_PIDS!r}.",
                id="tasuku.E032",
            )
        )
    if settings.TASUKU_DOCKER_PROXY and not settings.TASUKU_DOCKER_NETWORK:
        errors.append(
            Error(
                "TASUKU_DOCKER_PROXY needs TASUKU_DOCKER_NETWORK (the internal network "
                "the proxy joins).",
                id="tasuku.E033",
            )
        )
    return errors


def workspace_problems() -> list[str]:
    """What keeps this host from checking out a review: the workspace root (or the
    temporary folder, when none is set) missing, unwritable or nearly full, and the
    checkout cache's disk nearly full. For `manage.py check` and /healthz."""
    minimum = settings.TASUKU_WORKSPACE_MIN_FREE_MB * 1_000_000
    root = Path(settings.TASUKU_WORKSPACE_ROOT or tempfile.gettempdir())
    problems = []
    problem = workspace_root_problem(root, minimum)
    if problem:
        problems.append(f"workspace root (TASUKU_WORKSPACE_ROOT): {problem}")
    cache = settings.TASUKU_CHECKOUT_CACHE
    if cache and cache.lower() != "off":
        # Made when first used: what is checked is the folder it is (or will be) in.
        folder = Path(cache)
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        if folder.resolve() != root.resolve():
            problem = workspace_root_problem(folder, minimum)
            if problem:
                problems.append(f"checkout cache (TASUKU_CHECKOUT_CACHE): {problem}")
    return problems


@register("tasuku")
def workspace_root_check(app_configs: object = None, **kwargs: object) -> list:
    """Every review is checked out under the workspace root: one that is missing,
    unwritable or nearly full fails (or cuts short) every review."""
    return [
        Error(
            problem + ".",
            hint="Reviews check out pull requests there; each would fail at its checkout.",
            id="tasuku.E022",
        )
        for problem in workspace_problems()
    ]

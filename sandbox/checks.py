"""System check: the time limits must nest, or work is killed or run twice.

The sandbox's wall-clock limit < the worker's task timeout (Q_CLUSTER["timeout"], after
which django-q2 kills the worker) < the broker's redelivery time (Q_CLUSTER["retry"],
after which an unacknowledged task is handed out again).
"""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, register


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
    sandbox = int(settings.TASUKU_SANDBOX_TIMEOUT)
    timeout = settings.Q_CLUSTER.get("timeout")
    retry = settings.Q_CLUSTER.get("retry")
    if not timeout or not retry or not (sandbox < timeout < retry):
        errors.append(
            Error(
                "Time limits out of order: need TASUKU_SANDBOX_TIMEOUT "
                f"({sandbox}) < Q_TIMEOUT ({timeout}) < Q_RETRY ({retry}).",
                hint=(
                    "A sandbox outliving the worker's timeout is killed mid-review; a "
                    "timeout past the retry time makes the broker hand the task out twice."
                ),
                id="tasuku.E011",
            )
        )
    return errors


@register("tasuku")
def model_prices_check(app_configs: object = None, **kwargs: object) -> list:
    from sandbox.prices import PriceTableError, prices_parse

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

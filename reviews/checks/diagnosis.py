"""What a failed run's error means, and what the operator can do about it.

A failure is known by its error's code, recorded with the failed run and its attempts
(`ReviewRun.error_code`, `RunAttempt.error_code`); the table of codes — each one's
stages, cause and fix — is tasuku/errors.py. The workflow diagnostics page groups
failures by code, so an error's wording can change without changing the advice.
"""

from __future__ import annotations

from tasuku.errors import CODES, UNKNOWN, Advice, advice_for

__all__ = ["STAGES", "STAGE_MEANING", "UNKNOWN", "Advice", "diagnose", "known_causes"]

STAGES = ("admission", "clone", "sandbox", "provider", "validation", "publication")

STAGE_MEANING = {
    "admission": "before the review started: reading the pull request, the guards, the check run",
    "clone": "checking out the pull request's head in a workspace",
    "sandbox": "running the reviewer's engine in the sandbox",
    "provider": "the model provider's API",
    "validation": "checking what the engine returned",
    "publication": "posting the review, replies and the check run on GitHub",
    "": "the worker stopped or the run ran out of time before a stage was recorded",
}


def diagnose(code: str) -> Advice:
    """What the failure with this error code most likely means; `UNKNOWN` for an empty
    code (a failure recorded before codes were) or one the table does not know."""
    return advice_for(code)


def known_causes(stage: str) -> list[Advice]:
    """Every cause the table knows for `stage` (for the page's "common causes" list)."""
    return [cause.advice for cause in CODES.values() if not cause.stages or stage in cause.stages]

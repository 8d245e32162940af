"""Errors that say where a review failed (its stage) and whether trying again can help."""

from __future__ import annotations


class StageError(Exception):
    stage = "sandbox"

    def __init__(self, message: str, *, permanent: bool, stage: str | None = None) -> None:
        super().__init__(message)
        self.permanent = permanent
        if stage:
            self.stage = stage


class CloneError(StageError):
    stage = "clone"


class SandboxError(StageError):
    stage = "sandbox"


class ProviderError(StageError):
    stage = "provider"

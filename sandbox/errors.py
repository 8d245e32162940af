"""Errors that say where a review failed (its stage), what failed (its code: tasuku/errors.py
says what each means) and whether trying again can help.

The sandbox imports nothing of the rest of Tasuku (the engine image holds this package
alone): a code is a plain string here, and the tests check every code raised against
the table."""

from __future__ import annotations


class StageError(Exception):
    stage = "sandbox"
    default_code = "stage-error"

    def __init__(
        self, message: str, *, permanent: bool, stage: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.permanent = permanent
        self._code = code
        if stage:
            self.stage = stage

    @property
    def code(self) -> str:
        """The code it was raised with; else the code of the error it wraps (`raise … from
        exc`); else its class's."""
        if self._code:
            return self._code
        cause = self.__cause__
        wrapped = getattr(cause, "code", None) if hasattr(cause, "permanent") else None
        return wrapped if isinstance(wrapped, str) and wrapped else self.default_code


class CloneError(StageError):
    stage = "clone"
    default_code = "clone-failed"


class SandboxError(StageError):
    stage = "sandbox"
    default_code = "sandbox-error"


class ProviderError(StageError):
    stage = "provider"
    default_code = "provider-error"

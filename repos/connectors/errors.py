"""Why a connector call has no answer, in words the model reads (never the credential,
never the endpoint's secrets)."""

from __future__ import annotations


class Refused(Exception):
    """Tasuku would not make the call: the input, the connector, the reviewer's
    permission, the run."""


class Failed(Exception):
    """The call was made and went wrong: the system failed, was too slow, answered too
    much. `read`: the bytes read before it was cut off."""

    def __init__(self, message: str, *, read: int = 0) -> None:
        super().__init__(message)
        self.read = read

"""The contract between Tasuku and its reviewer engines (versioned, pure pydantic).

A runner on another machine speaks this contract too, so this module imports nothing
from Django and nothing from the rest of Tasuku.
"""

from __future__ import annotations

from enum import StrEnum

CONTRACT_VERSION = "1"


class Severity(StrEnum):
    """How bad a finding is, ordered: info < low < medium < high < critical."""

    INFO = "info"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return _SEVERITY_RANK[self]

    def at_least(self, other: Severity) -> bool:
        return self.rank >= other.rank


_SEVERITY_RANK = {severity: rank for rank, severity in enumerate(Severity)}

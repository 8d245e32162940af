"""What the dashboard's search box was given: `owner/repo#12`, `owner/repo 12`,
`owner/repo/pull/12`, a pull request's GitHub URL, or just `owner/repo`. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = r"[A-Za-z0-9_.-]+"
_PATTERN = re.compile(
    rf"^(?:https?://[^/\s]+/)?(?P<owner>{_NAME})/(?P<repo>{_NAME})"
    r"(?:(?:\s*#\s*|\s+|/pulls?/)(?P<number>\d{1,9}))?/?(?:[/?#].*)?$"
)


@dataclass(frozen=True)
class Query:
    full_name: str
    number: int | None

    def __str__(self) -> str:
        return f"{self.full_name}#{self.number}" if self.number else self.full_name


def search_parse(text: str) -> Query | None:
    """The repository (and pull request number) the text names, or None."""
    found = _PATTERN.match(text.strip())
    if not found:
        return None
    number = int(found["number"]) if found["number"] else None
    return Query(f"{found['owner']}/{found['repo']}", number or None)

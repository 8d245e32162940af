"""What names a pull request (or a repository) in text a person typed: `owner/repo#12`
(spaces around `#` allowed), `owner/repo 12`, `owner/repo/pull/12`, a pull request's URL
(`https://github.com/owner/repo/pull/12`, with `/files`, a query or an anchor after it),
or a repository alone: `owner/repo`, or its URL. Pure: no database, no settings."""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = r"[A-Za-z0-9_.-]+"
# A number of at most nine digits fits every database's integer column.
_NUMBER = r"\d{1,9}"
_PATTERN = re.compile(
    rf"(?:https?://[^/\s]+/)?(?P<owner>{_NAME})/(?P<repo>{_NAME})"
    r"(?:"
    rf"[ \t]*#[ \t]*(?P<hash>{_NUMBER})"
    rf"|[ \t]+(?P<spaced>{_NUMBER})"
    rf"|/pulls?/(?P<path>{_NUMBER})(?:[/?#]\S*)?"
    r"|/"
    r")?"
)


@dataclass(frozen=True)
class Ref:
    """A repository's full name and, when the text named one, a pull request's number
    (always positive; None when the text named the repository alone)."""

    full_name: str
    number: int | None = None

    def __str__(self) -> str:
        return f"{self.full_name}#{self.number}" if self.number else self.full_name


def ref_parse(text: str | None) -> Ref | None:
    """The repository and pull request number `text` names, or None when it names
    neither (or names a pull request number that is not positive)."""
    found = _PATTERN.fullmatch((text or "").strip())
    if found is None:
        return None
    owner, repo = found["owner"], found["repo"]
    if {owner, repo} & {".", ".."}:
        return None
    digits = found["hash"] or found["spaced"] or found["path"]
    number = int(digits) if digits else None
    if number == 0:
        return None
    return Ref(f"{owner}/{repo}", number)

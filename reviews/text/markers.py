"""Tasuku's hidden markers: how it recognises its own posts on GitHub again.

A marker is an HTML comment at the very end of a post Tasuku wrote: what it marks (a
review of run N, a finding's fingerprint, a reply) and a signature, an HMAC of that with
a key derived from the site's SECRET_KEY. Run ids are sequential and fingerprints can be
predicted, so without the signature anyone could write the marker of a post Tasuku has
not made yet and stop it being made. Markers are trusted only on posts by Tasuku's own
bot user, and only with a valid signature; a copy anywhere else is text.

Keys in SECRET_KEY_FALLBACKS still verify, so rotating SECRET_KEY does not make Tasuku
post its comments again.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Iterable

from django.conf import settings
from django.utils.crypto import salted_hmac

SALT = "tasuku.markers"
SIGNATURE_HEX = 20
MARKER_RE = re.compile(r"<!-- tasuku:([a-z-]+):([A-Za-z0-9._:-]{1,160}):([0-9a-f]{20}) -->\s*\Z")


def _signature(kind: str, value: str, secret: str | bytes) -> str:
    return salted_hmac(SALT, f"{kind}:{value}", secret=secret, algorithm="sha256").hexdigest()[
        :SIGNATURE_HEX
    ]


def marker(kind: str, value: str | int) -> str:
    """The signed marker for `kind` (finding, review, reconcile, answer, command) and
    `value`."""
    value = str(value)
    return f"<!-- tasuku:{kind}:{value}:{_signature(kind, value, settings.SECRET_KEY)} -->"


def _valid(kind: str, value: str, signature: str) -> bool:
    secrets = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return any(hmac.compare_digest(signature, _signature(kind, value, s)) for s in secrets)


def marker_of(body: str | None, kind: str) -> str | None:
    """The value of the `kind` marker a post of Tasuku's ends with, if it ends with a
    validly signed one; None otherwise."""
    match = MARKER_RE.search(body or "")
    if match is None or match.group(1) != kind:
        return None
    if not _valid(kind, match.group(2), match.group(3)):
        return None
    return match.group(2)


def markers_of(bodies: Iterable[str | None], kind: str) -> set[str]:
    found: set[str] = set()
    for body in bodies:
        value = marker_of(body, kind)
        if value is not None:
            found.add(value)
    return found


def is_ours(login: str | None, user_type: str | None, slug: str) -> bool:
    """Whether an author is Tasuku's own bot user: a Bot whose login is `<slug>[bot]`
    (REST) or `<slug>` (GraphQL drops the suffix). A person may own a login equal to
    the slug; only the type tells them apart."""
    login = (login or "").lower()
    return user_type == "Bot" and login in (f"{slug.lower()}[bot]", slug.lower())

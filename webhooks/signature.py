"""GitHub's webhook signature: `sha256=` + hex HMAC-SHA256 of the raw body."""

from __future__ import annotations

import hashlib
import hmac

PREFIX = "sha256="


def signature_for(secret: str, body: bytes) -> str:
    return PREFIX + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def signature_valid(secret: str, body: bytes, header: str | None) -> bool:
    """Whether `header` (X-Hub-Signature-256) signs `body` with `secret`.

    Compared in constant time over the raw bytes, before any JSON parsing. The header is
    compared as bytes: `hmac.compare_digest` refuses a str holding a non-ASCII character
    (TypeError), and a header is whatever the sender put there.
    """
    if not secret or not header or not header.startswith(PREFIX):
        return False
    sent = header.encode("utf-8", "surrogateescape")
    return hmac.compare_digest(signature_for(secret, body).encode("ascii"), sent)

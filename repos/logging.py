"""A logging filter that keeps credentials out of every log line."""

from __future__ import annotations

import logging
import re

# Installation/user tokens (old 40-character and new `ghs_APPID_JWT` forms), JWTs, and
# credentials embedded in URLs.
_PATTERNS = [
    re.compile(r"\bgh[pousr]_[A-Za-z0-9_.\-]{20,}"),
    re.compile(r"\beyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+"),
    re.compile(r"(?<=://)[^/@\s:]+:[^/@\s]+(?=@)"),
    re.compile(r"(?i)(?<=authorization: )(bearer|token|basic) [^\s'\"]+"),
]


def redact(text: str) -> str:
    for pattern in _PATTERNS:
        text = pattern.sub("[redacted]", text)
    return text


class RedactSecretsFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return True

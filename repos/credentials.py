"""Reviewer API keys at rest: sealed with a key derived from SECRET_KEY (Fernet:
AES-128-CBC with an HMAC), so a database dump alone does not give them away.

Rotating SECRET_KEY keeps them readable: put the old key in SECRET_KEY_FALLBACKS, and
keys sealed under it still open (MultiFernet); `manage.py reseal_keys` seals every
stored key again under the current SECRET_KEY, after which the old one can go. A key
sealed under a SECRET_KEY that is neither current nor a fallback cannot be read; the run
that needs it fails at stage `provider` saying to enter the key again."""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


class KeyUnreadable(Exception):
    pass


def _one(secret: str) -> Fernet:
    digest = hashlib.sha256(b"tasuku reviewer keys\0" + secret.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def _fernet() -> MultiFernet:
    """Seals with the current SECRET_KEY; opens with it or any of the fallbacks."""
    secrets = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return MultiFernet([_one(s) for s in secrets if s])


def key_reseal(sealed: str) -> str:
    """`sealed` sealed again under the current SECRET_KEY (KeyUnreadable if no key opens it)."""
    if not sealed:
        return ""
    try:
        return _fernet().rotate(sealed.encode()).decode()
    except InvalidToken as exc:
        raise KeyUnreadable(
            "sealed under a SECRET_KEY that is neither current nor a fallback"
        ) from exc


def key_seal(key: str) -> str:
    return _fernet().encrypt(key.encode()).decode() if key else ""


def key_open(sealed: str) -> str:
    if not sealed:
        return ""
    try:
        return _fernet().decrypt(sealed.encode()).decode()
    except InvalidToken as exc:
        raise KeyUnreadable(
            "the reviewer's API key cannot be read (SECRET_KEY changed?): enter it again "
            "in the admin"
        ) from exc

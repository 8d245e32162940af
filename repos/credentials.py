"""Reviewer API keys at rest: sealed with a key derived from SECRET_KEY (Fernet:
AES-128-CBC with an HMAC), so a database dump alone does not give them away. Changing
SECRET_KEY makes the sealed keys unreadable; the run that needs one then fails at
stage `provider` saying to enter the key again."""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


class KeyUnreadable(Exception):
    pass


def _fernet() -> Fernet:
    digest = hashlib.sha256(b"tasuku reviewer keys\0" + settings.SECRET_KEY.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


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

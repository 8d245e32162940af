"""GitHub Actions OIDC tokens: proof that a caller is one particular workflow run.

`verify(token)` checks the signature against the issuer's JWKS (found through its
discovery document; keys cached, fetched again when a token names an unknown key id),
the issuer (the configured one, or one of the operator's further issuers, such as a GHEC
enterprise's: checked before any request), the audience
(Tasuku's URL unless configured), and expiry / not-before. What the claims must match
— the repository, the run, the workflow — is the caller's business
(reviews/actions/workflow.py). Every failure is one `TokenRefused`, whose reason is logged and
never sent back.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import jwt
import requests
from django.conf import settings

logger = logging.getLogger(__name__)

REQUIRED = ("iss", "aud", "exp", "iat", "sub", "repository", "run_id", "run_attempt")
LEEWAY_SECONDS = 60
# A token naming a key id the cached JWKS lacks refetches it, at most this often (a flood
# of forged key ids must not become a flood of requests to the issuer).
JWKS_REFETCH_COOLDOWN = 1.0


class TokenRefused(Exception):
    """The token does not prove what it must (the message says why, for the log)."""


class IssuerUnavailable(Exception):
    """The issuer's discovery document or keys could not be read now (try again)."""


class _Keys:
    """The issuer's signing keys, cached per issuer, refetched on an unknown key id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[str, jwt.PyJWKClient] = {}

    def signing_key(self, issuer: str, token: str) -> jwt.PyJWK:
        with self._lock:
            client = self._clients.get(issuer)
        if client is None:
            client = jwt.PyJWKClient(
                _jwks_uri(issuer),
                cache_keys=True,
                lifespan=3600,
                timeout=10,
                cooldown_duration=JWKS_REFETCH_COOLDOWN,
            )
            with self._lock:
                self._clients[issuer] = client
        # PyJWKClient fetches the JWKS again when the key id is not in its cache.
        return client.get_signing_key_from_jwt(token)

    def clear(self) -> None:
        with self._lock:
            self._clients.clear()


KEYS = _Keys()


def _jwks_uri(issuer: str) -> str:
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        answer = requests.get(url, timeout=10)
        answer.raise_for_status()
        uri = answer.json()["jwks_uri"]
    except (requests.RequestException, ValueError, KeyError, TypeError) as exc:
        raise IssuerUnavailable(f"cannot read the discovery document {url}: {exc}") from exc
    if not isinstance(uri, str) or not uri.startswith(("https://", "http://")):
        raise TokenRefused(f"the discovery document names no usable jwks_uri: {uri!r}")
    return uri


def audience() -> str:
    return settings.TASUKU_ACTIONS_AUDIENCE or settings.TASUKU_BASE_URL


def verify(token: str) -> dict[str, Any]:
    """The token's claims, once its signature, issuer, audience and times check out."""
    issuer = settings.TASUKU_ACTIONS_OIDC_ISSUER.rstrip("/")
    try:
        unverified = jwt.decode(token, options={"verify_signature": False})
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as exc:
        raise TokenRefused(f"not a JWT: {exc}") from exc
    claimed = str(unverified.get("iss", ""))
    # Only issuers the operator names are ever asked for keys: a token naming a made-up
    # issuer (…/enterprise-<n>) is refused before any request. GHEC with a custom issuer
    # (https://token.actions.githubusercontent.com/<enterprise>) is named in
    # TASUKU_ACTIONS_OIDC_ISSUERS.
    allowed = {issuer} | {i.strip().rstrip("/") for i in settings.TASUKU_ACTIONS_OIDC_ISSUERS}
    if claimed not in allowed:
        raise TokenRefused(f"issuer {claimed!r} is not one of {sorted(allowed)!r}")
    if header.get("alg") != "RS256":
        raise TokenRefused(f"algorithm {header.get('alg')!r} is not RS256")
    try:
        key = KEYS.signing_key(claimed, token)
        return jwt.decode(
            token,
            key=key.key,
            algorithms=["RS256"],
            audience=audience(),
            issuer=claimed,
            leeway=LEEWAY_SECONDS,
            options={"require": list(REQUIRED)},
        )
    except jwt.PyJWKClientConnectionError as exc:
        raise IssuerUnavailable(f"cannot read the issuer's keys: {exc}") from exc
    except jwt.PyJWKClientError as exc:
        raise TokenRefused(f"no signing key for kid {header.get('kid')!r}: {exc}") from exc
    except jwt.PyJWTError as exc:
        raise TokenRefused(f"{type(exc).__name__}: {exc}") from exc


def subject_repository(sub: str) -> tuple[str, str | None, str | None]:
    """(owner/name, owner id, repository id) from a token's `sub`, in either format:
    `repo:OWNER/REPO:…`, or, for repositories created after 2026-07-15,
    `repo:OWNER@OWNER-ID/REPO@REPO-ID:…`. Empty when it is neither."""
    if not sub.startswith("repo:"):
        return "", None, None
    slug = sub[len("repo:") :].split(":", 1)[0]
    owner, _, name = slug.partition("/")
    owner, _, owner_id = owner.partition("@")
    name, _, repo_id = name.partition("@")
    if not owner or not name:
        return "", None, None
    return f"{owner}/{name}", owner_id or None, repo_id or None

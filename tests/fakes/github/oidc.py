"""The OIDC issuer of GitHub Actions on the fake GitHub: the discovery document, the
JWKS, key rotation, tokens with the claims a real token has for a workflow run, and
tokens forged the ways Tasuku must refuse.

Discovery answers at the fake's root and under the issuer's path (issuer +
`/.well-known/openid-configuration`); the issuer is the fake's URL + `/_oidc` unless a
test sets `oidc_issuer`. Like GitHub's, tokens are RS256 with a `kid` in the header and
carry ids and counters as strings.

A mixin placed before `FakeGitHubBase` (it extends `__init__` and `reset`).
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jwt
from jwt.algorithms import RSAAlgorithm

from tests.fakes.github.state import HTTPError, Request, Response

if TYPE_CHECKING:
    from tests.fakes.github.actions import ActionsRun

# GitHub's docs example token: exp - iat = 300 s, nbf = iat - 600 s.
OIDC_TOKEN_TTL = 300
OIDC_NOT_BEFORE = 600
OIDC_ISSUER_PATH = "/_oidc"
# Claims the discovery document lists (GitHub's, less enterprise-only ones).
OIDC_CLAIMS = [
    "sub", "aud", "exp", "iat", "iss", "jti", "nbf", "ref", "sha", "repository",
    "repository_id", "repository_owner", "repository_owner_id", "run_id", "run_number",
    "run_attempt", "actor", "actor_id", "workflow", "workflow_ref", "workflow_sha", "head_ref",
    "base_ref", "event_name", "ref_type", "ref_protected", "environment", "job_workflow_ref",
    "job_workflow_sha", "repository_visibility", "runner_environment", "check_run_id",
]  # fmt: skip


@dataclass
class OidcKey:
    kid: str
    private_key: Any  # cryptography's RSAPrivateKey
    published: bool = True

    def jwk(self) -> dict[str, Any]:
        public = RSAAlgorithm.to_jwk(self.private_key.public_key(), as_dict=True)
        return {**public, "kid": self.kid, "alg": "RS256", "use": "sig"}


def _new_oidc_key(*, published: bool = True) -> OidcKey:
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return OidcKey(kid=str(uuid.uuid4()), private_key=key, published=published)


class OidcRoutes:
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[call-arg]
        # Repositories whose tokens use the immutable `sub` (created after 2026-07-15).
        self.oidc_immutable_sub: set[str] = set()
        self.oidc_token_ttl = OIDC_TOKEN_TTL
        self._oidc_issuer: str | None = None
        # RSA keys are slow to make: the first key and the forger's survive `reset`.
        self._oidc_first_key: OidcKey | None = None
        self._oidc_stranger: OidcKey | None = None
        self.oidc_keys: list[OidcKey] = []
        self._oidc_signing_kid: str | None = None
        well_known = r"(?P<prefix>(?:/[^/.][^/]*)*)/\.well-known"
        table = [
            ("GET", well_known + r"/openid-configuration", "none", self._oidc_discovery),
            ("GET", well_known + r"/jwks", "none", self._oidc_jwks),
        ]
        self.routes += [(m, re.compile(p), a, fn) for m, p, a, fn in table]  # type: ignore[attr-defined]

    def reset(self) -> None:
        super().reset()  # type: ignore[misc]
        with self.lock:  # type: ignore[attr-defined]
            self.oidc_immutable_sub.clear()
            self.oidc_token_ttl = OIDC_TOKEN_TTL
            self._oidc_issuer = None
            self.oidc_keys = [self._oidc_first_key] if self._oidc_first_key else []
            if self._oidc_first_key:
                self._oidc_first_key.published = True
            self._oidc_signing_kid = self._oidc_first_key.kid if self._oidc_first_key else None

    @property
    def oidc_signing_kid(self) -> str:
        """The kid new tokens are signed with. The first key is made when first needed
        (RSA keys are slow to make): asking for its kid makes it, so a test that reads the
        kid before the fake signed anything reads the key it then signs with."""
        with self.lock:  # type: ignore[attr-defined]
            self._oidc_ready()
            assert self._oidc_signing_kid is not None
            return self._oidc_signing_kid

    @property
    def oidc_issuer(self) -> str:
        """The `iss` of minted tokens: the fake's URL + /_oidc unless a test set it
        (e.g. to GitHub's https://token.actions.githubusercontent.com)."""
        return self._oidc_issuer or f"{self.url}{OIDC_ISSUER_PATH}"  # type: ignore[attr-defined]

    @oidc_issuer.setter
    def oidc_issuer(self, value: str | None) -> None:
        self._oidc_issuer = value

    @property
    def oidc_jwks_uri(self) -> str:
        return f"{self.url}/.well-known/jwks"  # type: ignore[attr-defined]

    def _oidc_ready(self) -> None:
        if not self.oidc_keys:
            if self._oidc_first_key is None:
                self._oidc_first_key = _new_oidc_key()
            self.oidc_keys = [self._oidc_first_key]
            self._oidc_signing_kid = self._oidc_first_key.kid

    def _oidc_key(self, kid: str) -> OidcKey:
        for key in self.oidc_keys:
            if key.kid == kid:
                return key
        if self._oidc_stranger is not None and self._oidc_stranger.kid == kid:
            return self._oidc_stranger
        raise KeyError(f"no OIDC key {kid}")

    def oidc_add_key(self, *, sign: bool = True) -> str:
        """Rotate: publish a new key in the JWKS and (with `sign`) sign new tokens with
        it; the older keys stay published until `oidc_retire_key`. Returns its kid."""
        with self.lock:  # type: ignore[attr-defined]
            self._oidc_ready()
            key = _new_oidc_key()
            self.oidc_keys.append(key)
            if sign:
                self._oidc_signing_kid = key.kid
            return key.kid

    def oidc_retire_key(self, kid: str) -> None:
        """Take a key out of the JWKS (tokens it signed no longer verify)."""
        with self.lock:  # type: ignore[attr-defined]
            self._oidc_key(kid).published = False

    def oidc_jwks(self) -> dict[str, Any]:
        with self.lock:  # type: ignore[attr-defined]
            self._oidc_ready()
            return {"keys": [key.jwk() for key in self.oidc_keys if key.published]}

    def oidc_claims(
        self,
        run: ActionsRun | int,
        *,
        audience: str | None = None,
        workflow_path: str | None = None,
        immutable_sub: bool | None = None,
        issued_at: float | None = None,
        lifetime: float | None = None,
        **overrides: Any,
    ) -> dict[str, Any]:
        """The claims GitHub puts in an OIDC token of `run`'s job (numbers as strings).

        `overrides` replace claims (None removes one); overriding `repository`, `ref` or
        `sha`, or giving `workflow_path`, also changes the claims derived from them
        (`sub`, `workflow_ref`, `job_workflow_ref`, `repository_owner`, `workflow_sha`...)
        unless those are overridden too. `audience` defaults to GitHub's: the owner's URL.
        """
        with self.lock:  # type: ignore[attr-defined]
            if isinstance(run, int):
                run = self.actions_runs[run]  # type: ignore[attr-defined]
            repo = self.repos[run.full_name]  # type: ignore[attr-defined]
            base: dict[str, Any] = {
                "repository": run.full_name,
                "repository_id": str(repo.id),
                "repository_owner_id": str(repo.owner_id),
                "ref": run.ref,
                "sha": run.head_sha,
                "run_id": str(run.id),
                "run_number": str(run.run_number),
                "run_attempt": str(run.run_attempt),
            }
            base.update({k: v for k, v in overrides.items() if k in base})
            repository, ref, sha = base["repository"], base["ref"], base["sha"]
            owner, name = repository.split("/", 1)
            path = workflow_path or run.path
            workflow_ref = f"{repository}/{path}@{ref}"
            immutable = (
                run.full_name in self.oidc_immutable_sub if immutable_sub is None else immutable_sub
            )
            subject_ref = ref.replace(":", "%3A")
            sub = (
                f"repo:{owner}@{base['repository_owner_id']}/{name}@{base['repository_id']}:ref:{subject_ref}"
                if immutable
                else f"repo:{repository}:ref:{subject_ref}"
            )
            now = int(time.time() if issued_at is None else issued_at)
            ttl = int(self.oidc_token_ttl if lifetime is None else lifetime)
            branch = ref.startswith("refs/heads/")
            claims: dict[str, Any] = {
                "jti": str(uuid.uuid4()),
                "sub": sub,
                "aud": audience or f"https://github.com/{owner}",
                **base,
                "repository_owner": owner,
                "repository_visibility": "private" if repo.private else "public",
                "actor_id": str(run.actor_id),
                "actor": run.actor_login,
                "workflow": run.name,
                "head_ref": "",
                "base_ref": "",
                "event_name": run.event,
                "ref_protected": str(ref.removeprefix("refs/heads/") in repo.protection).lower(),
                "ref_type": "branch" if branch else "tag",
                "workflow_ref": workflow_ref,
                "workflow_sha": sha,
                "job_workflow_ref": workflow_ref,
                "job_workflow_sha": sha,
                "check_run_id": str(run.check_run_id),
                "runner_environment": "github-hosted",
                "iss": self.oidc_issuer,
                "nbf": now - OIDC_NOT_BEFORE,
                "exp": now + ttl,
                "iat": now,
            }
            claims.update(overrides)
            return {k: v for k, v in claims.items() if v is not None}

    def oidc_token(
        self,
        run: ActionsRun | int,
        *,
        kid: str | None = None,
        header_kid: str | None = None,
        **claims: Any,
    ) -> str:
        """An RS256 JWT with `oidc_claims(run, **claims)`, signed with the current
        signing key (or the key `kid`), `header_kid` in its header when given."""
        with self.lock:  # type: ignore[attr-defined]
            self._oidc_ready()
            key = self._oidc_key(kid or self.oidc_signing_kid)
            return jwt.encode(
                self.oidc_claims(run, **claims),
                key.private_key,
                algorithm="RS256",
                headers={"kid": header_kid or key.kid},
            )

    def _stranger(self) -> OidcKey:
        if self._oidc_stranger is None:
            self._oidc_stranger = _new_oidc_key(published=False)
        return self._oidc_stranger

    def oidc_token_unknown_kid(self, run: ActionsRun | int, **claims: Any) -> str:
        """A token signed by a key the JWKS never published, under that key's own kid."""
        with self.lock:  # type: ignore[attr-defined]
            return self.oidc_token(run, kid=self._stranger().kid, **claims)

    def oidc_token_wrong_key(self, run: ActionsRun | int, **claims: Any) -> str:
        """A token whose header names the current signing kid but whose signature is
        another key's."""
        with self.lock:  # type: ignore[attr-defined]
            self._oidc_ready()
            return self.oidc_token(
                run, kid=self._stranger().kid, header_kid=self.oidc_signing_kid, **claims
            )

    def oidc_token_unsigned(self, run: ActionsRun | int, **claims: Any) -> str:
        """A token with `alg: none` and no signature."""
        with self.lock:  # type: ignore[attr-defined]
            self._oidc_ready()
            return jwt.encode(
                self.oidc_claims(run, **claims),
                None,
                algorithm="none",
                headers={"kid": self.oidc_signing_kid},
            )

    # --- OIDC routes ---

    def _oidc_prefix(self, request: Request) -> None:
        """Discovery answers at the root and under the issuer's path (issuer +
        /.well-known/..., as OIDC discovery has it)."""
        url = self.url  # type: ignore[attr-defined]
        issuer_path = self.oidc_issuer.removeprefix(url) if self.oidc_issuer.startswith(url) else ""
        if request.params["prefix"] not in ("", issuer_path.rstrip("/")):
            raise HTTPError(404, "Not Found")

    def _oidc_discovery(self, request: Request) -> Response:
        self._oidc_prefix(request)
        return (
            200,
            {
                "issuer": self.oidc_issuer,
                "jwks_uri": self.oidc_jwks_uri,
                "subject_types_supported": ["public", "pairwise"],
                "response_types_supported": ["id_token"],
                "claims_supported": OIDC_CLAIMS,
                "id_token_signing_alg_values_supported": ["RS256"],
                "scopes_supported": ["openid"],
            },
            {},
        )

    def _oidc_jwks(self, request: Request) -> Response:
        self._oidc_prefix(request)
        return 200, self.oidc_jwks(), {}

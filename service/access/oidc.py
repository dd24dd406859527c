"""OIDC: JSON Web Tokens from one issuer, checked against its keys, groups mapped to scopes.

    oidc:
      issuer: https://login.example.com/realms/platform     # `iss` must be exactly this
      audience: dra-mirror                                 # `aud` must contain this
      jwksUrl: https://login.example.com/…/certs   # or jwksFile: /etc/dra-mirror/jwks.json;
                                                   # neither: discovered from the issuer's
                                                   # /.well-known/openid-configuration
      algorithms: [RS256, ES256]      clockSkew: 60      keysTtl: 300
      usernameClaim: email            groupsClaim: groups
      groups:                          # group -> scope; a user's scopes are joined
        platform-admins: {admin: true}
        ml: {namespaces: [east/ml, west/ml], history: true}
      defaultScope: {clusters: [east]} # for users in no mapped group (absent: refused, 403)

Verification is PyJWT's (`jwt.decode`: signature with the key the header's `kid` names,
`exp`/`nbf`/`iat` within `clockSkew` seconds, `iss`, `aud`, and only the configured
algorithms — never `none`, never an HMAC with a public key). Keys are fetched at run time from
the configured issuer (configuration, not a shipped asset), cached for `keysTtl` seconds,
refetched early (at most every 30 s) when a token names an unknown `kid` (key rotation).

Promises: a token that fails any check is `Unauthenticated` with the reason (expired, wrong
audience, bad signature…), never the token; keys that cannot be fetched and were never fetched
are `ReviewUnavailable` (fail closed); keys fetched before keep serving through an outage of the
issuer, with a warning.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .errors import AccessConfigError, Forbidden, ReviewUnavailable, Unauthenticated
from .scope import AccessScope
from .subjects import Subject

if TYPE_CHECKING:  # PyJWT and httpx load when OIDC is configured (AccessControl.open)
    import httpx
    import jwt

log = logging.getLogger(__name__)

UNKNOWN_KID_REFRESH = 30.0  # seconds between early refetches for an unknown key id
FETCH_TIMEOUT = 5.0
ASYMMETRIC = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)


@dataclass(frozen=True)
class OidcSettings:
    issuer: str
    audience: str
    jwks_url: str | None = None
    jwks_file: str | None = None
    algorithms: tuple[str, ...] = ("RS256", "ES256")
    clock_skew: float = 60.0
    keys_ttl: float = 300.0
    username_claim: str = "email"
    groups_claim: str = "groups"
    groups: Mapping[str, AccessScope] = field(default_factory=dict)
    default_scope: AccessScope | None = None

    def __post_init__(self) -> None:
        if not self.issuer or not self.audience:
            raise AccessConfigError("oidc: issuer and audience are required")
        if self.jwks_url and self.jwks_file:
            raise AccessConfigError("oidc: give jwksUrl or jwksFile, not both")
        weak = set(self.algorithms) - ASYMMETRIC
        if weak or not self.algorithms:
            raise AccessConfigError(
                f"oidc.algorithms: only asymmetric algorithms ({', '.join(sorted(ASYMMETRIC))})"
            )


class KeySource(Protocol):
    """Where the issuer's public keys come from (a JWKS document)."""

    async def keys(self, *, refresh: bool = False) -> dict[str, jwt.PyJWK]: ...

    async def close(self) -> None: ...


def parse_jwks(document: Any, *, where: str) -> dict[str, jwt.PyJWK]:
    import jwt

    try:
        found = jwt.PyJWKSet.from_dict(document)
    except (jwt.PyJWKSetError, jwt.InvalidKeyError, TypeError, ValueError) as error:
        raise ValueError(f"{where}: not a usable JWKS ({error})") from None
    return {key.key_id or "": key for key in found.keys}


class JwksFile:
    """Keys from a JWKS file, read once at start."""

    def __init__(self, path: str | Path) -> None:
        try:
            self._keys = parse_jwks(json.loads(Path(path).read_text()), where=str(path))
        except OSError as error:
            raise AccessConfigError(f"oidc.jwksFile {path}: {error.strerror}") from None
        except (ValueError, json.JSONDecodeError) as error:
            raise AccessConfigError(f"oidc.jwksFile {path}: {error}") from None

    async def keys(self, *, refresh: bool = False) -> dict[str, jwt.PyJWK]:
        return self._keys

    async def close(self) -> None:
        return None


class JwksUrl:
    """Keys from the issuer over HTTPS, cached; the URL is configured or discovered."""

    def __init__(
        self,
        *,
        issuer: str,
        url: str | None,
        ttl: float,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Any = time.monotonic,
    ) -> None:
        import httpx

        self.issuer, self.url, self.ttl, self.clock = issuer.rstrip("/"), url, ttl, clock
        self._client = httpx.AsyncClient(timeout=FETCH_TIMEOUT, transport=transport)
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at: float | None = None
        self._lock = asyncio.Lock()

    async def _get_json(self, url: str) -> Any:
        response = await self._client.get(url, headers={"Accept": "application/json"})
        response.raise_for_status()
        return response.json()

    async def _fetch(self) -> dict[str, jwt.PyJWK]:
        if self.url is None:
            discovery = await self._get_json(f"{self.issuer}/.well-known/openid-configuration")
            if not isinstance(discovery, dict) or not discovery.get("jwks_uri"):
                raise ValueError("the issuer's openid-configuration has no jwks_uri")
            self.url = str(discovery["jwks_uri"])
        return parse_jwks(await self._get_json(self.url), where="the issuer's JWKS")

    async def keys(self, *, refresh: bool = False) -> dict[str, jwt.PyJWK]:
        import httpx

        now = self.clock()
        age = None if self._fetched_at is None else now - self._fetched_at
        if age is not None and age < self.ttl and not (refresh and age >= UNKNOWN_KID_REFRESH):
            return self._keys
        async with self._lock:
            if self._fetched_at is not None and self._fetched_at > now:
                return self._keys  # another request refetched while this one waited
            try:
                self._keys = await self._fetch()
                self._fetched_at = self.clock()
            except (httpx.HTTPError, ValueError) as error:
                if not self._keys:
                    raise ReviewUnavailable(
                        f"the OIDC issuer's keys cannot be fetched ({type(error).__name__})"
                    ) from error
                log.warning(
                    "OIDC keys: refetch failed (%s); using the keys fetched before",
                    type(error).__name__,
                )
                self._fetched_at = self.clock()  # retry after another ttl, not every request
        return self._keys

    async def close(self) -> None:
        await self._client.aclose()


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2 and not token.startswith(".")


class OidcTokens:
    """The `Authenticator` of OIDC ID/access tokens from one issuer."""

    method = "oidc"

    def __init__(self, settings: OidcSettings, *, keys: KeySource) -> None:
        self.settings = settings
        self.key_source = keys

    def claims(self, token: str) -> bool:
        """A JWT whose (unverified) issuer is ours: Kubernetes service-account tokens are
        JWTs too, from the cluster's own issuer, and go to the Kubernetes reviewer."""
        import jwt

        if not looks_like_jwt(token):
            return False
        try:
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            return False
        return isinstance(unverified, dict) and unverified.get("iss") == self.settings.issuer

    async def authenticate(self, token: str) -> Subject:
        claims = await self.verify(token)
        return self.subject(claims)

    async def verify(self, token: str) -> dict[str, Any]:
        import jwt

        s = self.settings
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Unauthenticated("malformed token") from None
        kid = header.get("kid") or ""
        keys = await self.key_source.keys()
        if kid not in keys:
            keys = await self.key_source.keys(refresh=True)
        key = keys.get(kid) if kid or len(keys) != 1 else next(iter(keys.values()))
        if key is None:
            raise Unauthenticated("token signed by a key the issuer does not publish")
        try:
            return jwt.decode(
                token,
                key=key.key,
                algorithms=list(s.algorithms),
                audience=s.audience,
                issuer=s.issuer,
                leeway=s.clock_skew,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise Unauthenticated("token expired") from None
        except jwt.ImmatureSignatureError:
            raise Unauthenticated("token not valid yet") from None
        except jwt.InvalidAudienceError:
            raise Unauthenticated("token is for another audience") from None
        except jwt.InvalidIssuerError:
            raise Unauthenticated("token from another issuer") from None
        except jwt.MissingRequiredClaimError as error:
            raise Unauthenticated(f"token has no {error.claim!r} claim") from None
        except jwt.InvalidAlgorithmError:
            raise Unauthenticated("token signed with an algorithm not allowed here") from None
        except jwt.PyJWTError:
            raise Unauthenticated("token signature or format is invalid") from None

    def subject(self, claims: Mapping[str, Any]) -> Subject:
        s = self.settings
        name = claims.get(s.username_claim) or claims.get("sub")
        if not isinstance(name, str) or not name:
            raise Unauthenticated(f"token has no {s.username_claim!r} or 'sub' claim")
        raw_groups = claims.get(s.groups_claim) or []
        groups = (
            tuple(g for g in raw_groups if isinstance(g, str))
            if isinstance(raw_groups, list)
            else ()
        )
        scope: AccessScope | None = None
        for group in groups:
            granted = s.groups.get(group)
            if granted is not None:
                scope = granted if scope is None else scope.union(granted)
        if scope is None:
            scope = s.default_scope
        if scope is None:
            raise Forbidden(f"{name} is in no group this mirror grants access to")
        exp = claims.get("exp")
        expires = float(exp) + s.clock_skew if isinstance(exp, int | float) else None
        return Subject(name=name, method=self.method, scope=scope, groups=groups,
                       expires_at=expires)  # fmt: skip

    async def close(self) -> None:
        await self.key_source.close()

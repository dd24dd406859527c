"""OIDC tokens: signatures with keys generated here, audience, expiry, skew, groups -> scopes,
keys from a file or fetched from the issuer (discovery), rotation and issuer outages."""

from __future__ import annotations

import json
import time

import httpx
import jwt
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from dra_mirror.service.access.errors import (
    AccessConfigError,
    Forbidden,
    ReviewUnavailable,
    Unauthenticated,
)
from dra_mirror.service.access.oidc import JwksFile, JwksUrl, OidcSettings, OidcTokens
from dra_mirror.service.access.scope import AccessScope

from .keys import AUDIENCE, ISSUER, SigningKey, jwks

GROUPS = {
    "ml": AccessScope.parse(["east/ml"], history=True),
    "platform": AccessScope.admin(),
}


def settings(**changes) -> OidcSettings:
    values = dict(issuer=ISSUER, audience=AUDIENCE, groups=GROUPS, clock_skew=30.0)
    values.update(changes)
    return OidcSettings(**values)


class Issuer:
    """A loopback-free issuer: a Starlette app served to httpx through ASGITransport."""

    def __init__(self, *keys: SigningKey) -> None:
        self.keys = list(keys)
        self.down = False
        self.fetches = 0

        async def discovery(_request):
            return JSONResponse({"issuer": ISSUER, "jwks_uri": "https://login.example.test/certs"})

        async def certs(_request):
            self.fetches += 1
            if self.down:
                return Response("unavailable", status_code=503)
            return JSONResponse(jwks(*self.keys))

        app = Starlette(
            routes=[
                Route("/realms/platform/.well-known/openid-configuration", discovery),
                Route("/certs", certs),
            ]
        )
        self.transport = httpx.ASGITransport(app=app)


@pytest.fixture(scope="module")
def rsa_key() -> SigningKey:
    return SigningKey("k1")


@pytest.fixture(scope="module")
def ec_key() -> SigningKey:
    return SigningKey("k2", "EC")


def file_tokens(tmp_path, *keys, **changes) -> OidcTokens:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(jwks(*keys)))
    return OidcTokens(settings(**changes), keys=JwksFile(path))


async def test_a_valid_token_maps_its_groups_to_scopes(tmp_path, rsa_key, ec_key):
    tokens = file_tokens(tmp_path, rsa_key, ec_key)
    alice = await tokens.authenticate(rsa_key.token())
    assert (alice.name, alice.method, alice.groups) == ("alice@example.test", "oidc", ("ml",))
    assert alice.scope.allows("east", "ml") and not alice.scope.allows("east", "other")
    both = await tokens.authenticate(ec_key.token(groups=["ml", "platform", 7]))
    assert both.scope.is_admin
    assert tokens.claims(rsa_key.token())
    assert not tokens.claims(rsa_key.token(iss="https://kubernetes.default.svc"))
    assert not tokens.claims("not-a-jwt")


@pytest.mark.parametrize(
    ("claims", "words"),
    [
        ({"exp": int(time.time()) - 120}, "expired"),
        ({"nbf": int(time.time()) + 600}, "not valid yet"),
        ({"aud": "someone-else"}, "another audience"),
        ({"iss": "https://evil.example.test"}, "another issuer"),
        ({"exp": None}, "no 'exp' claim"),
        ({"aud": None}, "no 'aud' claim"),
    ],
)
async def test_bad_tokens_are_refused_with_the_reason(tmp_path, rsa_key, claims, words):
    tokens = file_tokens(tmp_path, rsa_key)
    token = rsa_key.token(**claims)
    with pytest.raises(Unauthenticated, match=words) as refused:
        await tokens.authenticate(token)
    assert token not in str(refused.value)


async def test_clock_skew_is_tolerated(tmp_path, rsa_key):
    tokens = file_tokens(tmp_path, rsa_key, clock_skew=60.0)
    assert await tokens.authenticate(rsa_key.token(exp=int(time.time()) - 30))


async def test_forged_signature_and_algorithm_confusion_are_refused(tmp_path, rsa_key):
    tokens = file_tokens(tmp_path, rsa_key)
    other = SigningKey("k1")  # same kid, another private key
    with pytest.raises(Unauthenticated, match="signature"):
        await tokens.authenticate(other.token())
    unsigned = jwt.encode(
        {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "exp": int(time.time()) + 60,
            "email": "mallory@example.test",
        },
        key=None,
        algorithm="none",
        headers={"kid": "k1"},
    )
    with pytest.raises(Unauthenticated):
        await tokens.authenticate(unsigned)
    with pytest.raises(Unauthenticated, match="key the issuer does not publish"):
        await tokens.authenticate(SigningKey("unknown").token())


async def test_a_user_in_no_mapped_group_is_forbidden_unless_a_default_scope(tmp_path, rsa_key):
    tokens = file_tokens(tmp_path, rsa_key)
    with pytest.raises(Forbidden, match=r"alice@example\.test is in no group"):
        await tokens.authenticate(rsa_key.token(groups=["marketing"]))
    lenient = file_tokens(tmp_path, rsa_key, default_scope=AccessScope.parse([], clusters=["east"]))
    bob = await lenient.authenticate(rsa_key.token(groups=None, email="bob@example.test"))
    assert bob.scope.allows("east") and not bob.scope.allows("east", "ml")


async def test_keys_are_discovered_fetched_cached_and_rotated(rsa_key, ec_key):
    issuer = Issuer(rsa_key)
    now = [0.0]
    source = JwksUrl(
        issuer=ISSUER, url=None, ttl=300, transport=issuer.transport, clock=lambda: now[0]
    )
    tokens = OidcTokens(settings(), keys=source)
    try:
        await tokens.authenticate(rsa_key.token())
        await tokens.authenticate(rsa_key.token())
        assert issuer.fetches == 1  # cached
        issuer.keys.append(ec_key)  # the issuer rotates in a new key
        with pytest.raises(Unauthenticated):  # unknown kid, but refetched too recently
            await tokens.authenticate(ec_key.token())
        now[0] += 31
        assert await tokens.authenticate(ec_key.token())  # an unknown kid refetches early
        assert issuer.fetches == 2
        issuer.down = True
        now[0] += 400  # past the ttl, the issuer is down: the keys fetched before still serve
        assert await tokens.authenticate(rsa_key.token())
    finally:
        await tokens.close()


async def test_keys_never_fetched_fail_closed(rsa_key):
    issuer = Issuer(rsa_key)
    issuer.down = True
    source = JwksUrl(
        issuer=ISSUER, url="https://login.example.test/certs", ttl=300, transport=issuer.transport
    )
    tokens = OidcTokens(settings(), keys=source)
    try:
        with pytest.raises(ReviewUnavailable, match="keys cannot be fetched"):
            await tokens.authenticate(rsa_key.token())
    finally:
        await tokens.close()


def test_settings_refuse_symmetric_algorithms_and_missing_fields(tmp_path):
    with pytest.raises(AccessConfigError, match="only asymmetric"):
        settings(algorithms=("HS256",))
    with pytest.raises(AccessConfigError, match="issuer and audience"):
        settings(audience="")
    with pytest.raises(AccessConfigError, match="not both"):
        settings(jwks_url="https://x", jwks_file="/x")
    bad = tmp_path / "jwks.json"
    bad.write_text('{"keys": [{"kty": "nope"}]}')
    with pytest.raises(AccessConfigError, match="not a usable JWKS"):
        JwksFile(bad)

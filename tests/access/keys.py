"""Signing keys made in the test run, and tokens signed with them (never shipped keys)."""

from __future__ import annotations

import json
import time
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

ISSUER = "https://login.example.test/realms/platform"
AUDIENCE = "dra-mirror"


class SigningKey:
    def __init__(self, kid: str, kind: str = "RSA") -> None:
        self.kid = kid
        if kind == "RSA":
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            self.algorithm = "RS256"
            self.jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.private.public_key()))
        else:
            self.private = ec.generate_private_key(ec.SECP256R1())
            self.algorithm = "ES256"
            self.jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(self.private.public_key()))
        self.jwk.update(kid=kid, use="sig", alg=self.algorithm)

    def token(self, **claims: Any) -> str:
        now = int(time.time())
        body = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "sub": "u-1",
            "email": "alice@example.test",
            "iat": now,
            "exp": now + 300,
            "groups": ["ml"],
        }
        body.update(claims)
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, self.private, algorithm=self.algorithm, headers={"kid": self.kid})


def jwks(*keys: SigningKey) -> dict[str, Any]:
    return {"keys": [k.jwk for k in keys]}

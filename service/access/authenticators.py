"""One seam for every way of recognising a caller: the `Authenticator` Protocol and the chain.

    class Authenticator(Protocol):
        method: str
        def claims(self, token: str) -> bool          # is this token of my kind? (no I/O)
        async def authenticate(self, token) -> Subject   # or raise an AccessError
        async def close(self) -> None
        def known(self, token: str) -> bool           # optional: answered without a remote
                                                      # review (Kubernetes: cached)

`Authenticators` asks them in a fixed order — static tokens (a dictionary probe), OIDC (a JWT
whose issuer is the configured one), Kubernetes (anything else, reviewed by a cluster) — and
the first that claims a token decides; a token nobody claims is `Unauthenticated`. A request
without credentials is `Unauthenticated` too (there is no anonymous access while
authentication is configured).

`bearer_token(header)` reads `Authorization: Bearer <token>` the way RFC 6750 writes it
(scheme case-insensitive, one space, token68 characters); anything else is refused with a
message that says what was expected.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from .errors import Unauthenticated
from .subjects import Subject

_TOKEN68 = re.compile(r"^[A-Za-z0-9\-._~+/]+=*$")
MAX_TOKEN_BYTES = 16 * 1024  # OIDC tokens with many groups reach a few KB; never megabytes


class Authenticator(Protocol):
    method: str

    def claims(self, token: str) -> bool: ...

    async def authenticate(self, token: str) -> Subject: ...

    async def close(self) -> None: ...


def bearer_token(header: str | None) -> str:
    """The token of an `Authorization` header value; `Unauthenticated` when absent or not a
    bearer token."""
    if not header:
        raise Unauthenticated("credentials required: send Authorization: Bearer <token>")
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        raise Unauthenticated("only Authorization: Bearer <token> is accepted")
    token = token.strip()
    if not token or len(token) > MAX_TOKEN_BYTES or not _TOKEN68.match(token):
        raise Unauthenticated("the bearer token is empty, too long or not a token")
    return token


class Authenticators:
    """The configured authenticators, asked in order (see the module docstring)."""

    def __init__(self, authenticators: Sequence[Authenticator]) -> None:
        self.authenticators = list(authenticators)

    @property
    def methods(self) -> list[str]:
        return [a.method for a in self.authenticators]

    async def authenticate(self, token: str) -> Subject:
        for authenticator in self.authenticators:
            if authenticator.claims(token):
                return await authenticator.authenticate(token)
        raise Unauthenticated("unknown token")

    def reviews(self, token: str) -> bool:
        """Whether authenticating `token` asks a remote API (a Kubernetes TokenReview): the
        authenticator that claims it says it does not know it yet (`known`)."""
        for authenticator in self.authenticators:
            if authenticator.claims(token):
                known = getattr(authenticator, "known", None)
                return known is not None and not known(token)
        return False

    async def close(self) -> None:
        for authenticator in self.authenticators:
            await authenticator.close()

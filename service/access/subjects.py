"""Who is asking: a `Subject` (a name, how it was recognised, its groups, its scope).

Every front end (GraphQL over HTTP and WebSocket, CSV exports, Slack, `/metrics`) turns its
request into a `Subject` through an `Authenticator` (see `service.access.authenticators`) and
then asks only `subject.scope`. The name is what logs and rate limits use; it is never a
token. `ANONYMOUS` is the subject of a mirror started with `--insecure-no-auth`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .scope import AccessScope


@dataclass(frozen=True)
class Subject:
    name: str
    """Who: `alice@example.com`, `system:serviceaccount:monitoring:grafana`, `static:grafana`."""
    method: str
    """How it was recognised: static, oidc, kubernetes, slack, or none (no authentication)."""
    scope: AccessScope
    """What it may see."""
    groups: tuple[str, ...] = ()
    """The groups its credentials carry (OIDC `groups`, Kubernetes user groups)."""
    expires_at: float | None = None
    """When its credentials stop being valid (Unix time; an OIDC token's `exp` plus the
    allowed clock skew), if they say: a WebSocket connection is closed then."""

    def describe(self) -> str:
        return f"{self.method}:{self.name} ({self.scope.describe()})"


ANONYMOUS = Subject(name="anonymous", method="none", scope=AccessScope.everything())

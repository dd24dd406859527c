"""`viewer`: who the mirror takes the asker for, and what their access scope lets them see.

The screens' sign-in shows it ("signed in as grafana: east/ml, west/*; history"); a client
can check its token with it. It reads the request's subject (`info.context.viewer`, set by the
HTTP view from the access gate's decision) and the scope every read of the request applies.
A mirror serving without authentication answers `authenticated: false` and an admin scope.
"""

from __future__ import annotations

import strawberry

from .context import Info


@strawberry.type(description="Who asks, and what their access scope shows them.")
class Viewer:
    name: str = strawberry.field(description='The subject ("anonymous" without authentication).')
    method: str = strawberry.field(
        description="How it was recognised: static, oidc, kubernetes, slack, metrics, or none."
    )
    authenticated: bool = strawberry.field(
        description="False when this mirror serves without authentication (everything to all)."
    )
    admin: bool
    namespaces: list[str] = strawberry.field(
        description='Granted namespaces as cluster/namespace ("*": every cluster or namespace).'
    )
    clusters: list[str] = strawberry.field(
        description="Clusters whose cluster-scoped objects (classes, slices, devices, nodes) "
        "are visible."
    )
    history: bool = strawberry.field(description="Whether history and audits may be asked.")
    description: str = strawberry.field(description="The scope in one line.")


def viewer_of(info: Info) -> Viewer:
    subject = info.context.viewer
    scope = info.context.scope
    grants = scope.grants
    admin = scope.is_admin
    namespaces = sorted(
        f"{cluster}/{namespace}" for cluster, granted in grants.items() for namespace in granted
    )
    return Viewer(
        name=subject.name if subject is not None else "anonymous",
        method=subject.method if subject is not None else "none",
        authenticated=subject is not None and subject.method != "none",
        admin=admin,
        namespaces=["*/*"] if admin else namespaces,
        clusters=["*"] if admin else sorted(grants.keys()),
        history=scope.history,
        description=scope.describe(),
    )


@strawberry.type
class Query:
    @strawberry.field(description="Who the mirror takes you for, and what you may see.")
    def viewer(self, info: Info) -> Viewer:
        return viewer_of(info)

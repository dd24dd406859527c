"""A small stand-in graph with an `explainClaim` of a shape chatops has never seen (a union,
nested lists, a field needing an argument), to test that `explain` reads the shape from the
schema. Claim team-a/job exists in cluster west only; team-a/gone nowhere."""

from __future__ import annotations

from typing import Annotated

import strawberry


@strawberry.type
class RequestVerdict:
    request: str
    verdict: str
    matching: int


@strawberry.type
class Diagnosis:
    verdict: str
    message: str
    requests: list[RequestVerdict]

    @strawberry.field
    def holders(self, first: int) -> list[str]:  # a required argument: left out
        return ["team-b/hog"][:first]


@strawberry.type
class NotExplained:
    reason: str


@strawberry.type
class ClaimRef:
    cluster: str


@strawberry.type
class Cluster:
    name: str


@strawberry.type
class Query:
    @strawberry.field
    def clusters(self) -> list[Cluster]:
        return [Cluster(name="east"), Cluster(name="west")]

    @strawberry.field
    def resource_claim(self, cluster: str, namespace: str, name: str) -> ClaimRef | None:
        return (
            ClaimRef(cluster=cluster)
            if (cluster, namespace, name) == ("west", "team-a", "job")
            else None
        )

    @strawberry.field
    def explain_claim(
        self, cluster: str, namespace: str, name: str
    ) -> Annotated[Diagnosis | NotExplained, strawberry.union("Explained")] | None:
        if (cluster, namespace, name) != ("west", "team-a", "job"):
            return None
        return Diagnosis(
            verdict="all-held",
            message="every matching device is held; 1 holder is idle",
            requests=[RequestVerdict(request="gpu", verdict="all-held", matching=2)],
        )


SCHEMA = strawberry.Schema(query=Query)

"""`plan(manifests, cluster)`: where manifests would land if applied now, merged into `Query`.

    plan(manifests: String!, cluster: String) -> Plan!

A view of `service.questions.plan`: per cluster of the request's scope (or the one asked),
every pod the manifests would create (replica by replica) or claim planned alone, placed (the
node, and per claim the devices it would take) or not (the verdict of explainClaim for the
claim that blocks it, with the request counts and the holders the asker may see), and lint's
findings. YAML that does not parse is a GraphQL error with code `BAD_YAML`.
"""

from __future__ import annotations

import enum

import strawberry
from graphql import GraphQLError

from dra_mirror.service.diagnostics.plan_results import ClaimOutcome, ItemPlan
from dra_mirror.service.questions import diagnosis
from dra_mirror.service.questions.facts import plan_summary
from dra_mirror.service.questions.plan import ClusterAnswer, plan_manifests

from .context import Info
from .diagnostics_types import ClaimHolder, LintFinding, ObjectRef, RequestDiagnosis
from .scalars import JSON


@strawberry.enum(description="A planned pod's fate: placeable, or why it would wait.")
class PlanVerdict(enum.Enum):
    PLACEABLE = "placeable"
    CLASS_MISSING = "class-missing"
    DRIVER_MISSING = "driver-missing"
    NO_DEVICES = "no-devices"
    NO_MATCH = "no-match"
    SELECTOR_ERROR = "selector-error"
    DERIVED_ATTRIBUTE_ERROR = "derived-attribute-error"
    ALL_HELD = "all-held"
    SHARING_OFF = "sharing-off"
    TAINTED = "tainted"
    NO_CAPACITY = "no-capacity"
    NOT_ENOUGH = "not-enough"
    NEVER_FITS = "never-fits"
    CONSTRAINTS = "constraints"
    SEARCH_LIMIT = "search-limit"
    UNSUPPORTED = "unsupported"
    NODE_RESOURCES = "node-resources"
    CLAIMS_APART = "claims-apart"
    NO_NODES = "no-nodes"
    NODE_NAME_PINNED = "node-name-pinned"
    CLAIM_MISSING = "claim-missing"
    TEMPLATE_MISSING = "template-missing"
    CLAIM_DELETING = "claim-deleting"
    INVALID = "invalid"


@strawberry.type(description="A device a planned claim would take (one allocation result).")
class PlannedDevice:
    request: str
    driver: str
    pool: str
    device: str
    share_id: str | None = strawberry.field(
        name="shareID", description="Set for a share of a shareable device."
    )
    consumed_capacity: JSON | None


@strawberry.type(description="One claim of a planned pod: the claim it resolves to, and where.")
class PlannedClaim:
    o: strawberry.Private[ClaimOutcome]

    @strawberry.field(description="The pod-local name (spec.resourceClaims[].name).")
    def pod_claim(self) -> str:
        return self.o.claim.pod_claim

    @strawberry.field(
        description="The claim's name; `?` marks characters Kubernetes picks at random."
    )
    def name(self) -> str:
        return self.o.claim.name

    @strawberry.field(description="The ResourceClaimTemplate it is generated from.")
    def template(self) -> str | None:
        return self.o.claim.template

    @strawberry.field(description="Named by resourceClaimName: one claim for every pod using it.")
    def shared(self) -> bool:
        return self.o.claim.shared

    @strawberry.field(description="An existing claim, allocated already (its devices are kept).")
    def allocated_before(self) -> bool:
        return self.o.allocated_before

    @strawberry.field(description="The node its devices are on; null: network-attached.")
    def node(self) -> str | None:
        return self.o.node

    @strawberry.field
    def devices(self) -> list[PlannedDevice]:
        return [
            PlannedDevice(
                request=r.request,
                driver=r.driver,
                pool=r.pool,
                device=r.device,
                share_id=r.share_id,
                consumed_capacity=JSON(dict(r.consumed_capacity)) if r.consumed_capacity else None,
            )
            for r in self.o.results
        ]


@strawberry.type(description="A pod the manifests would create (or a claim planned alone).")
class PlanItem:
    i: strawberry.Private[ItemPlan]

    @strawberry.field(description="Pod, or ResourceClaim / ResourceClaimTemplate no pod uses.")
    def kind(self) -> str:
        return self.i.kind

    @strawberry.field(description='"Kind namespace/name" of what the manifests define.')
    def workload(self) -> str:
        return self.i.workload

    @strawberry.field
    def namespace(self) -> str:
        return self.i.namespace

    @strawberry.field(description="The pod's name as its controller makes it (`?`: random).")
    def name(self) -> str:
        return self.i.name

    @strawberry.field(description="The replica (StatefulSet ordinal, Job index), from 0.")
    def replica(self) -> int:
        return self.i.replica

    @strawberry.field
    def placeable(self) -> bool:
        return self.i.placeable

    @strawberry.field
    def verdict(self) -> PlanVerdict:
        return PlanVerdict(self.i.verdict)

    @strawberry.field(description="Where it lands, or why it would wait, in one sentence.")
    def message(self) -> str:
        return self.i.message

    @strawberry.field(description="The node the pod would be bound to.")
    def node(self) -> str | None:
        return self.i.node

    @strawberry.field
    def claims(self) -> list[PlannedClaim]:
        return [PlannedClaim(o=o) for o in self.i.claims]

    @strawberry.field(description="The claim that keeps the pod waiting.")
    def blocking_claim(self) -> str | None:
        return self.i.blocking_claim

    @strawberry.field(description="explainClaim's counts per request of the blocking claim.")
    def requests(self) -> list[RequestDiagnosis]:
        return [RequestDiagnosis(v=v) for v in self.i.requests]

    @strawberry.field(description="Claims holding the devices it wants (those you may see).")
    def holders(self) -> list[ClaimHolder]:
        return [ClaimHolder(h=h) for h in self.i.holders]

    @strawberry.field(description="Holders in namespaces outside your scope (not named).")
    def holders_hidden(self) -> int:
        return self.i.holders_hidden

    @strawberry.field(description="Idle holders whose release would let it be placed.")
    def freed_by(self) -> list[ObjectRef]:
        return [ObjectRef.of(k) for k in self.i.freed_by]

    @strawberry.field(description="Such idle holders outside your scope (not named).")
    def freed_hidden(self) -> int:
        return self.i.freed_hidden


@strawberry.type(description="The plan of the manifests in one cluster.")
class ClusterPlanResult:
    a: strawberry.Private[ClusterAnswer]

    @strawberry.field
    def cluster(self) -> str:
        return self.a.plan.cluster

    @strawberry.field(description="Every pod and claim would be placed now.")
    def placeable(self) -> bool:
        return self.a.plan.placeable

    @strawberry.field(description='"3 of 3 pods placeable" and the like.')
    def summary(self) -> str:
        return plan_summary(self.a.plan)

    @strawberry.field
    def items(self) -> list[PlanItem]:
        return [PlanItem(i=i) for i in self.a.plan.items]

    @strawberry.field(description="lint's common mistakes, against this cluster's facts.")
    def findings(self) -> list[LintFinding]:
        return [LintFinding(f=f) for f in self.a.findings]


@strawberry.type(description="Where manifests would land if applied now, per cluster.")
class Plan:
    clusters: list[ClusterPlanResult]
    pods: int = strawberry.field(description="Pods the manifests create (in each cluster).")
    skipped: list[str] = strawberry.field(description="Documents not planned, and why.")


@strawberry.type
class Query:
    @strawberry.field(
        description="If these manifests (YAML: Deployment, StatefulSet, Job, CronJob, Pod, "
        "ResourceClaim, ResourceClaimTemplate) were applied now: in which cluster and on which "
        "nodes their claims would be allocated, or why each pod would wait and behind whom. "
        "Nothing is applied or written. `cluster`: plan in that cluster only."
    )
    async def plan(self, info: Info, manifests: str, cluster: str | None = None) -> Plan:
        try:
            answer = await plan_manifests(info.context.reader, manifests, cluster=cluster)
        except diagnosis.ManifestError as error:
            raise GraphQLError(str(error), extensions={"code": "BAD_YAML"}) from error
        return Plan(
            clusters=[ClusterPlanResult(a=a) for a in answer.clusters],
            pods=answer.pods,
            skipped=answer.skipped,
        )

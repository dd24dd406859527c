"""GraphQL types of the diagnostics: a claim's diagnosis, lint findings, a device search.

They are views of the pure results (`service.diagnostics`): `ClaimDiagnosis` of
`explain.Diagnosis` (one `RequestDiagnosis` per request alternative with the counts the
operations manual asks for: the class covers N devices, each selector leaves M, K are free or
shareable, on which nodes, which claims hold the rest), `LintFinding` of `lint.Finding`.
Verdicts are one enum whose values are the pure code's names upper-cased (`all-held` →
`ALL_HELD`); the message stays the manual's sentence. Object links (the claim, holders, pods)
resolve through the request's loaders, as every link of the graph does.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Annotated

import strawberry

from dra_mirror.service.diagnostics.diagnoses import Check, Diagnosis, Holder
from dra_mirror.service.diagnostics.lint import Finding
from dra_mirror.service.diagnostics.verdicts import RequestVerdict
from dra_mirror.service.model.records import ClaimRecord, ObjectKey, PodRecord
from dra_mirror.service.questions.facts import selector_counts

from .context import Info
from .scalars import DateTime, to_datetime

if TYPE_CHECKING:
    from .claims import ResourceClaim
    from .pods import Pod

ClaimT = Annotated["ResourceClaim", strawberry.lazy("dra_mirror.schema.claims")]
PodT = Annotated["Pod", strawberry.lazy("dra_mirror.schema.pods")]


@strawberry.enum(description="A diagnosis in the operations manual's words (see the message).")
class DiagnosisVerdict(enum.Enum):
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
    FITS = "fits"
    NODE_RESOURCES = "node-resources"
    ALLOCATABLE = "allocatable"
    OK = "ok"
    IDLE = "idle"
    POD_NOT_RUNNING = "pod-not-running"
    DELETING = "deleting"


@strawberry.enum(description="How bad a lint finding is.")
class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"


@strawberry.type(description="A namespaced object named by identity (it may be gone since).")
class ObjectRef:
    cluster: str
    kind: str
    namespace: str
    name: str

    @staticmethod
    def of(key: ObjectKey) -> ObjectRef:
        return ObjectRef(cluster=key.cluster, kind=key.kind, namespace=key.namespace, name=key.name)


@strawberry.type(description="How many devices were left after one selector.")
class SelectorCount:
    expression: str
    passing: int = strawberry.field(description="Devices left after this selector.")
    rejected: int = strawberry.field(description="Devices this selector turned away.")


@strawberry.type(description="A selector that failed to compile or to evaluate (never 'no match').")
class SelectorFailure:
    expression: str
    message: str


@strawberry.type(description="One request (or firstAvailable alternative `req/sub`) of a claim.")
class RequestDiagnosis:
    v: strawberry.Private[RequestVerdict]

    @strawberry.field
    def request(self) -> str:
        return self.v.request

    @strawberry.field
    def device_class_name(self) -> str | None:
        return self.v.class_name

    @strawberry.field
    def class_exists(self) -> bool:
        return self.v.class_exists

    @strawberry.field(description="Devices the DeviceClass covers (its selectors pass).")
    def class_devices(self) -> int:
        return self.v.class_matched

    @strawberry.field(description="Each request selector in order, with the devices it left.")
    def selectors(self) -> list[SelectorCount]:
        return [
            SelectorCount(expression=e, passing=p, rejected=r)
            for e, p, r in selector_counts(self.v)
        ]

    @strawberry.field
    def selector_errors(self) -> list[SelectorFailure]:
        return [SelectorFailure(expression=e, message=m) for e, m in self.v.selector_errors]

    @strawberry.field(description="Matching devices that could be given now (free or shareable).")
    def free_or_shareable(self) -> int:
        return self.v.free_or_shareable

    @strawberry.field(description="Nodes where those devices are.")
    def nodes(self) -> list[str]:
        return list(self.v.nodes)

    @strawberry.field(description="Claims holding the matching devices that are not free.")
    def held_by(self) -> list[ObjectRef]:
        return [ObjectRef.of(k) for k in self.v.held_by]

    @strawberry.field(description="Devices the request needs.")
    def needed(self) -> int:
        return self.v.needed

    @strawberry.field
    def verdict(self) -> DiagnosisVerdict:
        return DiagnosisVerdict(self.v.verdict)

    @strawberry.field(description="The verdict of this request in one line.")
    def summary(self) -> str:
        return self.v.summary()


@strawberry.type(description="A claim holding devices the diagnosed claim wanted.")
class ClaimHolder:
    h: strawberry.Private[Holder]

    @strawberry.field
    def claim(self) -> ObjectRef:
        return ObjectRef.of(self.h.claim)

    @strawberry.field(description="Its consumer pods (status.reservedFor).")
    def pods(self) -> list[ObjectRef]:
        return [ObjectRef.of(k) for k in self.h.pods]

    @strawberry.field
    def running(self) -> bool:
        return self.h.running

    @strawberry.field(description="Allocated, and no consumer pod Running: a cleanup candidate.")
    def idle(self) -> bool:
        return self.h.idle

    @strawberry.field
    def idle_since(self) -> DateTime | None:
        return to_datetime(self.h.idle_since)

    @strawberry.field(description="The holding claim as mirrored now.")
    async def resource_claim(self, info: Info) -> ClaimT | None:
        from .claims import ResourceClaim

        record = await info.context.loaders.record(ClaimRecord, self.h.claim)
        return ResourceClaim(record=record) if record is not None else None


@strawberry.type(description="One item of the manual's checklist for an allocated claim.")
class ClaimCheck:
    c: strawberry.Private[Check]

    @strawberry.field(description="allocated | node | devices | consumers | running")
    def name(self) -> str:
        return self.c.name

    @strawberry.field
    def ok(self) -> bool:
        return self.c.ok

    @strawberry.field
    def detail(self) -> str:
        return self.c.detail


@strawberry.type(description="Why a claim is Pending, or whether an allocated one is healthy.")
class ClaimDiagnosis:
    d: strawberry.Private[Diagnosis]

    @strawberry.field
    def cluster(self) -> str:
        return self.d.claim.cluster

    @strawberry.field
    def namespace(self) -> str:
        return self.d.claim.namespace

    @strawberry.field
    def name(self) -> str:
        return self.d.claim.name

    @strawberry.field(description="pending | allocated | reserved | deleting")
    def state(self) -> str:
        return self.d.state

    @strawberry.field
    def verdict(self) -> DiagnosisVerdict:
        return DiagnosisVerdict(self.d.verdict)

    @strawberry.field(description="The diagnosis in one sentence of the operations manual.")
    def message(self) -> str:
        return self.d.message

    @strawberry.field(description="Per request (pending claims the allocator cannot place).")
    def requests(self) -> list[RequestDiagnosis]:
        return [RequestDiagnosis(v=v) for v in self.d.requests]

    @strawberry.field(description="Claims holding what it wants; idle ones first kept when cut.")
    def holders(self) -> list[ClaimHolder]:
        return [ClaimHolder(h=h) for h in self.d.holders]

    @strawberry.field(description="Holders in all (the list may be cut).")
    def holders_total(self) -> int:
        return self.d.holders_total

    @strawberry.field(
        description="Holders in namespaces outside the asker's scope: counted in holdersTotal "
        "and in every verdict, never named."
    )
    def holders_hidden(self) -> int:
        return self.d.holders_hidden

    @strawberry.field(description="The checklist of an allocated claim (empty when pending).")
    def checks(self) -> list[ClaimCheck]:
        return [ClaimCheck(c=c) for c in self.d.checks]

    @strawberry.field(description="Pods that reference the claim.")
    def pods(self) -> list[ObjectRef]:
        return [ObjectRef.of(k) for k in self.d.pods]

    @strawberry.field(
        description="Pending pods ahead of the claim's pods in the scheduling queue whose claims "
        "could use the same devices: they get a freed device first (only those the asker may "
        "see; the message counts the others)."
    )
    def ahead(self) -> list[ObjectRef]:
        return [ObjectRef.of(k) for k in self.d.ahead]

    @strawberry.field(description="GPU nodes where the class's driver publishes no devices.")
    def nodes_without_driver(self) -> list[str]:
        return list(self.d.nodes_without_driver)

    @strawberry.field(description="The claim as mirrored now.")
    async def resource_claim(self, info: Info) -> ClaimT | None:
        from .claims import ResourceClaim

        record = await info.context.loaders.record(ClaimRecord, self.d.claim)
        return ResourceClaim(record=record) if record is not None else None

    @strawberry.field(description="The pods that reference the claim, as mirrored now.")
    async def pod_objects(self, info: Info) -> list[PodT]:
        from .pods import Pod

        found = await info.context.loaders.records_of(PodRecord, self.d.pods)
        return [Pod(record=r) for r in found]


@strawberry.type(description="A common DRA mistake found in a manifest or a mirrored cluster.")
class LintFinding:
    f: strawberry.Private[Finding]

    @strawberry.field(description="The rule, e.g. claim-not-used, template-per-replica.")
    def rule(self) -> str:
        return self.f.rule

    @strawberry.field
    def severity(self) -> Severity:
        return Severity(self.f.severity)

    @strawberry.field(description='"Kind namespace/name"')
    def object(self) -> str:
        return self.f.object

    @strawberry.field(description="The field, e.g. spec.containers[0].resources.claims[1].")
    def path(self) -> str:
        return self.f.path

    @strawberry.field
    def message(self) -> str:
        return self.f.message

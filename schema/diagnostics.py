"""The diagnostics' entry points in the graph, merged into the root `Query` (`schema.__init__`):

    explainClaim(cluster, namespace, name, eligibleNodes)  -> ClaimDiagnosis (null: no claim)
    lint(cluster)                                          -> [LintFinding!]!
    lintManifests(yaml, cluster)                           -> [LintFinding!]!
    findDevices(selector, status, cluster, first, after)   -> DeviceSearch!

Each reads the state through `info.context.reader` (scoped, errors translated) via
`service.questions.diagnosis`, whose allocation ledger reads what the model says is taken. Bad client input
is a GraphQL error with a code: `BAD_YAML` (lintManifests), `BAD_SELECTOR` (findDevices, the
CEL compiler's message). A selector that fails to *evaluate* on some devices is not an error of
the query: those devices are counted and listed in `evaluationErrors`, never as "no match".
"""

from __future__ import annotations

from collections.abc import Iterable

import strawberry
from graphql import GraphQLError

from dra_mirror.service.diagnostics.lint import Finding, lint_manifests
from dra_mirror.service.model.records import DeviceEntry, DeviceKey
from dra_mirror.service.questions import diagnosis

from . import device_state
from .context import Info
from .devices import Device
from .diagnostics_types import ClaimDiagnosis, LintFinding
from .paging import Connection, Edge, PageInfo, paginate
from .scalars import DeviceStatus

MAX_EVALUATION_ERRORS = 20


@strawberry.type(description="A device on which a findDevices selector failed to evaluate.")
class DeviceEvaluationError:
    cluster: str
    driver: str
    pool: str
    device: str
    message: str


@strawberry.type(description="The devices a CEL selector accepts, across clusters, paged.")
class DeviceSearch:
    page: strawberry.Private[Connection[Device]]
    failed: strawberry.Private[list]
    selector: str

    @strawberry.field
    def edges(self) -> list[Edge[Device]]:
        return self.page.edges

    @strawberry.field
    def page_info(self) -> PageInfo:
        return self.page.page_info

    @strawberry.field(description="Devices matching (and of the status asked), all pages.")
    def total_count(self) -> int:
        return self.page.total_count

    @strawberry.field(description="The nodes of this page, without edges.")
    def nodes(self) -> list[Device]:
        return [edge.node for edge in self.page.edges]

    @strawberry.field(description="Devices on which the selector failed to evaluate.")
    def evaluation_error_count(self) -> int:
        return len(self.failed)

    @strawberry.field(description=f"The first {MAX_EVALUATION_ERRORS} evaluation failures.")
    def evaluation_errors(self) -> list[DeviceEvaluationError]:
        return [
            DeviceEvaluationError(
                cluster=e.key.cluster,
                driver=e.key.driver,
                pool=e.key.pool,
                device=e.key.device,
                message=error.message,
            )
            for e, error in self.failed[:MAX_EVALUATION_ERRORS]
        ]


def _device_key(entry: DeviceEntry) -> DeviceKey:
    return entry.key


def _device(entry: DeviceEntry) -> Device:
    return Device(entry=entry)


async def _with_status(info: Info, entries: list[DeviceEntry], wanted: str) -> list[DeviceEntry]:
    """The entries of one status: from an in-process index directly, else in one store call
    (nothing primed: a DataLoader future per device costs seconds at 100,000 devices; the
    page's devices are primed afterwards by `prefetch`), else derived by `device_state`."""
    reader = info.context.reader
    known = diagnosis.local_statuses(reader, entries)
    missing = [i for i, s in enumerate(known) if s is None]
    if missing:
        answers = await reader.device_status([entries[i].key for i in missing])
        for i, status in zip(missing, answers, strict=True):
            known[i] = status
        missing = [i for i in missing if known[i] is None]
    if missing:
        derived = await device_state.statuses(info.context.loaders, [entries[i] for i in missing])
        for i, status in zip(missing, derived, strict=True):
            known[i] = status
    return [e for e, s in zip(entries, known, strict=True) if s == wanted]


def _findings(found: Iterable[Finding]) -> list[LintFinding]:
    return [LintFinding(f=f) for f in found]


@strawberry.type
class Query:
    @strawberry.field(
        description="Why a claim is Pending (per request: class coverage, selector counts, free "
        "devices, holders) or, allocated, the manual's checklist. `eligibleNodes`: the nodes its "
        "pods may use; by default those its waiting pods' nodeSelector and required node "
        "affinity admit. Null when there is no such claim."
    )
    async def explain_claim(
        self,
        info: Info,
        cluster: str,
        namespace: str,
        name: str,
        eligible_nodes: list[str] | None = None,
    ) -> ClaimDiagnosis | None:
        found = await diagnosis.diagnose_claim(
            info.context.reader, cluster, namespace, name, eligible_nodes=eligible_nodes
        )
        return ClaimDiagnosis(d=found) if found is not None else None

    @strawberry.field(
        description="The common DRA mistakes in a mirrored cluster: GPU nodes without a driver, "
        "classes matching nothing, pods' claims unused or in another namespace, device-plugin "
        "GPUs beside claims, template claims per replica left Pending."
    )
    async def lint(self, info: Info, cluster: str) -> list[LintFinding]:
        return _findings(await diagnosis.lint_mirrored(info.context.reader, cluster))

    @strawberry.field(
        description="The common DRA mistakes in manifests (YAML: Pod, Deployment, StatefulSet, "
        "Job, …); with `cluster`, also against that cluster's classes, claims and free devices."
    )
    async def lint_manifests(
        self, info: Info, yaml: str, cluster: str | None = None
    ) -> list[LintFinding]:
        try:
            docs = diagnosis.parse_manifests(yaml)
        except diagnosis.ManifestError as error:
            raise GraphQLError(str(error), extensions={"code": "BAD_YAML"}) from error
        facts = None
        if cluster is not None:
            facts = await diagnosis.cluster_facts(info.context.reader, cluster)
        return _findings(lint_manifests(docs, facts))

    @strawberry.field(
        description="Devices a CEL selector accepts (as a DeviceClass selector would), over every "
        "cluster or one, optionally of one status: 'an H200 with at least 80Gi, free now'."
    )
    async def find_devices(
        self,
        info: Info,
        selector: str,
        status: DeviceStatus | None = None,
        cluster: str | None = None,
        first: int | None = None,
        after: str | None = None,
    ) -> DeviceSearch:
        try:
            found = await diagnosis.find_devices(
                info.context.reader, selector, cluster=cluster,
                status=status.value if status is not None else None,
            )  # fmt: skip
        except diagnosis.BadSelector as error:
            raise GraphQLError(str(error), extensions={"code": "BAD_SELECTOR"}) from error
        entries = found.devices
        loaders = info.context.loaders
        if status is not None:
            entries = await _with_status(info, entries, status.value)
        entries.sort(key=_device_key)  # the keyset cursors need the key order
        page = paginate(
            entries,
            key=_device_key,
            node=_device,
            first=first,
            after=after,
            settings=info.context.settings,
            presorted=True,
        )
        await device_state.prefetch(loaders, [edge.node.entry for edge in page.edges])
        return DeviceSearch(page=page, failed=found.failed, selector=selector)

"""`RemoteQuestions(ask)`: the `Questions` of a mirror in another process, over its `/graphql`.

The command line (`--server`) and `dra-mirror mcp` on stdio reach a running mirror only through its
graph: each question here is one fixed document (two for who-holds when history must say since when
a claim holds a device) whose answer is decoded into the very answer the mirror's own process gives
(`service.questions.local`): the graph's question fields return the answer dataclasses field for
field (`schema.questions`, `schema.fragmentation`), and explain, plan, lint and history select the
fields of `service.questions.facts` and `history_facts`.

`ask` posts a document and returns its `data` (`service.cli.asking.over_http`); a GraphQL error
comes back as `QuestionError` — one with code `UNKNOWN_CLUSTER` as `UnknownCluster`, so a
mistyped cluster is refused here as it is in-process. `DOCUMENTS` lists the fixed documents (a
server running only registered documents registers them: `service.questions.documents`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import orjson

from .asking import Ask, NotSynced, QuestionError, UnknownCluster
from .capacity import CapacityRow, PhysicalDevice
from .claims import ClaimRow, Claims
from .facts import DIAGNOSIS_FIELDS, FINDING_FIELDS, PLAN_FIELDS
from .fragmentation import GpuFragments, NodeFragmentation
from .free import DeviceRow, Free
from .history_facts import (
    CLAIM_HISTORY,
    CONTENTION,
    DEVICE_HISTORY,
    UTILIZATION_AUDIT,
)
from .holdings import HoldingRow, NamedDevice, WhoHolds, product_name
from .pods import PodDevice, PodDevices
from .protocol import Facts
from .utilization import DeviceUse, HeldNotBusy, NotBusyRow

__all__ = ["DOCUMENTS", "RemoteQuestions", "explain_document"]

T = TypeVar("T")
RENAMED = {"share_id": "shareID"}


def _camel(name: str) -> str:
    if name in RENAMED:
        return RENAMED[name]
    head, *rest = name.split("_")
    return head + "".join(w.capitalize() for w in rest)


def _selection(cls: type, nested: Mapping[str, type] | None = None) -> str:
    nested = nested or {}
    parts = []
    for f in dataclasses.fields(cls):
        inner = nested.get(f.name)
        parts.append(f"{_camel(f.name)} {{ {_selection(inner)} }}" if inner else _camel(f.name))
    return " ".join(parts)


def _decode(cls: type[T], data: Mapping[str, Any], nested: Mapping[str, type] | None = None) -> T:
    nested = nested or {}
    values = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        value = data[_camel(f.name)]
        inner = nested.get(f.name)
        values[f.name] = [_decode(inner, v) for v in value] if inner else value
    return cls(**values)


CLUSTERS = "query ClusterNames { clusters { name } }"
CLUSTER_STATES = "query ClusterStates { clusters { name status { synced error } } }"
CLASSES = "query ClassNames($cluster: String) { deviceClasses(cluster: $cluster) { name } }"

WHO_HOLDS = """query WhoHolds($device: String!, $cluster: String) {
  clusters { name status { synced error } }
  devicesNamed(device: $device, cluster: $cluster) {
    cluster driver pool name uuid nodeName attributes status withheldAllocations
  }
  whoHolds(device: $device, cluster: $cluster) {
    cluster request shareID since
    device { driver pool name uuid nodeName attributes }
    claim { namespace name origin state idle idleSince }
    pods { namespace name phase }
  }
}"""

HELD_SINCE = """query HeldSince($device: String!, $cluster: String, $at: DateTime!) {
  whoHeld(device: $device, at: $at, cluster: $cluster) {
    cluster driver pool device namespace claim since
  }
}"""

FREE = f"""query Free($className: String, $cluster: String, $selector: String, $first: Int!) {{
  freeDevices(className: $className, cluster: $cluster, selector: $selector, first: $first) {{
    {_selection(Free, {"devices": DeviceRow})}
  }}
}}"""

WAITING = f"""query Waiting($className: String, $cluster: String, $first: Int!) {{
  waitingClaims(className: $className, cluster: $cluster, first: $first) {{
    {_selection(Claims, {"claims": ClaimRow})}
  }}
}}"""

IDLE = f"""query Idle($cluster: String, $first: Int!) {{
  idleClaims(cluster: $cluster, first: $first) {{ {_selection(Claims, {"claims": ClaimRow})} }}
}}"""

HELD_NOT_BUSY = f"""query HeldNotBusy($cluster: String, $first: Int!) {{
  heldNotBusy(cluster: $cluster, first: $first) {{
    {_selection(HeldNotBusy, {"claims": NotBusyRow})}
  }}
}}"""

DEVICE_UTILIZATION = f"""query DeviceUtilization($cluster: String) {{
  deviceUtilization(cluster: $cluster) {{ {_selection(DeviceUse)} }}
}}"""

CAPACITY = f"""query Capacity($cluster: String) {{
  capacity(cluster: $cluster) {{
    {_selection(CapacityRow, {"partitioned_devices": PhysicalDevice})}
  }}
}}"""

FRAGMENTATION = f"""query Fragmentation($cluster: String, $node: String, $className: String) {{
  fragmentation(cluster: $cluster, node: $node, className: $className) {{
    {_selection(NodeFragmentation, {"gpu_details": GpuFragments})} }}
}}"""

POD_DEVICES = f"""query PodDevices($namespace: String!, $name: String!, $cluster: String) {{
  podDevices(namespace: $namespace, name: $name, cluster: $cluster) {{
    {_selection(PodDevices, {"devices": PodDevice})}
  }}
}}"""

PLAN = f"""query Plan($manifests: String!, $cluster: String) {{
  plan(manifests: $manifests, cluster: $cluster) {{ {PLAN_FIELDS} }}
}}"""

LINT = f"query Lint($cluster: String!) {{ lint(cluster: $cluster) {{ {FINDING_FIELDS} }} }}"
LINT_MANIFESTS = (
    "query LintManifests($yaml: String!, $cluster: String) {"
    f" lintManifests(yaml: $yaml, cluster: $cluster) {{ {FINDING_FIELDS} }} }}"
)


def explain_document(clusters: list[str] | None) -> str:
    """explainClaim for one cluster (`$cluster`), or one aliased field per named cluster."""
    if clusters is None:
        return (
            "query Explain($cluster: String!, $namespace: String!, $name: String!,"
            " $nodes: [String!]) {"
            " c0: explainClaim(cluster: $cluster, namespace: $namespace, name: $name,"
            f" eligibleNodes: $nodes) {{ {DIAGNOSIS_FIELDS} }} }}"
        )
    fields = [
        f"c{i}: explainClaim(cluster: {orjson.dumps(c).decode()}, namespace: $namespace, "
        f"name: $name, eligibleNodes: $nodes) {{ {DIAGNOSIS_FIELDS} }}"
        for i, c in enumerate(clusters)
    ]
    return (
        "query Explain($namespace: String!, $name: String!, $nodes: [String!]) "
        f"{{ {' '.join(fields)} }}"
    )


DOCUMENTS: tuple[tuple[str, str], ...] = (
    ("ClusterNames", CLUSTERS),
    ("ClusterStates", CLUSTER_STATES),
    ("ClassNames", CLASSES),
    ("WhoHolds", WHO_HOLDS),
    ("HeldSince", HELD_SINCE),
    ("Free", FREE),
    ("Waiting", WAITING),
    ("Idle", IDLE),
    ("HeldNotBusy", HELD_NOT_BUSY),
    ("DeviceUtilization", DEVICE_UTILIZATION),
    ("Capacity", CAPACITY),
    ("Fragmentation", FRAGMENTATION),
    ("PodDevices", POD_DEVICES),
    ("Plan", PLAN),
    ("Lint", LINT),
    ("LintManifests", LINT_MANIFESTS),
    ("Explain", explain_document(None)),
    ("DeviceHistory", DEVICE_HISTORY),
    ("ClaimHistory", CLAIM_HISTORY),
    ("Contention", CONTENTION),
    ("UtilizationAudit", UTILIZATION_AUDIT),
)


class RemoteQuestions:
    """The `Questions` of the mirror `ask` reaches (see the module docstring)."""

    def __init__(self, ask: Ask) -> None:
        self.ask = ask

    async def clusters(self) -> list[str]:
        return sorted(c["name"] for c in (await self.ask(CLUSTERS, {}))["clusters"])

    async def unsynced(self) -> list[str]:
        found = (await self.ask(CLUSTER_STATES, {}))["clusters"]
        return sorted(c["name"] for c in found if not c["status"]["synced"])

    async def _check(
        self, cluster: str | None, states: Sequence[Mapping[str, Any]] | None = None
    ) -> None:
        """`UnknownCluster` or `NotSynced` for `cluster`, as in-process (`Asker.check_cluster`);
        `states`: the graph's `clusters { name status { synced error } }` when asked already."""
        if cluster is None:
            return
        if states is None:
            states = (await self.ask(CLUSTER_STATES, {}))["clusters"]
        synced = {c["name"]: c["status"]["synced"] for c in states}
        if cluster not in synced:
            raise UnknownCluster(cluster, list(synced))
        if not synced[cluster]:
            raise NotSynced([cluster], {c["name"]: c["status"].get("error") for c in states})

    async def class_names(self, cluster: str | None = None) -> list[str]:
        await self._check(cluster)
        data = await self.ask(CLASSES, {"cluster": cluster})
        return sorted({c["name"] for c in data["deviceClasses"]})

    async def who_holds(self, device: str, cluster: str | None = None) -> WhoHolds:
        data = await self.ask(WHO_HOLDS, {"device": device, "cluster": cluster})
        await self._check(cluster, data["clusters"])
        answer = WhoHolds(spec=device.strip(), cluster=cluster)
        for d in data["devicesNamed"]:
            answer.devices.append(
                NamedDevice(
                    cluster=d["cluster"], node=d["nodeName"], device=d["name"],
                    driver=d["driver"], pool=d["pool"], uuid=d["uuid"],
                    model=product_name(d["attributes"]), status=d["status"],
                    withheld=d["withheldAllocations"],
                )
            )  # fmt: skip
        for h in data["whoHolds"]:
            d, c = h["device"], h["claim"]
            if c is None:  # deleted since its holds were read
                continue
            answer.holdings.append(
                HoldingRow(
                    cluster=h["cluster"], node=d["nodeName"], device=d["name"],
                    driver=d["driver"], pool=d["pool"], uuid=d["uuid"],
                    model=product_name(d["attributes"]), claim=f"{c['namespace']}/{c['name']}",
                    origin=c["origin"], state=c["state"],
                    pods=[f"{p['namespace']}/{p['name']} ({p['phase']})" for p in h["pods"]],
                    since=h["since"], idle=c["idle"], idle_since=c["idleSince"],
                    request=h["request"], share_id=h["shareID"],
                )
            )  # fmt: skip
        if any(r.since is None for r in answer.holdings):
            await self._since_from_history(answer, cluster)
        return answer

    async def _since_from_history(self, answer: WhoHolds, cluster: str | None) -> None:
        """As in-process: when history saw the allocation begin, if the server has history
        the asker may read (otherwise `since` stays unknown)."""
        from datetime import UTC, datetime

        at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        try:
            data = await self.ask(HELD_SINCE, {"device": answer.spec, "cluster": cluster,
                                               "at": at})  # fmt: skip
        except QuestionError:
            return
        seen = {
            (a["cluster"], a["driver"], a["pool"], a["device"], f"{a['namespace']}/{a['claim']}"):
            a["since"]
            for a in data.get("whoHeld") or []
        }  # fmt: skip
        for row in answer.holdings:
            if row.since is None:
                row.since = seen.get((*row.device_ref, row.claim))

    async def free(
        self,
        class_name: str | None = None,
        cluster: str | None = None,
        *,
        selector: str | None = None,
        limit: int = 50,
    ) -> Free:
        variables = {"className": class_name, "cluster": cluster, "selector": selector,
                     "first": limit}  # fmt: skip
        data = await self.ask(FREE, variables)
        return _decode(Free, data["freeDevices"], {"devices": DeviceRow})

    async def waiting(
        self, class_name: str | None = None, cluster: str | None = None, *, limit: int = 50
    ) -> Claims:
        data = await self.ask(WAITING, {"className": class_name, "cluster": cluster,
                                        "first": limit})  # fmt: skip
        return _decode(Claims, data["waitingClaims"], {"claims": ClaimRow})

    async def idle(self, cluster: str | None = None, *, limit: int = 50) -> Claims:
        data = await self.ask(IDLE, {"cluster": cluster, "first": limit})
        return _decode(Claims, data["idleClaims"], {"claims": ClaimRow})

    async def device_busy(
        self, cluster: str, driver: str, pool: str, device: str
    ) -> DeviceUse | None:
        try:
            data = await self.ask(DEVICE_UTILIZATION, {"cluster": cluster})
        except QuestionError as error:
            if error.code == "UTILIZATION_DISABLED":
                return None
            raise
        for row in data["deviceUtilization"]:
            if (row["driver"], row["pool"], row["device"]) == (driver, pool, device):
                return _decode(DeviceUse, row)
        return None

    async def held_not_busy(self, cluster: str | None = None, *, limit: int = 50) -> HeldNotBusy:
        data = await self.ask(HELD_NOT_BUSY, {"cluster": cluster, "first": limit})
        return _decode(HeldNotBusy, data["heldNotBusy"], {"claims": NotBusyRow})

    async def explain(
        self,
        namespace: str,
        name: str,
        cluster: str | None = None,
        nodes: Sequence[str] | None = None,
    ) -> list[Facts]:
        wanted = list(nodes) if nodes else None
        variables: dict[str, Any] = {"namespace": namespace, "name": name, "nodes": wanted}
        if cluster is not None:
            await self._check(cluster)
            data = await self.ask(explain_document(None), {**variables, "cluster": cluster})
        else:  # as in-process: the synced clusters (none synced: NotSynced)
            states = (await self.ask(CLUSTER_STATES, {}))["clusters"]
            clusters = sorted(c["name"] for c in states if c["status"]["synced"])
            if not clusters:
                if states:
                    errors = {c["name"]: c["status"].get("error") for c in states}
                    raise NotSynced(list(errors), errors)
                return []
            data = await self.ask(explain_document(clusters), variables)
        return [d for d in data.values() if d is not None]

    async def plan(self, manifests: str, cluster: str | None = None) -> Facts:
        await self._check(cluster)
        data = await self.ask(PLAN, {"manifests": manifests, "cluster": cluster})
        return dict(data["plan"])

    async def lint(self, cluster: str) -> list[Facts]:
        await self._check(cluster)
        return list((await self.ask(LINT, {"cluster": cluster}))["lint"])

    async def lint_manifests(self, text: str, cluster: str | None = None) -> list[Facts]:
        await self._check(cluster)
        data = await self.ask(LINT_MANIFESTS, {"yaml": text, "cluster": cluster})
        return list(data["lintManifests"])

    async def capacity(self, cluster: str | None = None) -> list[CapacityRow]:
        data = await self.ask(CAPACITY, {"cluster": cluster})
        nested = {"partitioned_devices": PhysicalDevice}
        return [_decode(CapacityRow, r, nested) for r in data["capacity"]]

    async def fragmentation(
        self, cluster: str | None = None, *, node: str | None = None, class_name: str | None = None
    ) -> list[NodeFragmentation]:
        variables = {"cluster": cluster, "node": node, "className": class_name}
        rows = (await self.ask(FRAGMENTATION, variables))["fragmentation"]
        return [_decode(NodeFragmentation, r, {"gpu_details": GpuFragments}) for r in rows]

    async def pod_devices(
        self, namespace: str, name: str, cluster: str | None = None
    ) -> list[PodDevices]:
        data = await self.ask(POD_DEVICES, {"namespace": namespace, "name": name,
                                            "cluster": cluster})  # fmt: skip
        return [_decode(PodDevices, p, {"devices": PodDevice}) for p in data["podDevices"]]

    async def device_history(
        self, device: str, start: str, end: str, cluster: str | None = None
    ) -> list[Facts]:
        variables = {"device": device, "from": start, "to": end, "cluster": cluster}
        return list((await self.ask(DEVICE_HISTORY, variables))["deviceHistory"])

    async def claim_history(self, cluster: str, namespace: str, name: str) -> list[Facts]:
        variables = {"cluster": cluster, "namespace": namespace, "name": name}
        return list((await self.ask(CLAIM_HISTORY, variables))["claimHistory"])

    async def contention(
        self, start: str, end: str, group_by: str = "CLASS", cluster: str | None = None
    ) -> list[Facts]:
        variables = {"from": start, "to": end, "groupBy": group_by.upper(), "cluster": cluster}
        return list((await self.ask(CONTENTION, variables))["contention"])

    async def utilization_audit(
        self, start: str, end: str, group_by: str = "NAMESPACE", cluster: str | None = None
    ) -> list[Facts]:
        variables = {"from": start, "to": end, "groupBy": group_by.upper(), "cluster": cluster}
        return list((await self.ask(UTILIZATION_AUDIT, variables))["utilizationAudit"])

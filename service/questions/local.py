"""`LocalQuestions(asker)`: the `Questions` answered in this process, from the store.

Each method is one question function of this package called with the asker (its scoped
reader, history and clock): `holdings.who_holds`, `free.free_devices`, `claims.waiting` and
`idle`, `explain.explain`, `plan.plan`, `lint.lint_cluster` and `lint_manifests`,
`capacity.capacity`, `pods.pod_devices`, `history.device_history`, `claim_history` and
`contention` (the last three given as `history_facts`). Nothing here asks the graph.
"""

from __future__ import annotations

from collections.abc import Sequence

from dra_mirror.service.model.identity import DeviceKey
from dra_mirror.service.model.records import DEVICE_CLASS, DeviceClassRecord

from . import (
    capacity,
    claims,
    explain,
    fragmentation,
    free,
    history,
    holdings,
    lint,
    plan,
    pods,
    utilization,
)
from .asker import Asker
from .history_facts import (
    claim_life_facts,
    contention_facts,
    timeline_facts,
    utilization_audit_facts,
)
from .protocol import Facts

__all__ = ["LocalQuestions"]


class LocalQuestions:
    def __init__(self, asker: Asker) -> None:
        self.asker = asker

    async def clusters(self) -> list[str]:
        return await self.asker.known_clusters()

    async def unsynced(self) -> list[str]:
        return await self.asker.unsynced()

    async def class_names(self, cluster: str | None = None) -> list[str]:
        names: set[str] = set()
        for name in await self.asker.check_cluster(cluster):
            found = await self.asker.reader.list(DEVICE_CLASS, cluster=name)
            names.update(r.meta.name for r in found if isinstance(r, DeviceClassRecord))
        return sorted(names)

    async def who_holds(self, device: str, cluster: str | None = None) -> holdings.WhoHolds:
        return await holdings.who_holds(self.asker, device, cluster)

    async def free(
        self,
        class_name: str | None = None,
        cluster: str | None = None,
        *,
        selector: str | None = None,
        limit: int = 50,
    ) -> free.Free:
        return await free.free_devices(
            self.asker, class_name, cluster, selector=selector, limit=limit
        )

    async def waiting(
        self, class_name: str | None = None, cluster: str | None = None, *, limit: int = 50
    ) -> claims.Claims:
        return await claims.waiting(self.asker, class_name, cluster, limit=limit)

    async def idle(self, cluster: str | None = None, *, limit: int = 50) -> claims.Claims:
        return await claims.idle(self.asker, cluster, limit=limit)

    async def held_not_busy(
        self, cluster: str | None = None, *, limit: int = 50
    ) -> utilization.HeldNotBusy:
        return await utilization.held_not_busy(self.asker, cluster, limit=limit)

    async def device_busy(
        self, cluster: str, driver: str, pool: str, device: str
    ) -> utilization.DeviceUse | None:
        key = DeviceKey(cluster, driver, pool, device)
        return await utilization.device_busy(self.asker, key)

    async def explain(
        self,
        namespace: str,
        name: str,
        cluster: str | None = None,
        nodes: Sequence[str] | None = None,
    ) -> list[Facts]:
        return await explain.explain(self.asker, namespace, name, cluster, nodes)

    async def plan(self, manifests: str, cluster: str | None = None) -> Facts:
        return await plan.plan(self.asker, manifests, cluster)

    async def lint(self, cluster: str) -> list[Facts]:
        return await lint.lint_cluster(self.asker, cluster)

    async def lint_manifests(self, text: str, cluster: str | None = None) -> list[Facts]:
        return await lint.lint_manifests(self.asker, text, cluster)

    async def capacity(self, cluster: str | None = None) -> list[capacity.CapacityRow]:
        return await capacity.capacity(self.asker, cluster)

    async def fragmentation(
        self, cluster: str | None = None, *, node: str | None = None, class_name: str | None = None
    ) -> list[fragmentation.NodeFragmentation]:
        return await fragmentation.fragmentation(
            self.asker, cluster, node=node, class_name=class_name
        )

    async def pod_devices(
        self, namespace: str, name: str, cluster: str | None = None
    ) -> list[pods.PodDevices]:
        return await pods.pod_devices(self.asker, namespace, name, cluster)

    async def device_history(
        self, device: str, start: str, end: str, cluster: str | None = None
    ) -> list[Facts]:
        start_us, end_us = history.window(start, end)
        found = await history.device_history(self.asker, device, start_us, end_us, cluster)
        return [timeline_facts(t) for t in found]

    async def claim_history(self, cluster: str, namespace: str, name: str) -> list[Facts]:
        found = await history.claim_history(self.asker, cluster, namespace, name)
        return [claim_life_facts(c) for c in found]

    async def contention(
        self, start: str, end: str, group_by: str = "CLASS", cluster: str | None = None
    ) -> list[Facts]:
        start_us, end_us = history.window(start, end)
        rows = await history.contention(self.asker, start_us, end_us, group_by.upper(), None,
                                        cluster)  # fmt: skip
        return [contention_facts(r) for r in rows]

    async def utilization_audit(
        self, start: str, end: str, group_by: str = "NAMESPACE", cluster: str | None = None
    ) -> list[Facts]:
        start_us, end_us = history.window(start, end)
        rows = await history.utilization_audit(
            self.asker, start_us, end_us, group_by.upper(), cluster
        )
        return [utilization_audit_facts(r) for r in rows]

"""`Questions`: every question the mirror answers, as the front ends ask them.

Two implementations give the same answers:

* `service.questions.local.LocalQuestions(asker)` — in the mirror's own process, from the
  store and the history, through the asker's scope (Slack, `/mcp`, the command line's
  `--kubeconfig` questions, the graph's resolvers through the same functions);
* `service.questions.remote.RemoteQuestions(ask)` — a mirror in another process, over its
  `/graphql` (the command line's `--server`, `dra-mirror mcp` on stdio).

Answers are the dataclasses of each question's module (`WhoHolds`, `Free`, `Claims`,
`CapacityRow`, `PodDevices`) or the graph's facts as JSON values (`explain`, `plan`, `lint`,
history: `service.questions.facts`, `history_facts`). Errors are `QuestionError`s
(`service.questions.asking`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from . import utilization
from .capacity import CapacityRow
from .claims import Claims
from .fragmentation import NodeFragmentation
from .free import Free
from .holdings import WhoHolds
from .pods import PodDevices

__all__ = ["Facts", "Questions"]

Facts = dict[str, Any]


class Questions(Protocol):
    async def clusters(self) -> list[str]:
        """The clusters the asker may see, by name."""
        ...

    async def unsynced(self) -> list[str]:
        """The clusters the asker may see that have not synced yet: a question about every
        cluster leaves them out (`service.questions.asker.Asker.check_cluster`)."""
        ...

    async def class_names(self, cluster: str | None = None) -> list[str]:
        """The DeviceClass names of `cluster` (or every cluster), sorted, once each."""
        ...

    async def who_holds(self, device: str, cluster: str | None = None) -> WhoHolds: ...

    async def free(
        self,
        class_name: str | None = None,
        cluster: str | None = None,
        *,
        selector: str | None = None,
        limit: int = 50,
    ) -> Free: ...

    async def waiting(
        self, class_name: str | None = None, cluster: str | None = None, *, limit: int = 50
    ) -> Claims: ...

    async def idle(self, cluster: str | None = None, *, limit: int = 50) -> Claims: ...

    async def held_not_busy(
        self, cluster: str | None = None, *, limit: int = 50
    ) -> utilization.HeldNotBusy: ...

    async def device_busy(
        self, cluster: str, driver: str, pool: str, device: str
    ) -> utilization.DeviceUse | None: ...

    async def explain(
        self,
        namespace: str,
        name: str,
        cluster: str | None = None,
        nodes: Sequence[str] | None = None,
    ) -> list[Facts]: ...

    async def plan(self, manifests: str, cluster: str | None = None) -> Facts: ...

    async def lint(self, cluster: str) -> list[Facts]: ...

    async def lint_manifests(self, text: str, cluster: str | None = None) -> list[Facts]: ...

    async def capacity(self, cluster: str | None = None) -> list[CapacityRow]: ...

    async def fragmentation(
        self, cluster: str | None = None, *, node: str | None = None, class_name: str | None = None
    ) -> list[NodeFragmentation]:
        """Free GPU memory stranded in partition layouts and the largest placeable partition,
        per node and DeviceClass (`service.questions.fragmentation`)."""
        ...

    async def pod_devices(
        self, namespace: str, name: str, cluster: str | None = None
    ) -> list[PodDevices]: ...

    async def device_history(
        self, device: str, start: str, end: str, cluster: str | None = None
    ) -> list[Facts]:
        """The device's timelines over [start, end) (RFC 3339), `history_facts.timeline_facts`."""
        ...

    async def claim_history(self, cluster: str, namespace: str, name: str) -> list[Facts]: ...

    async def contention(
        self, start: str, end: str, group_by: str = "CLASS", cluster: str | None = None
    ) -> list[Facts]: ...

    async def utilization_audit(
        self, start: str, end: str, group_by: str = "NAMESPACE", cluster: str | None = None
    ) -> list[Facts]:
        """Busy- against held-hours and energy per group over [start, end) (RFC 3339),
        `history_facts.utilization_audit_facts`."""
        ...

"""Fragmentation of partitionable GPUs as a field of the graph, merged into the root `Query`:

    fragmentation(cluster, node, className) -> [NodeFragmentation!]!

The resolver returns `service.questions.fragmentation`'s answer field for field (camelCased), as
the command line over HTTP and the MCP stdio tools read it. An unknown cluster or class is a
GraphQL error with a code (`UNKNOWN_CLUSTER`, `BAD_INPUT`).
"""

from __future__ import annotations

from typing import Any

import strawberry

from dra_mirror.service.questions import fragmentation

from .asked import asked
from .context import Info


@strawberry.type(description="A partitionable GPU (the devices consuming one counter set), as "
                 "one DeviceClass sees it.")  # fmt: skip
class GpuFragments:
    physical: str = strawberry.field(description="The GPU: its uuid, else driver/pool/set.")
    node: str | None
    pool: str
    memory: float | None = strawberry.field(
        description="Bytes: its counter set's `memory` counter (null: the set has none)."
    )
    free_memory: float | None = strawberry.field(
        description="Bytes of it its allocated devices do not consume."
    )
    partly_allocated: bool = strawberry.field(
        description="Some counter of its set is in use and some is still free (held whole: no)."
    )
    placeable: list[str] = strawberry.field(
        description="Profiles of the class the allocator would place on it now, largest first."
    )
    largest_placeable: str | None


@strawberry.type(description="A node's partitionable GPUs for one DeviceClass: free memory "
                 "stranded in partition layouts and the largest partition placeable now.")  # fmt: skip
class NodeFragmentation:
    cluster: str
    node: str | None
    class_name: str
    gpus: int = strawberry.field(description="GPUs with a device the class selects.")
    gpus_partly_allocated: int
    gpus_placeable: int = strawberry.field(
        description="GPUs that can take one of the class's devices now."
    )
    free_memory: float = strawberry.field(description="Bytes free over those GPUs.")
    stranded_memory: float = strawberry.field(
        description="Bytes free on partly allocated GPUs: reachable only by partitions that "
        "fit the layout already placed."
    )
    largest_placeable: str | None = strawberry.field(
        description="The largest profile of the class some GPU of the node can take now "
        "(profiles by the share of the GPU's memory slices they take)."
    )
    unplaceable: list[str] = strawberry.field(
        description="The class's profiles on the node no GPU can take now, largest first."
    )
    summary: str = strawberry.field(
        description='"3 of 4 GPUs can take a mig.nvidia.com device, the largest a 2g.35gb; '
        'none can take a 3g.71gb".'
    )
    gpu_details: list[GpuFragments]

    @classmethod
    def of(cls, row: fragmentation.NodeFragmentation) -> NodeFragmentation:
        fields: dict[str, Any] = dict(vars(row))
        fields["gpu_details"] = [GpuFragments(**vars(g)) for g in row.gpu_details]
        return cls(**fields)


@strawberry.type
class Query:
    @strawberry.field(
        description="Free GPU memory stranded in partition layouts and the largest partition "
        "placeable now, per node and DeviceClass (partitionable devices, KEP-4815)."
    )
    async def fragmentation(
        self,
        info: Info,
        cluster: str | None = None,
        node: str | None = None,
        class_name: str | None = None,
    ) -> list[NodeFragmentation]:
        rows = await asked(
            fragmentation.fragmentation(
                info.context.asker, cluster, node=node, class_name=class_name
            )
        )
        return [NodeFragmentation.of(r) for r in rows]

"""`build_server(ask_for)`: the MCP server of the mirror, its tools described for a model.

`ask_for(ctx)` gives the `Ask` a call uses: over HTTP, the app's schema in-process with the
request's context (its access scope); over stdio, a running mirror's `/graphql`. Each tool's
name, description and typed arguments (the input schema the SDK derives from them) say what it
answers, what to pass, and what comes back; answers are plain JSON objects (structured tool
results). A `QuestionError` becomes a tool error whose text is the graph's message.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from dra_mirror.service.questions.asking import Ask, QuestionError

from . import tools

AskFor = Callable[[Context], Awaitable[Ask]]

INSTRUCTIONS = (
    "dra-mirror mirrors the Dynamic Resource Allocation objects (DeviceClasses, ResourceSlices "
    "and their devices, ResourceClaims, Pods, Nodes) of several Kubernetes clusters. Use these "
    "tools to find who holds a GPU, which devices are free, why a claim is Pending, where a "
    "manifest would land before applying it, and what happened to a device or claim. Every "
    "answer is limited to what the caller's access scope may see. Nothing here changes a cluster."
)
READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)

Cluster = Annotated[
    str | None, Field(description="A mirrored cluster's name; omit for every cluster.")
]
Limit = Annotated[int, Field(ge=1, le=tools.MAX_LIMIT, description="Most rows to return.")]
Hours = Annotated[float, Field(gt=0, le=2160, description="How far back to look, in hours.")]


def build_server(ask_for: AskFor) -> MCPServer:
    server = MCPServer("dra-mirror", instructions=INSTRUCTIONS, log_level="WARNING")

    def register(
        fn: Callable[..., Awaitable[dict[str, Any]]],
    ) -> Callable[..., Awaitable[dict[str, Any]]]:
        # The docstring, dedented, is the description a model reads.
        server.add_tool(fn, description=inspect.cleandoc(fn.__doc__ or ""), annotations=READ_ONLY)
        return fn

    async def run(
        ctx: Context, question: Callable[[Ask], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        try:
            return await question(await ask_for(ctx))
        except QuestionError as error:
            raise ToolError(str(error)) from None

    @register
    async def who_holds(
        ctx: Context,
        device: Annotated[
            str,
            Field(
                description="A GPU uuid (GPU-…, MIG-…), node/device (e.g. "
                "'node-7/gpu-3'), driver/pool/device, or a bare device name."
            ),
        ],
        cluster: Cluster = None,
        limit: Limit = 20,
    ) -> dict[str, Any]:
        """Which ResourceClaims hold a device now, the pods using them, since when, and whether
        the holder is idle (allocated, no pod Running). A bare name like 'gpu-0' may name a
        device on every node: `devicesNamed` says how many; narrow with node/device or uuid.
        Only holders in namespaces your access scope covers are listed; a device held by claims
        you may not see is in `heldElsewhere` (with how many allocations), never free."""
        return await run(ctx, lambda ask: tools.who_holds(ask, device, cluster, limit))

    @register
    async def free_devices(
        ctx: Context,
        selector: Annotated[
            str | None,
            Field(
                description="A CEL device selector as in a DeviceClass, e.g. "
                "\"device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'\"."
            ),
        ] = None,
        device_class: Annotated[
            str | None, Field(description="Only devices this DeviceClass covers.")
        ] = None,
        cluster: Cluster = None,
        limit: Limit = 20,
    ) -> dict[str, Any]:
        """Devices free now (not held, counters not used by sibling partitions) that match a CEL
        selector and/or a DeviceClass, with their node and attributes; `total` counts them all.
        A DeviceClass is each cluster's own: only clusters that have it are searched, each with
        its selectors (`selector` is then per cluster when they differ)."""
        return await run(
            ctx, lambda ask: tools.free_devices(ask, selector, device_class, cluster, limit)
        )

    @register
    async def why_pending(
        ctx: Context,
        namespace: Annotated[str, Field(description="The claim's namespace.")],
        claim: Annotated[str, Field(description="The ResourceClaim's name.")],
        cluster: Cluster = None,
    ) -> dict[str, Any]:
        """Why a ResourceClaim is Pending (class missing, no device matches, every matching device
        held — by whom, which idle —, tainted, not enough on one node…) or, allocated, whether it
        is healthy; per request the counts behind the verdict."""
        return await run(ctx, lambda ask: tools.why_pending(ask, namespace, claim, cluster))

    @register
    async def plan(
        ctx: Context,
        manifests: Annotated[
            str,
            Field(
                description="YAML of Deployments, StatefulSets, Jobs, Pods, "
                "ResourceClaims and ResourceClaimTemplates (several documents)."
            ),
        ],
        cluster: Cluster = None,
    ) -> dict[str, Any]:
        """If these manifests were applied now: per cluster, each pod they create with the node
        and devices it would get, or why it would wait and behind whom (holders; idle ones whose
        release would make room), plus common mistakes (lint). Applies and writes nothing."""
        return await run(ctx, lambda ask: tools.plan(ask, manifests, cluster))

    @register
    async def device_history(
        ctx: Context,
        device: Annotated[str, Field(description="A GPU uuid, or driver/pool/device.")],
        hours: Hours = 24,
        cluster: Cluster = None,
    ) -> dict[str, Any]:
        """Who held a device over the last `hours` (claim, request, node, since, until), from the
        mirror's history (needs a history database)."""
        return await run(ctx, lambda ask: tools.device_history(ask, device, hours, cluster))

    @register
    async def claim_history(
        ctx: Context,
        namespace: Annotated[str, Field(description="The claim's namespace.")],
        claim: Annotated[str, Field(description="The ResourceClaim's name.")],
        cluster: Annotated[str, Field(description="The claim's cluster.")],
    ) -> dict[str, Any]:
        """A claim's life from history: waits (and for which classes), allocations (devices,
        node), consumer pods, idle spells; one entry per claim of that name (by uid)."""
        return await run(ctx, lambda ask: tools.claim_history(ask, namespace, claim, cluster))

    @register
    async def contention(
        ctx: Context,
        hours: Hours = 24,
        group_by: Annotated[
            Literal["class", "namespace"], Field(description="Group by DeviceClass or namespace.")
        ] = "class",
        cluster: Cluster = None,
    ) -> dict[str, Any]:
        """Contention over the last `hours`: device-hours available, allocated and held idle,
        utilization, claims that waited and their wait p50/p95/max, per class or namespace."""
        return await run(ctx, lambda ask: tools.contention(ask, hours, group_by, cluster))

    return server

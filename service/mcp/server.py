"""`build_server(questions_for)`: the MCP server of the mirror, its tools described for a model.

`questions_for(ctx)` gives the `Questions` a call asks: over HTTP, the questions answered in
the mirror's own process with the request's asker (its access scope); over stdio, a running
mirror's `/graphql` (`RemoteQuestions`). Each tool's name, description and typed arguments (the
input schema the SDK derives from them) say what it answers and what to pass; its result type
(`service.mcp.results`) is its output schema. A `QuestionError` becomes a tool error whose
text is the question's message.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Annotated, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from dra_mirror.service.questions.asking import QuestionError
from dra_mirror.service.questions.protocol import Questions

from . import results, tools

QuestionsFor = Callable[[Context], Awaitable[Questions]]
R = TypeVar("R")

INSTRUCTIONS = (
    "dra-mirror mirrors the Dynamic Resource Allocation objects (DeviceClasses, ResourceSlices "
    "and their devices, ResourceClaims, Pods, Nodes) of several Kubernetes clusters. Use these "
    "tools to find who holds a GPU, which devices are free, which claims wait and which hold "
    "devices idle, why a claim is Pending, where a manifest would land before applying it, the "
    "capacity of each cluster, a pod's devices, common DRA mistakes, and what happened to a "
    "device or claim. Counts are in devices of one driver; a MIG partition is never counted "
    "beside its GPU. Every answer is limited to what the caller's access scope may see. An "
    "unknown cluster, device, claim or pod is a tool error. Nothing here changes a cluster."
)
READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)

Cluster = Annotated[
    str | None, Field(description="A mirrored cluster's name; omit for every cluster.")
]
Limit = Annotated[int, Field(ge=1, le=tools.MAX_LIMIT, description="Most rows to return.")]
Hours = Annotated[float, Field(gt=0, le=2160, description="How far back to look, in hours.")]


def build_server(questions_for: QuestionsFor) -> MCPServer:
    server = MCPServer("dra-mirror", instructions=INSTRUCTIONS, log_level="WARNING")

    def register(fn: Callable[..., Awaitable[R]]) -> Callable[..., Awaitable[R]]:
        # The docstring, dedented, is the description a model reads.
        server.add_tool(fn, description=inspect.cleandoc(fn.__doc__ or ""), annotations=READ_ONLY)
        return fn

    async def run(ctx: Context, question: Callable[[Questions], Awaitable[R]]) -> R:
        try:
            return await question(await questions_for(ctx))
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
    ) -> results.WhoHoldsResult:
        """Which ResourceClaims hold a device now, the pods using them, since when, and whether
        the holder is idle (allocated, no pod Running). `answer` says held, held-elsewhere,
        free, blocked (a MIG partition or GPU whose counters sibling partitions use) or mixed;
        each named device carries its status. A bare name like 'gpu-0' may name a device on
        every node: `devicesNamed` says how many; narrow with node/device or uuid. Only holders
        in namespaces your access scope covers are listed; a device held by claims you may not
        see counts them in `heldElsewhere`, never free. A name that names no device, or an
        unknown cluster, is an error."""
        return await run(ctx, lambda q: tools.who_holds(q, device, cluster, limit))

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
    ) -> results.FreeDevicesResult:
        """Devices free now (not held, counters not used by sibling partitions) that match a CEL
        selector and/or a DeviceClass, with their node, uuid and model; `total` counts them all,
        in devices: the free MIG partitions of a free GPU are listed under it (`partitions`),
        never counted beside it. A DeviceClass is each cluster's own: only clusters that have it
        are searched, each with its selectors. A selector that does not compile, or fails to
        evaluate on every device, is an error; failures on some devices are counted
        (`evaluationErrorCount`)."""
        return await run(
            ctx, lambda q: tools.free_devices(q, selector, device_class, cluster, limit)
        )

    @register
    async def why_pending(
        ctx: Context,
        namespace: Annotated[str, Field(description="The claim's namespace.")],
        claim: Annotated[str, Field(description="The ResourceClaim's name.")],
        cluster: Cluster = None,
    ) -> results.WhyPendingResult:
        """Why a ResourceClaim is Pending (class missing, no device matches, every matching device
        held — by whom, which idle —, tainted, not enough on one node…) or, allocated, whether it
        is healthy; per request the counts behind the verdict."""
        return await run(ctx, lambda q: tools.why_pending(q, namespace, claim, cluster))

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
    ) -> results.PlanResult:
        """If these manifests were applied now: per cluster, each pod they create with the node
        and devices it would get, or why it would wait and behind whom (holders; idle ones whose
        release would make room), plus common mistakes (lint). Applies and writes nothing."""
        return await run(ctx, lambda q: tools.plan(q, manifests, cluster))

    @register
    async def device_history(
        ctx: Context,
        device: Annotated[str, Field(description="A GPU uuid, or driver/pool/device.")],
        hours: Hours = 24,
        cluster: Cluster = None,
    ) -> results.DeviceHistoryResult:
        """Who held a device over the last `hours` (claim, request, node, since, until), from the
        mirror's history (needs a history database)."""
        return await run(ctx, lambda q: tools.device_history(q, device, hours, cluster))

    @register
    async def claim_history(
        ctx: Context,
        namespace: Annotated[str, Field(description="The claim's namespace.")],
        claim: Annotated[str, Field(description="The ResourceClaim's name.")],
        cluster: Annotated[str, Field(description="The claim's cluster.")],
    ) -> results.ClaimHistoryResult:
        """A claim's life from history: waits (and for which classes), allocations (devices,
        node), consumer pods, idle spells; one entry per claim of that name (by uid)."""
        return await run(ctx, lambda q: tools.claim_history(q, namespace, claim, cluster))

    @register
    async def contention(
        ctx: Context,
        hours: Hours = 24,
        group_by: Annotated[
            Literal["class", "namespace"], Field(description="Group by DeviceClass or namespace.")
        ] = "class",
        cluster: Cluster = None,
    ) -> results.ContentionResult:
        """Contention over the last `hours`: device-hours available, allocated and held idle,
        utilization, claims that waited and their wait p50/p95/max, per class or namespace."""
        return await run(ctx, lambda q: tools.contention(q, hours, group_by, cluster))

    @register
    async def waiting_claims(
        ctx: Context,
        device_class: Annotated[
            str | None, Field(description="Only claims asking for this DeviceClass.")
        ] = None,
        cluster: Cluster = None,
        limit: Limit = 20,
    ) -> results.ClaimsResult:
        """ResourceClaims waiting for devices (Pending), longest waiting first: the classes
        they ask for and for how long (`pendingSeconds`). Use why_pending for the reason."""
        return await run(ctx, lambda q: tools.waiting_claims(q, device_class, cluster, limit))

    @register
    async def idle_claims(
        ctx: Context, cluster: Cluster = None, limit: Limit = 20
    ) -> results.ClaimsResult:
        """ResourceClaims holding devices while no consumer pod runs (idle holders), those
        most Pending claims wait behind first (`waitingForClass`): the devices held, the node,
        the pods, and since when idle. Releasing them frees devices."""
        return await run(ctx, lambda q: tools.idle_claims(q, cluster, limit))

    @register
    async def capacity(ctx: Context, cluster: Cluster = None) -> results.CapacityResult:
        """Per cluster and driver: devices, free, in use, partitioned (a GPU some of whose MIG
        partitions are in use), tainted, and the partitions apart; counts in devices of that
        driver (GPUs and NICs never summed)."""
        return await run(ctx, lambda q: tools.capacity(q, cluster))

    @register
    async def fragmentation(
        ctx: Context,
        cluster: Cluster = None,
        node: Annotated[str | None, Field(description="Only this node.")] = None,
        device_class: Annotated[
            str | None, Field(description="Only this DeviceClass (e.g. mig.nvidia.com).")
        ] = None,
    ) -> results.FragmentationResult:
        """Per node and DeviceClass, over partitionable GPUs (MIG partitions sharing a GPU's
        counters): how many GPUs can take one of the class's devices now, the largest profile
        that fits (`largestPlaceable`), the profiles none can take, and free memory stranded on
        partly allocated GPUs (bytes). An unknown class is an error."""
        return await run(ctx, lambda q: tools.fragmentation(q, cluster, node, device_class))

    @register
    async def pod_devices(
        ctx: Context,
        namespace: Annotated[str, Field(description="The pod's namespace.")],
        pod: Annotated[str, Field(description="The pod's name.")],
        cluster: Cluster = None,
    ) -> results.PodDevicesResult:
        """The ResourceClaims a pod uses and the devices allocated to them (driver/pool/device,
        uuid, model, node, status); claims not allocated yet, or missing, listed apart."""
        return await run(ctx, lambda q: tools.pod_devices(q, namespace, pod, cluster))

    @register
    async def lint(
        ctx: Context,
        cluster: Annotated[
            str | None,
            Field(description="The mirrored cluster to check, or to check the manifests against."),
        ] = None,
        manifests: Annotated[
            str | None, Field(description="YAML to check instead of the cluster's own objects.")
        ] = None,
    ) -> results.LintResult:
        """Common DRA mistakes: in a mirrored cluster's objects (GPU nodes without a driver,
        classes matching nothing, pods' claims unused, template claims left Pending…), or in
        manifests (against a cluster's classes, claims and free devices when one is named)."""
        return await run(ctx, lambda q: tools.lint(q, cluster, manifests))

    return server

"""What the MCP tools answer: typed, documented results (their JSON Schema is each tool's
`outputSchema`), keys in camelCase as the graph spells them.

Each model is a view of a question's answer (`service.questions`), cut small for a model:
names, states, nodes, verdicts, one-line messages, lists cut at `limit` with the full count
beside them. Statuses are the model's: FREE, HELD (one claim), SHARED (several claims of a
shareable device), BLOCKED (free itself, but its counters are taken by sibling partitions or
by its parts).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

Status = Literal["FREE", "HELD", "SHARED", "BLOCKED"] | None
Answer = Literal["held", "held-elsewhere", "free", "blocked", "mixed"]


class Result(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class Holding(Result):
    cluster: str
    node: str | None = Field(description="null: a network-attached device")
    device: str = Field(description="driver/pool/device")
    uuid: str | None
    model: str | None
    claim: str = Field(description="namespace/name of the holding ResourceClaim")
    origin: str = Field(description="TEMPLATE, EXTENDED_RESOURCE or MANUAL")
    state: str = Field(description="ALLOCATED, RESERVED (a pod uses it) or DELETING")
    pods: list[str] = Field(description="Consumer pods: namespace/name (phase)")
    since: str | None = Field(
        description="When it was allocated: the API server's allocationTimestamp, else when "
        "history saw it begin; null: neither knows"
    )
    idle: bool = Field(description="Allocated and no consumer pod Running")
    idle_since: str | None
    request: str
    share_id: str | None = Field(
        default=None, serialization_alias="shareID", validation_alias="shareID"
    )


class NamedDevice(Result):
    cluster: str
    node: str | None
    device: str = Field(description="driver/pool/device")
    uuid: str | None
    model: str | None
    status: Status
    held_elsewhere: int = Field(description="Allocations by claims outside your access scope")


class WhoHoldsResult(Result):
    answer: Answer = Field(
        description="held: claims you may see hold it; held-elsewhere: only claims outside "
        "your scope do; free; blocked (its counters are in use by sibling partitions); mixed: "
        "the name designates several devices in different states, none held"
    )
    devices_named: int = Field(description="How many devices the name designates")
    devices: list[NamedDevice] = Field(description="The devices named (cut at `limit`)")
    holdings: list[Holding] = Field(description="One per claim holding one of them (cut)")
    total: int = Field(description="Holdings in all")


class FreeDevice(Result):
    cluster: str
    node: str | None
    device: str = Field(description="driver/pool/device")
    uuid: str | None
    model: str | None
    taints: list[str] = Field(description="NoSchedule/NoExecute taints: free only for claims "
                              "that tolerate them")  # fmt: skip
    partitions: list[str] = Field(description="Its free partitions: the same hardware, not "
                                  "counted in `total`")  # fmt: skip


class FreeDevicesResult(Result):
    total: int = Field(description="Free devices: a partition of a free whole device is not "
                       "counted beside it")  # fmt: skip
    partitions: int = Field(description="Free partitions listed under their whole device")
    selector: str | None
    device_class: str | None
    evaluation_error_count: int = Field(description="Devices on which the selector failed to "
                                        "evaluate (left out of the answer)")  # fmt: skip
    evaluation_errors: list[str] = Field(description="The first of those failures")
    devices: list[FreeDevice] = Field(description="The first `limit` free devices")


class ListedClaim(Result):
    cluster: str
    claim: str = Field(description="namespace/name")
    origin: str
    classes: list[str] = Field(description="The DeviceClasses it asks for")
    created_at: str | None
    pending_seconds: float | None = Field(description="Waiting for so long (Pending claims)")
    idle_since: str | None = Field(description="Idle holders: since when no pod runs")
    node: str | None
    devices: list[str] = Field(description="Idle holders: the devices it holds, name (uuid)")
    consumers: list[str] = Field(description="Idle holders: its consumer pods, name (phase)")
    waiting_for_class: int = Field(description="Idle holders: Pending claims asking for one "
                                   "of its classes (release it first)")  # fmt: skip


class ClaimsResult(Result):
    total: int
    claims: list[ListedClaim]


class PhysicalDevice(Result):
    physical: str = Field(description="Its uuid (else driver/pool/<counter set or device>)")
    node: str | None
    state: str = Field(description="partitioned or shared")
    held_equivalents: float = Field(description="GPU-equivalents of it held")
    in_use: list[str] = Field(description="Its devices held or shared")


class CapacityRow(Result):
    cluster: str
    driver: str = Field(description="Counts are in devices of this driver (never summed "
                        "across drivers)")  # fmt: skip
    devices: int = Field(description="Whole devices (a partition is not counted beside them)")
    free: int
    in_use: int = Field(description="Held, or shared")
    partitioned: int = Field(description="Free themselves, but partitions of them are in use")
    tainted: int
    partitions: int
    partitions_free: int
    partitions_in_use: int
    unpublished: int = Field(description="Held devices no slice publishes any more")
    type: str = Field(description="gpu, nic or the driver: what the physical counts count")
    physical: int = Field(description="Physical devices (a GPU with its partitions is one)")
    physical_free: int
    physical_whole: int = Field(description="Physical devices in use whole")
    physical_partitioned: int = Field(description="Physical devices with partitions in use")
    physical_shared: int = Field(description="Shareable physical devices shared by claims")
    held_equivalents: float = Field(description="GPU-equivalents held (physical devices of "
                                    "`type`; a partition its share of memory slices)")  # fmt: skip
    partitioned_devices: list[PhysicalDevice] = Field(
        description="Partitioned and shared physical devices, with their devices in use"
    )


class CapacityResult(Result):
    rows: list[CapacityRow]


class FragmentationRow(Result):
    cluster: str
    node: str | None
    class_name: str
    gpus: int = Field(description="Partitionable GPUs with a device the class selects")
    gpus_partly_allocated: int
    gpus_placeable: int = Field(description="GPUs that can take one of the class's devices now")
    free_memory: float = Field(description="Bytes free over those GPUs")
    stranded_memory: float = Field(description="Bytes free on partly allocated GPUs")
    largest_placeable: str | None = Field(description="The largest profile placeable now")
    unplaceable: list[str] = Field(description="The class's profiles no GPU can take now")
    summary: str


class FragmentationResult(Result):
    rows: list[FragmentationRow]


class PodDevice(Result):
    claim: str
    request: str
    device: str = Field(description="driver/pool/device")
    node: str | None
    uuid: str | None
    model: str | None
    status: Status
    share_id: str | None = Field(
        default=None, serialization_alias="shareID", validation_alias="shareID"
    )


class PodDevicesEntry(Result):
    cluster: str
    pod: str = Field(description="namespace/name")
    phase: str
    node: str | None
    claims: list[str]
    devices: list[PodDevice]
    pending: list[str] = Field(description="Its claims not allocated yet")
    missing: list[str] = Field(description="Its claims not there (or outside your scope)")


class PodDevicesResult(Result):
    pods: list[PodDevicesEntry] = Field(description="One per cluster with such a pod")


class Diagnosis(Result):
    cluster: str
    claim: str
    state: str
    verdict: str = Field(description="e.g. all-held, no-match, tainted, fits, ok, idle")
    message: str = Field(description="The diagnosis in one sentence")
    requests: list[dict[str, Any]] = Field(description="Per request: class, verdict, devices "
                                           "the class covers, free or shareable, needed")  # fmt: skip
    holders: list[dict[str, Any]] = Field(description="Claims holding what it wants (idle "
                                          "ones first), with since when idle")  # fmt: skip
    holders_total: int
    holders_hidden: int = Field(description="Holders in namespaces outside your scope: "
                                "counted, never named")  # fmt: skip


class WhyPendingResult(Result):
    diagnoses: list[Diagnosis]


class PlanResult(Result):
    clusters: list[dict[str, Any]] = Field(description="Per cluster: placeable, summary, each "
                                           "pod with its node and devices, or why it would "
                                           "wait and behind whom; lint's findings")  # fmt: skip
    skipped: list[str] = Field(description="Documents not planned, and why")


class Finding(Result):
    rule: str
    severity: Literal["ERROR", "WARNING"]
    object: str = Field(description="Kind namespace/name")
    path: str
    message: str


class LintResult(Result):
    findings: list[Finding]
    errors: int = Field(description="Findings of severity ERROR")


class DeviceHistoryResult(Result):
    since: str = Field(serialization_alias="from", validation_alias="from")
    until: str = Field(serialization_alias="to", validation_alias="to")
    uuids: list[str | None]
    holders: list[dict[str, Any]] = Field(description="Allocations in the window: cluster, "
                                          "device, node, namespace, claim, request, since, "
                                          "until (null: still held), endReason, pods")  # fmt: skip
    total: int


class ClaimHistoryResult(Result):
    lives: list[dict[str, Any]] = Field(description="One per incarnation (uid): waits, "
                                        "allocations, consumers, idle spells")  # fmt: skip
    total: int


class ContentionResult(Result):
    since: str = Field(serialization_alias="from", validation_alias="from")
    until: str = Field(serialization_alias="to", validation_alias="to")
    rows: list[dict[str, Any]] = Field(description="Per group: device-hours available, "
                                       "allocated and idle, utilization (%), claims that "
                                       "waited, wait p50/p95/max (seconds)")  # fmt: skip
    total: int

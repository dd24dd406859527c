"""What explainClaim answers: a claim's `Diagnosis`, the holders it names, the checklist of an
allocated claim, and the verdict names `explain` adds to the allocator's (`verdicts`).

Plain data: `explain.explain_claim` fills it; the graph, the plan and the command line read it.
A `Diagnosis` names only the holders the asker may see (`holders`); the others are counted
(`holders_hidden`) and kept apart (`withheld`) for callers that compute over them without
showing them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dra_mirror.service.diagnostics.verdicts import RequestVerdict
from dra_mirror.service.model.records import ObjectKey

DRIVER_MISSING = "driver-missing"
SHARING_OFF = "sharing-off"
ALLOCATABLE = "allocatable"
OK = "ok"
NODE_RESOURCES = "node-resources"
IDLE = "idle"
POD_NOT_RUNNING = "pod-not-running"
DELETING = "deleting"
DERIVED_ERROR = "derived-attribute-error"  # KEP-6080: a derived attribute fails at run time

MAX_HOLDERS = 50


@dataclass
class Holder:
    """A claim holding devices the explained claim wanted."""

    claim: ObjectKey
    pods: list[ObjectKey]  # consumer pods (status.reservedFor)
    running: bool  # some consumer pod is Running
    idle: bool  # allocated and no consumer pod Running
    idle_since: str | None = None


@dataclass
class Check:
    name: str  # allocated | node | devices | consumers | running
    ok: bool
    detail: str


@dataclass
class Diagnosis:
    claim: ObjectKey
    state: str
    verdict: str
    message: str
    requests: list[RequestVerdict] = field(default_factory=list)
    holders: list[Holder] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    pods: list[ObjectKey] = field(default_factory=list)  # pods that reference the claim
    nodes_without_driver: list[str] = field(default_factory=list)
    holders_total: int = 0  # holders may be cut to MAX_HOLDERS (idle ones kept first)
    holders_hidden: int = 0  # holders outside the asker's scope: counted, never named
    withheld: list[Holder] = field(default_factory=list)  # those holders: never shown
    # Pending pods ahead of the claim's pods in the queue whose claims want the same devices.
    ahead: list[ObjectKey] = field(default_factory=list)

"""Scenarios built and served: what each simulated cluster of a scenario file contains, made real.

Scenario files are parsed by `service.sim.scenario_file` (`load_scenario`, `parse_scenario`,
`list_scenarios`, re-exported here with the scenario types). `build_stores(scenario)` builds
one `ClusterSpec` per cluster: a `ClusterStore` filled the way a real cluster gets filled —
namespaces, device classes, nodes, the drivers' ResourceSlices, templates and claims, then the
workloads' pods, each created through the store's validating path and scheduled by the
cluster's `Controller` as it arrives — plus the served versions, faults and churn the server
side runs. `serve_scenario` builds, serves and runs one (`dra-mirror sim`).

Promises: a scenario that loads builds without error, deterministically for its `seed`
(names, uids, uuids, placement; only timestamps follow the clock).
"""

from __future__ import annotations

import asyncio
import copy
import gc
import hashlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from dra_mirror.service.model.kinds import BY_KIND
from dra_mirror.service.sim import hardware
from dra_mirror.service.sim.churn import Churn
from dra_mirror.service.sim.controller import Controller
from dra_mirror.service.sim.dcgm import BUSY_ANNOTATION
from dra_mirror.service.sim.generate import populate
from dra_mirror.service.sim.rbac import Access
from dra_mirror.service.sim.run import HOST, ClusterSpec, serve_forever
from dra_mirror.service.sim.scenario_file import (
    ClusterScenario,
    NodeGroup,
    Scenario,
    ScenarioError,
    Workload,
    list_scenarios,
    load_scenario,
    parse_scenario,
    scenario_dir,
)
from dra_mirror.service.sim.shapes import pod_object, ready_node
from dra_mirror.service.sim.store import ClusterStore

__all__ = [
    "ClusterScenario",
    "ClusterSpec",
    "NodeGroup",
    "Scenario",
    "ScenarioError",
    "Workload",
    "World",
    "build_stores",
    "build_world",
    "list_scenarios",
    "load_scenario",
    "parse_scenario",
    "scenario_dir",
    "serve_scenario",
]

log = logging.getLogger(__name__)

_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # utilrand's, as in ReplicaSet and pod names
_DEFAULT_ALLOCATABLE = {"cpu": "64", "memory": "512Gi", "pods": "110"}


@dataclass
class World:
    """The built scenario: what `Simulator` serves, and the parts that make the world move."""

    scenario: Scenario
    specs: list[ClusterSpec]  # for `Simulator` / `serve_forever`
    controllers: dict[str, Controller]
    churns: dict[str, Churn]

    @property
    def stores(self) -> dict[str, ClusterStore]:
        return {spec.store.name: spec.store for spec in self.specs}

    async def run(self) -> None:
        """Run every cluster's churn (and delayed pod starts) until cancelled."""
        await asyncio.gather(*(churn.run() for churn in self.churns.values()))
        await asyncio.Event().wait()


# ---- building the stores ----------------------------------------------------------------------


def token(seed: str, n: int) -> str:
    """`n` characters of Kubernetes' name alphabet, a pure function of `seed`."""
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:n])


def stable_uid(seed: str) -> str:
    """A version-4-shaped UUID, a pure function of `seed` (uids of objects not served)."""
    return str(uuid.UUID(bytes=hashlib.sha256(seed.encode()).digest()[:16], version=4))


def build_stores(
    scenario: Scenario, *, clock: Callable[[], datetime] | None = None
) -> list[ClusterSpec]:
    """Every cluster of `scenario`, built and scheduled, as `Simulator` takes them."""
    return build_world(scenario, clock=clock).specs


def build_world(scenario: Scenario, *, clock: Callable[[], datetime] | None = None) -> World:
    """Every cluster of `scenario`, built and scheduled (see the module docstring)."""
    world = World(scenario, [], {}, {})
    for index, cluster in enumerate(scenario.clusters):
        seed = f"{scenario.seed}/{cluster.name}"
        kwargs: dict[str, Any] = {"seed": scenario.seed * 1000 + index}
        if clock is not None:
            kwargs["clock"] = clock
        store = ClusterStore(cluster.name, **kwargs)
        controller = Controller(store, start_delay=cluster.start_delay, seed=seed)
        if cluster.scale is not None:
            populate(store, cluster.scale, seed=seed)
            controller.attach()
        else:
            controller.attach()
            _fill(store, cluster, seed=seed, first=index == 0)
        # The server consumes fault counts in place: give it its own copy.
        access = (
            Access.from_scenario(cluster.access, cluster=cluster.name) if cluster.access else None
        )
        world.specs.append(
            ClusterSpec(
                store,
                cluster.versions,
                copy.deepcopy(cluster.faults),
                access=access,
                kubernetes=cluster.kubernetes,
            )
        )
        world.controllers[cluster.name] = controller
        if cluster.churn is not None:
            world.churns[cluster.name] = Churn(store, cluster.churn)
    return world


def _report_world_end(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("sim: the world stopped moving", exc_info=task.exception())


async def serve_scenario(
    name_or_path: str | Path,
    *,
    kubeconfig_path: str | Path = "sim.kubeconfig",
    port_base: int | None = None,
    host: str = HOST,
    announce: Callable[[str], None] = print,
) -> None:
    """`dra-mirror sim --scenario NAME|FILE`: build the world, serve it, run its churn, every
    cluster listening on `host` (loopback unless asked)."""
    world = build_world(load_scenario(name_or_path))
    # The objects live as long as the process: keep the cyclic GC from walking them again.
    gc.freeze()
    churn = asyncio.create_task(world.run(), name="sim-world")
    churn.add_done_callback(_report_world_end)
    try:
        await serve_forever(
            world.specs,
            kubeconfig_path=kubeconfig_path,
            port_base=port_base,
            host=host,
            announce=announce,
        )
    finally:
        churn.cancel()
        await asyncio.gather(churn, return_exceptions=True)


def _fill(store: ClusterStore, cluster: ClusterScenario, *, seed: str, first: bool) -> None:
    for ns in cluster.namespaces:
        if store.get("namespaces", None, ns) is None:
            store.create("namespaces", {"metadata": {"name": ns}})
    for name in cluster.device_classes:
        store.create("deviceclasses", hardware.device_class(name))
    real_uuid = first
    ordinal = 0
    for group in cluster.nodes:
        for name in group.names():
            node = store.create("nodes", node_object(name, group, ordinal=ordinal))
            ordinal += 1
            for slice_obj in hardware.node_slices(
                name, node["metadata"]["uid"], group.devices, seed=seed, real_uuid=real_uuid
            ):
                store.create("resourceslices", slice_obj)
            # The captured H200's uuid goes to the first H200 of the scenario only.
            real_uuid = real_uuid and not any(d.profile == hardware.H200.key for d in group.devices)
    ordered = sorted(cluster.objects, key=lambda o: _CREATE_ORDER.index(o["kind"]))
    for obj in ordered:
        plural = BY_KIND[obj["kind"]].plural
        status = obj.get("status") if plural == "resourceclaims" else None
        created = store.create(plural, obj)
        if status:
            # A claim allocated by hand (no scheduler, no delete-protection finalizer): the
            # scenario writes its allocation as an admin would with `kubectl patch --subresource`.
            store.update(plural, {**created, "status": status}, subresource="status")
    for workload in cluster.workloads:
        for pod in workload_pods(workload, seed=seed):
            store.create("pods", pod)


_CREATE_ORDER = [
    "Namespace",
    "DeviceClass",
    "Node",
    "ResourceSlice",
    "DeviceTaintRule",
    "ResourceClaimTemplate",
    "ResourceClaim",
    "PodGroup",
    "Pod",
]


def node_object(name: str, group: NodeGroup, *, ordinal: int = 0) -> dict:
    """A Ready core/v1 Node; extended resources of a device plugin show in its capacity."""
    allocatable = {**_DEFAULT_ALLOCATABLE, **group.allocatable, **group.device_plugin}
    return ready_node(name, ordinal=ordinal, labels=group.labels, allocatable=allocatable)


def workload_pods(workload: Workload, *, seed: str) -> list[dict]:
    """The pods a ReplicaSet of `workload` creates: `<name>-<hash>-<5 chars>`, owned by it."""
    template_hash = token(f"{seed}/{workload.namespace}/{workload.name}", 10)
    replica_set = f"{workload.name}-{template_hash}"
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": replica_set,
        "uid": stable_uid(f"{seed}/rs/{workload.namespace}/{replica_set}"),
        "controller": True,
        "blockOwnerDeletion": True,
    }
    labels = {"app": workload.name, "pod-template-hash": template_hash, **workload.labels}
    pods = [
        pod_object(
            f"{replica_set}-{token(f'{seed}/{replica_set}/{i}', 5)}",
            workload.namespace,
            claims=workload.claims,
            node_selector=workload.node_selector,
            limits=workload.limits,
            labels=labels,
            owner=owner,
            image=workload.image,
        )
        for i in range(workload.replicas)
    ]
    if workload.gpu_busy is not None:
        for pod in pods:
            pod["metadata"]["annotations"] = {BUSY_ANNOTATION: f"{workload.gpu_busy:g}"}
    return pods

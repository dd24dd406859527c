"""Scenario files: YAML that says what each simulated cluster contains and does.

`load_scenario("demo")` (a shipped name) or `load_scenario("path/to/file.yaml")` parses and
checks a scenario (format: `service/sim/scenarios/README.md`) into a frozen `Scenario`;
`list_scenarios()` names the shipped ones. `build_stores(scenario)` builds one `ClusterSpec`
per cluster: a `ClusterStore` filled the way a real cluster gets filled — namespaces, device
classes, nodes, the drivers' ResourceSlices, templates and claims, then the workloads' pods,
each created through the store's validating path and scheduled by the cluster's
`Controller` as it arrives — plus the served versions, faults and churn the server side runs.

Promises: a scenario that loads builds without error, deterministically for its `seed`
(names, uids, uuids, placement; only timestamps follow the clock); an error in a file is a
`ScenarioError` naming the file and the field.
"""

from __future__ import annotations

import asyncio
import copy
import gc
import hashlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from dra_mirror.service.model.kinds import BY_PLURAL, DRA_VERSIONS
from dra_mirror.service.sim import hardware
from dra_mirror.service.sim.churn import Churn, ChurnSpec
from dra_mirror.service.sim.controller import Controller
from dra_mirror.service.sim.errors import ApiError
from dra_mirror.service.sim.faults import Faults
from dra_mirror.service.sim.generate import ScaleSpec, populate
from dra_mirror.service.sim.run import HOST, ClusterSpec, serve_forever
from dra_mirror.service.sim.shapes import DEFAULT_IMAGE, pod_object, ready_node
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
    "serve_scenario",
]

log = logging.getLogger(__name__)

_KIND_TO_PLURAL = {r.kind: p for p, r in BY_PLURAL.items()}
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # utilrand's, as in ReplicaSet and pod names
_DEFAULT_ALLOCATABLE = {"cpu": "64", "memory": "512Gi", "pods": "110"}


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class NodeGroup:
    name: str  # may contain "{i}", expanded for count > 1
    count: int = 1
    labels: dict[str, str] = field(default_factory=dict)
    allocatable: dict[str, str] = field(default_factory=dict)
    devices: tuple[hardware.DeviceGroup, ...] = ()
    device_plugin: dict[str, str] = field(default_factory=dict)  # e.g. {nvidia.com/gpu: "4"}

    def names(self) -> list[str]:
        if self.count == 1 and "{i}" not in self.name:
            return [self.name]
        return [self.name.replace("{i}", str(i)) for i in range(self.count)]


@dataclass(frozen=True)
class Workload:
    """A Deployment's pods: `replicas` pods sharing one spec (the Deployment itself is not served)."""

    name: str
    namespace: str = "default"
    replicas: int = 1
    claims: tuple[dict[str, str], ...] = ()  # pod.spec.resourceClaims entries
    node_selector: dict[str, str] = field(default_factory=dict)
    limits: dict[str, str] = field(default_factory=dict)
    image: str = DEFAULT_IMAGE
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterScenario:
    name: str
    versions: tuple[str, ...] = ("v1",)
    faults: dict[str, Any] = field(default_factory=dict)
    namespaces: tuple[str, ...] = ()
    device_classes: tuple[str, ...] = ()
    nodes: tuple[NodeGroup, ...] = ()
    objects: tuple[dict[str, Any], ...] = ()
    workloads: tuple[Workload, ...] = ()
    start_delay: float = 0.0
    churn: ChurnSpec | None = None
    scale: ScaleSpec | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str = ""
    seed: int = 0
    clusters: tuple[ClusterScenario, ...] = ()
    path: Path | None = None


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


def scenario_dir() -> Path:
    return Path(str(resources.files("dra_mirror.service.sim") / "scenarios"))


def list_scenarios() -> list[str]:
    """The shipped scenarios' names (file names without `.yaml`), sorted."""
    return sorted(p.stem for p in scenario_dir().glob("*.yaml"))


def load_scenario(name_or_path: str | Path) -> Scenario:
    """A shipped scenario by bare name, or a scenario file by path."""
    path = Path(name_or_path)
    if not path.suffix and not path.exists():
        path = scenario_dir() / f"{name_or_path}.yaml"
        if not path.exists():
            raise ScenarioError(
                f"no scenario {str(name_or_path)!r}: shipped ones are {', '.join(list_scenarios())}"
            )
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise ScenarioError(f"{path}: {error}") from error
    return parse_scenario(doc, path=path)


def parse_scenario(doc: Any, *, path: Path | None = None) -> Scenario:
    where = str(path) if path else "<scenario>"
    if not isinstance(doc, dict):
        raise ScenarioError(f"{where}: a scenario is a mapping")
    try:
        clusters = tuple(_cluster(c) for c in _list(doc, "clusters"))
        if not clusters:
            raise ScenarioError("clusters: at least one cluster")
        names = [c.name for c in clusters]
        if len(set(names)) != len(names):
            raise ScenarioError(f"clusters: duplicate names in {names}")
        return Scenario(
            name=str(doc.get("name") or (path.stem if path else "scenario")),
            description=str(doc.get("description") or "").strip(),
            seed=int(doc.get("seed", 0)),
            clusters=clusters,
            path=path,
        )
    except (TypeError, ValueError, KeyError) as error:
        raise ScenarioError(f"{where}: {error}") from error


def _list(doc: dict, key: str) -> list:
    value = doc.get(key) or []
    if not isinstance(value, list):
        raise ScenarioError(f"{key}: must be a list")
    return value


def _cluster(doc: dict) -> ClusterScenario:
    name = str(doc["name"])
    versions = tuple(doc.get("versions") or ("v1",))
    unknown = [v for v in versions if v not in DRA_VERSIONS]
    if unknown:
        raise ScenarioError(f"cluster {name}: versions {unknown} not in {list(DRA_VERSIONS)}")
    faults = dict(doc.get("faults") or {})
    try:
        Faults().update(copy.deepcopy(faults))  # the server's own check of the settings
    except ApiError as error:
        raise ScenarioError(f"cluster {name}: faults: {error.message}") from error
    for obj in _list(doc, "objects"):
        if not isinstance(obj, dict) or obj.get("kind") not in _KIND_TO_PLURAL:
            raise ScenarioError(f"cluster {name}: objects: unsupported kind {obj.get('kind')!r}")
    return ClusterScenario(
        name=name,
        versions=versions,
        faults=faults,
        namespaces=tuple(str(n) for n in _list(doc, "namespaces")),
        device_classes=tuple(str(c) for c in _list(doc, "deviceClasses")),
        nodes=tuple(_node_group(n) for n in _list(doc, "nodes")),
        objects=tuple(_list(doc, "objects")),
        workloads=tuple(_workload(w) for w in _list(doc, "workloads")),
        start_delay=float(doc.get("startDelay", 0.0)),
        churn=ChurnSpec.from_dict(doc["churn"]) if doc.get("churn") else None,
        scale=ScaleSpec.from_dict(doc["generate"]) if doc.get("generate") else None,
    )


def _node_group(doc: dict) -> NodeGroup:
    devices = []
    for d in doc.get("devices") or []:
        if d["profile"] not in hardware.PROFILES:
            raise ScenarioError(f"node {doc['name']}: unknown profile {d['profile']!r}")
        devices.append(
            hardware.DeviceGroup(d["profile"], int(d.get("count", 1)), d.get("mig", True))
        )
    return NodeGroup(
        name=str(doc["name"]),
        count=int(doc.get("count", 1)),
        labels={str(k): str(v) for k, v in (doc.get("labels") or {}).items()},
        allocatable={str(k): str(v) for k, v in (doc.get("allocatable") or {}).items()},
        devices=tuple(devices),
        device_plugin={str(k): str(v) for k, v in (doc.get("devicePlugin") or {}).items()},
    )


def _workload(doc: dict) -> Workload:
    return Workload(
        name=str(doc["name"]),
        namespace=str(doc.get("namespace", "default")),
        replicas=int(doc.get("replicas", 1)),
        claims=tuple(dict(c) for c in doc.get("claims") or ()),
        node_selector={str(k): str(v) for k, v in (doc.get("nodeSelector") or {}).items()},
        limits={str(k): str(v) for k, v in (doc.get("limits") or {}).items()},
        image=str(doc.get("image", DEFAULT_IMAGE)),
        labels={str(k): str(v) for k, v in (doc.get("labels") or {}).items()},
    )


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
        world.specs.append(ClusterSpec(store, cluster.versions, copy.deepcopy(cluster.faults)))
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
        plural = _KIND_TO_PLURAL[obj["kind"]]
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
    "ResourceClaimTemplate",
    "ResourceClaim",
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
    return [
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

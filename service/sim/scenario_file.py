"""Scenario files: YAML that says what each simulated cluster contains and does.

`load_scenario("demo")` (a shipped name) or `load_scenario("path/to/file.yaml")` parses and
checks a scenario (format: `service/sim/scenarios/README.md`) into a frozen `Scenario`;
`list_scenarios()` names the shipped ones. A scenario names its clusters; each cluster its
served resource.k8s.io versions, its Kubernetes version (`kubernetes: "1.36"`: the versions
of DeviceTaintRule and PodGroup it serves; none without it), faults, namespaces, device classes, node groups (with their
GPU profiles, `service.sim.hardware`), extra objects, workloads, churn and generated scale.

Promises: pure parsing; an error in a file is a `ScenarioError` naming the file and the field;
faults are checked by the server's own rules, so a scenario that loads is served as written.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from dra_mirror.service.model.kinds import BY_KIND, DRA_VERSIONS
from dra_mirror.service.sim import hardware
from dra_mirror.service.sim.churn import ChurnSpec
from dra_mirror.service.sim.errors import ApiError
from dra_mirror.service.sim.faults import Faults
from dra_mirror.service.sim.generate import ScaleSpec
from dra_mirror.service.sim.rbac import Access
from dra_mirror.service.sim.shapes import DEFAULT_IMAGE
from dra_mirror.service.sim.shares import valid_option

__all__ = [
    "ClusterScenario",
    "NodeGroup",
    "Scenario",
    "ScenarioError",
    "Workload",
    "list_scenarios",
    "load_scenario",
    "parse_scenario",
    "scenario_dir",
]


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
    gpu_busy: float | None = None  # percent its pods keep their GPUs busy (sim.dcgm)


@dataclass(frozen=True)
class ClusterScenario:
    name: str
    versions: tuple[str, ...] = ("v1",)
    kubernetes: int | None = None  # the minor of `kubernetes: "1.36"`: DeviceTaintRule versions
    faults: dict[str, Any] = field(default_factory=dict)
    namespaces: tuple[str, ...] = ()
    device_classes: tuple[str, ...] = ()
    nodes: tuple[NodeGroup, ...] = ()
    objects: tuple[dict[str, Any], ...] = ()
    workloads: tuple[Workload, ...] = ()
    start_delay: float = 0.0
    churn: ChurnSpec | None = None
    scale: ScaleSpec | None = None
    access: dict[str, Any] = field(default_factory=dict)  # tokens and RBAC (rbac.py)


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str = ""
    seed: int = 0
    clusters: tuple[ClusterScenario, ...] = ()
    path: Path | None = None


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


def _minor(cluster: str, value: Any) -> int:
    """`"1.36"` (or `1.36`, `v1.36.2`) -> 36."""
    text = str(value).lstrip("v")
    major, _, rest = text.partition(".")
    minor = rest.split(".", 1)[0]
    if major != "1" or not minor.isdigit():
        raise ScenarioError(f"cluster {cluster}: kubernetes: {value!r} is not a version like 1.36")
    return int(minor)


def _cluster(doc: dict) -> ClusterScenario:
    name = str(doc["name"])
    versions = tuple(doc.get("versions") or ("v1",))
    unknown = [v for v in versions if v not in DRA_VERSIONS]
    if unknown:
        raise ScenarioError(f"cluster {name}: versions {unknown} not in {list(DRA_VERSIONS)}")
    kubernetes = _minor(name, doc["kubernetes"]) if "kubernetes" in doc else None
    faults = dict(doc.get("faults") or {})
    try:
        Faults().update(copy.deepcopy(faults))  # the server's own check of the settings
    except ApiError as error:
        raise ScenarioError(f"cluster {name}: faults: {error.message}") from error
    access = doc.get("access") or {}
    if not isinstance(access, dict):
        raise ScenarioError(f"cluster {name}: access: must be a mapping")
    try:
        Access.from_scenario(access, cluster=name)  # checked now, built again per world
    except (ValueError, AttributeError, TypeError) as error:
        raise ScenarioError(f"{error}") from error
    for obj in _list(doc, "objects"):
        if not isinstance(obj, dict) or obj.get("kind") not in BY_KIND:
            raise ScenarioError(f"cluster {name}: objects: unsupported kind {obj.get('kind')!r}")
    return ClusterScenario(
        name=name,
        versions=versions,
        kubernetes=kubernetes,
        faults=faults,
        namespaces=tuple(str(n) for n in _list(doc, "namespaces")),
        device_classes=tuple(str(c) for c in _list(doc, "deviceClasses")),
        nodes=tuple(_node_group(n) for n in _list(doc, "nodes")),
        objects=tuple(_list(doc, "objects")),
        workloads=tuple(_workload(w) for w in _list(doc, "workloads")),
        start_delay=float(doc.get("startDelay", 0.0)),
        churn=ChurnSpec.from_dict(doc["churn"]) if doc.get("churn") else None,
        scale=ScaleSpec.from_dict(doc["generate"]) if doc.get("generate") else None,
        access=access,
    )


def _node_group(doc: dict) -> NodeGroup:
    devices = []
    for d in doc.get("devices") or []:
        if d["profile"] not in hardware.PROFILES:
            raise ScenarioError(f"node {doc['name']}: unknown profile {d['profile']!r}")
        shares = d.get("shares")
        if shares is not None and not valid_option(str(shares)):
            raise ScenarioError(
                f"node {doc['name']}: shares {shares!r} is not disabled, memory, unlimited or N>0"
            )
        devices.append(
            hardware.DeviceGroup(
                d["profile"],
                int(d.get("count", 1)),
                d.get("mig", True),
                None if shares is None else str(shares),
            )
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
        gpu_busy=_percent(doc, "gpuBusy"),
    )


def _percent(doc: dict, name: str) -> float | None:
    raw = doc.get(name)
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not 0 <= raw <= 100:
        raise ScenarioError(f"workload {doc.get('name')}: {name} must be a percent (0-100)")
    return float(raw)

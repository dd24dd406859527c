"""What the controllers make of workload manifests: the pods, replica by replica, and their claims.

`expand(docs)` reads manifests (the dicts `yaml.safe_load_all` gives: Pod, Deployment,
ReplicaSet, StatefulSet, Job, CronJob, ResourceClaim, ResourceClaimTemplate) and returns what
kube-controller-manager would create once they are applied, before any scheduler runs:

* the pods of each workload, named as their controllers name them — a Pod its own name; a
  StatefulSet's `<name>-<ordinal>`; a Deployment's `<deployment>-<pod-template-hash>-<5 random>`
  (through its ReplicaSet), a ReplicaSet's and a Job's `<name>-<5 random>` (`<job>-<index>-…`
  for an Indexed Job), a CronJob's Job `<cronjob>-<scheduled minute>`; the number of replicas
  is `spec.replicas` (default 1), a Job's `parallelism` capped by `completions`;
* each pod's claims, as the resource-claim controller makes them: a `resourceClaimTemplateName`
  becomes a new claim per pod, `generateName` `<pod>-<claim>-` (both parts cut in proportion past
  57 characters, `claim_generate_name`) plus five random characters; a `resourceClaimName` names
  one claim every replica shares;
* ResourceClaims and ResourceClaimTemplates of the manifests, and those no pod uses (planned
  on their own: a claim is allocated once a pod uses it; a template stands for one claim).

Characters Kubernetes picks at random when it creates an object are written `?` (`RANDOM`): five
for a generated name's suffix, ten for a pod-template hash (its usual length), so names have the
length and the truncation of the real ones. Documents of other kinds, and DaemonSets (one pod per
node: not a replica count), are listed in `skipped` with the reason.

Promises: pure; never raises on a malformed manifest (it is skipped with the reason); at most
`MAX_REPLICAS` pods per workload (the rest noted in `skipped`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MAX_REPLICAS",
    "RANDOM",
    "Expansion",
    "PlannedClaim",
    "PlannedPod",
    "claim_generate_name",
    "expand",
]

RANDOM = "?"
SUFFIX = RANDOM * 5  # names.SimpleNameGenerator's random part
TEMPLATE_HASH = RANDOM * 10  # a Deployment's pod-template-hash, up to 10 characters
SCHEDULED_MINUTE = RANDOM * 8  # a CronJob's Job name ends in its scheduled time, in minutes
MAX_GENERATE_BASE = 57  # the claim controller leaves room for 5 random characters in 63
MAX_NAME_BASE = 58  # names.SimpleNameGenerator cuts a generateName at 58 characters
MAX_REPLICAS = 1000

_WORKLOADS = ("Deployment", "ReplicaSet", "StatefulSet", "Job", "CronJob", "Pod")


def claim_generate_name(pod_name: str, pod_claim_name: str) -> str:
    """The `generateName` of a claim the resource-claim controller creates for a pod's template
    entry: `<pod>-<claim>-`, or both parts cut in proportion (and no trailing dash) when longer
    than 57 characters."""
    base = f"{pod_name}-{pod_claim_name}-"
    if len(base) > MAX_GENERATE_BASE:
        total = len(base)
        base = (
            pod_name[: len(pod_name) * MAX_GENERATE_BASE // total]
            + "-"
            + pod_claim_name[: len(pod_claim_name) * MAX_GENERATE_BASE // total]
        )
    return base


def generated(generate_name: str) -> str:
    """The name an object created with `generateName` gets, its random part written `?`."""
    return generate_name[:MAX_NAME_BASE] + SUFFIX


@dataclass(frozen=True)
class PlannedClaim:
    """One entry of a pod's `spec.resourceClaims`, as the claim it resolves to."""

    pod_claim: str  # the pod-local name
    name: str  # the claim's name (a generated one has `?` for its random part)
    template: str | None = None  # resourceClaimTemplateName: a new claim for this pod
    shared: bool = False  # resourceClaimName: one claim, whoever else uses it


@dataclass(frozen=True)
class PlannedPod:
    """A pod a workload creates (`workload` is "Kind namespace/name"; replica counts from 0)."""

    workload: str
    kind: str
    namespace: str
    name: str
    replica: int
    spec: dict[str, Any]
    claims: tuple[PlannedClaim, ...] = ()


@dataclass
class Expansion:
    """Everything the manifests would create, in the order they came."""

    pods: list[PlannedPod] = field(default_factory=list)
    claims: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (ns, name)
    templates: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    unused_claims: list[tuple[str, str]] = field(default_factory=list)
    unused_templates: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "Kind ns/name: why"


def _meta(doc: dict[str, Any]) -> dict[str, Any]:
    meta = doc.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _namespace(doc: dict[str, Any]) -> str:
    return str(_meta(doc).get("namespace") or "default")


def _ref(doc: dict[str, Any]) -> str:
    meta = _meta(doc)
    name = meta.get("name") or meta.get("generateName") or "?"
    return f"{doc.get('kind', '?')} {_namespace(doc)}/{name}"


def expand(docs: Iterable[Any]) -> Expansion:
    """The pods and claims the manifests would create (see the module docstring)."""
    out = Expansion()
    workloads: list[dict[str, Any]] = []
    for doc in docs:
        if doc is None:
            continue
        if not isinstance(doc, dict):
            out.skipped.append(f"{type(doc).__name__}: not an object")
            continue
        kind = doc.get("kind")
        name = _meta(doc).get("name")
        if kind in ("ResourceClaim", "ResourceClaimTemplate"):
            if not isinstance(name, str) or not name:
                out.skipped.append(f"{_ref(doc)}: no metadata.name")
                continue
            table = out.claims if kind == "ResourceClaim" else out.templates
            table[(_namespace(doc), name)] = doc
        elif kind in _WORKLOADS:
            workloads.append(doc)
        elif kind == "DaemonSet":
            out.skipped.append(f"{_ref(doc)}: a DaemonSet runs one pod per node, not planned")
        else:
            out.skipped.append(f"{_ref(doc)}: kind {kind!r} creates no pods or claims")
    used_claims: set[tuple[str, str]] = set()
    used_templates: set[tuple[str, str]] = set()
    for doc in workloads:
        try:
            pods = _pods(doc, out)
        except (AttributeError, TypeError, ValueError, KeyError) as error:
            out.skipped.append(f"{_ref(doc)}: cannot read it: {error}")
            continue
        out.pods.extend(pods)
        for pod in pods:
            for claim in pod.claims:
                if claim.template is not None:
                    used_templates.add((pod.namespace, claim.template))
                else:
                    used_claims.add((pod.namespace, claim.name))
    out.unused_claims = [k for k in out.claims if k not in used_claims]
    out.unused_templates = [k for k in out.templates if k not in used_templates]
    return out


def _count(value: Any, default: int) -> int:
    if value is None:
        return default
    count = int(value)
    if count < 0:
        raise ValueError(f"a negative count ({count})")
    return count


def _pods(doc: dict[str, Any], out: Expansion) -> list[PlannedPod]:
    kind = str(doc["kind"])
    meta = _meta(doc)
    name = str(meta.get("name") or "")
    namespace = _namespace(doc)
    spec = doc.get("spec") or {}
    workload = f"{kind} {namespace}/{name or meta.get('generateName') or '?'}"
    if kind == "Pod":
        pod_name = name or generated(str(meta.get("generateName") or ""))
        if not pod_name or pod_name == SUFFIX:
            raise ValueError("no metadata.name or generateName")
        return [_pod(workload, kind, namespace, pod_name, 0, spec)]
    if not name:
        raise ValueError("no metadata.name")
    job_spec = spec
    if kind == "CronJob":
        job_spec = (spec.get("jobTemplate") or {}).get("spec") or {}
        name = f"{name}-{SCHEDULED_MINUTE}"
    if kind in ("Job", "CronJob"):
        replicas = _count(job_spec.get("parallelism"), 1)
        completions = job_spec.get("completions")
        if completions is not None:
            replicas = min(replicas, _count(completions, 1))
    else:
        replicas = _count(spec.get("replicas"), 1)
    if replicas > MAX_REPLICAS:
        out.skipped.append(f"{workload}: {replicas} replicas, the first {MAX_REPLICAS} planned")
        replicas = MAX_REPLICAS
    pod_spec = (job_spec.get("template") or {}).get("spec") or {}
    indexed = kind in ("Job", "CronJob") and job_spec.get("completionMode") == "Indexed"
    pods = []
    for i in range(replicas):
        if kind == "StatefulSet":
            pod_name = f"{name}-{i}"
        elif kind == "Deployment":
            pod_name = generated(f"{name}-{TEMPLATE_HASH}-")
        elif indexed:
            pod_name = generated(f"{name}-{i}-")
        else:
            pod_name = generated(f"{name}-")
        pods.append(_pod(workload, kind, namespace, pod_name, i, pod_spec))
    return pods


def _pod(
    workload: str, kind: str, namespace: str, name: str, replica: int, spec: dict[str, Any]
) -> PlannedPod:
    if not isinstance(spec, dict):
        raise TypeError("the pod spec is not an object")
    claims = []
    for entry in spec.get("resourceClaims") or []:
        pod_claim = str(entry["name"])
        if entry.get("resourceClaimName"):
            claims.append(PlannedClaim(pod_claim, str(entry["resourceClaimName"]), shared=True))
        elif entry.get("resourceClaimTemplateName"):
            template = str(entry["resourceClaimTemplateName"])
            claim_name = generated(claim_generate_name(name, pod_claim))
            claims.append(PlannedClaim(pod_claim, claim_name, template=template))
        else:
            raise ValueError(f"resourceClaims entry {pod_claim!r} names no claim or template")
    return PlannedPod(workload, kind, namespace, name, replica, spec, tuple(claims))

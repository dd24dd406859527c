"""`lint`: the common DRA mistakes in workloads, found before (or while) they hurt.

Over manifests given as dicts (Pod, Deployment, StatefulSet, ReplicaSet, Job, CronJob,
DaemonSet, ResourceClaim, ResourceClaimTemplate — what `yaml.safe_load_all` yields), each rule
in the operations manual's words:

    container-claim-unknown   error    a container lists a claim that spec.resourceClaims does
                                       not declare: the API server rejects the pod
    claim-not-used            warning  spec.resourceClaims declares a claim no container lists:
                                       the device is allocated but visible in no container
    device-plugin-and-dra     warning  `limits: nvidia.com/gpu` beside a DRA claim: two devices
                                       taken, one through the device plugin, one through DRA
                                       (quiet where the cluster runs no device plugin: a
                                       DRA-only cluster serves such limits through DRA itself)
    node-name-pinned          warning  `nodeName` on a pod with claims: it bypasses the
                                       scheduler, which is what allocates claims — use nodeSelector
    class-missing             error    a request names a deviceClassName no DeviceClass has
    claim-other-namespace     error    resourceClaimName names a claim that exists only in
                                       another namespace: claims are namespaced, the pod waits
    derived-attributes-limit  error    more than 32 derivedAttributes in one request (KEP-6080):
                                       the API server rejects the claim
    derived-attribute-unused  warning  a derived attribute no constraint (matchAttribute,
                                       distinctAttribute) applying to its request names
    template-per-replica      warning  N replicas with a resourceClaimTemplate get N devices; when
                                       the nodes they may use have fewer free devices than
                                       replicas, the second onward stays Pending (to share one
                                       device, reference one claim with resourceClaimName)

    api-invalid               error    what kube-apiserver would refuse in a claim or template: the
                                       served version's shape (a v1beta1 request under
                                       resource.k8s.io/v1), names, counts and list limits
                                       (`api_validation`)
    cel-invalid               error    a selector's CEL expression does not compile

Rules that need cluster facts (existing classes, claims, templates, free devices per node) run
only when `ClusterFacts` provide them. Cluster-wide checks over mirrored records live in
`lint_cluster` (module `lint_cluster`).

Promises: pure; never raises on a malformed manifest (it is reported as `manifest-invalid`);
findings come in input order, each with the object, the field path and a message.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dra_mirror.service.diagnostics.api_validation import problems
from dra_mirror.service.diagnostics.derived import MAX_PER_REQUEST, derived_places, unused

ERROR = "error"
WARNING = "warning"

# Extended resources of device plugins that a DRA driver replaces.
DEVICE_PLUGIN_RESOURCES = (
    "nvidia.com/gpu",
    "amd.com/gpu",
    "gpu.intel.com/i915",
    "gpu.intel.com/xe",
)
_WORKLOADS = {
    "Deployment",
    "StatefulSet",
    "ReplicaSet",
    "Job",
    "DaemonSet",
    "ReplicationController",
}


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str
    object: str  # "Kind namespace/name"
    path: str  # the field, e.g. "spec.template.spec.containers[0].resources.claims[1]"
    message: str


@dataclass(frozen=True)
class ClusterFacts:
    """What the cluster holds, for the rules that need it (all optional)."""

    classes: Collection[str] | None = None  # DeviceClass names
    claims: Collection[tuple[str, str]] | None = None  # (namespace, name) of ResourceClaims
    template_classes: Mapping[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    # class -> node -> devices of that class free now; node -> labels (for nodeSelector)
    free_devices: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    node_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # The extended resources some node advertises (a device plugin's `nvidia.com/gpu` in its
    # capacity); None when unknown. A DRA-only cluster (NVIDIA GPU Operator's GPUCluster mode)
    # advertises none: `limits: nvidia.com/gpu` there is an extended resource DRA serves.
    advertised: Collection[str] | None = None


def lint_manifests(docs: Iterable[Any], facts: ClusterFacts | None = None) -> list[Finding]:
    """Findings for every document (None documents, as YAML `---` leaves them, are skipped)."""
    facts = facts or ClusterFacts()
    docs = [d for d in docs if d is not None]
    local_claims = {
        (_meta(d).get("namespace") or "default", _meta(d).get("name"))
        for d in docs
        if isinstance(d, dict) and d.get("kind") == "ResourceClaim"
    }
    local_templates = {
        (_meta(d).get("namespace") or "default", _meta(d).get("name")): _template_classes(d)
        for d in docs
        if isinstance(d, dict) and d.get("kind") == "ResourceClaimTemplate"
    }
    findings: list[Finding] = []
    for doc in docs:
        try:
            findings.extend(_lint_doc(doc, facts, local_claims, local_templates))
        except (AttributeError, TypeError, KeyError, ValueError) as e:
            ref = _ref(doc) if isinstance(doc, dict) else type(doc).__name__
            findings.append(Finding("manifest-invalid", ERROR, ref, "", f"cannot read it: {e}"))
    return findings


def _meta(doc: dict[str, Any]) -> dict[str, Any]:
    return doc.get("metadata") or {}


def _ref(doc: dict[str, Any]) -> str:
    meta = _meta(doc)
    return f"{doc.get('kind', '?')} {meta.get('namespace') or 'default'}/{meta.get('name', '?')}"


def _requests(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return ((spec.get("devices") or {}).get("requests")) or []


def _class_names(request: dict[str, Any]) -> list[str]:
    exact = request.get("exactly") or request  # v1 `exactly`, or the v1beta1 flat form
    names = [exact["deviceClassName"]] if exact.get("deviceClassName") else []
    names += [
        s["deviceClassName"]
        for s in request.get("firstAvailable") or []
        if s.get("deviceClassName")
    ]
    return names


def _template_classes(doc: dict[str, Any]) -> tuple[str, ...]:
    spec = ((doc.get("spec") or {}).get("spec")) or {}
    return tuple(name for request in _requests(spec) for name in _class_names(request))


def _lint_doc(
    doc: dict[str, Any],
    facts: ClusterFacts,
    local_claims: set[tuple[str, str | None]],
    local_templates: Mapping[tuple[str, Any], tuple[str, ...]],
) -> list[Finding]:
    kind = doc.get("kind")
    ref = _ref(doc)
    namespace = _meta(doc).get("namespace") or "default"
    if kind in ("ResourceClaim", "ResourceClaimTemplate"):
        refused = [Finding(p.rule, ERROR, ref, p.path, p.message) for p in problems(doc)]
        spec = doc.get("spec") or {}
        base = "spec"
        if kind == "ResourceClaimTemplate":
            spec, base = spec.get("spec") or {}, "spec.spec"
        return refused + _check_classes(spec, base, ref, facts) + _check_derived(spec, base, ref)
    if kind == "Pod":
        return _check_pod(
            doc.get("spec") or {}, "spec", ref, namespace, 1, facts, local_claims, local_templates
        )
    if kind in _WORKLOADS or kind == "CronJob":
        spec = doc.get("spec") or {}
        base = "spec.template.spec"
        if kind == "CronJob":
            spec = ((spec.get("jobTemplate") or {}).get("spec")) or {}
            base = "spec.jobTemplate.spec.template.spec"
        if kind == "Job" or kind == "CronJob":
            replicas = int(spec.get("parallelism", 1) or 1)
        elif kind == "DaemonSet":
            replicas = 1  # one per node: each replica has its own node's devices
        else:
            replicas = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
        pod_spec = ((spec.get("template") or {}).get("spec")) or {}
        return _check_pod(
            pod_spec, base, ref, namespace, replicas, facts, local_claims, local_templates
        )
    return []


def _check_classes(spec: dict[str, Any], base: str, ref: str, facts: ClusterFacts) -> list[Finding]:
    if facts.classes is None:
        return []
    out = []
    for i, request in enumerate(_requests(spec)):
        for name in _class_names(request):
            if name not in facts.classes:
                out.append(
                    Finding(
                        "class-missing",
                        ERROR,
                        ref,
                        f"{base}.devices.requests[{i}]",
                        f"request {request.get('name')!r} names DeviceClass {name!r}, which does "
                        "not exist: the claim stays Pending",
                    )
                )
    return out


def _check_derived(spec: dict[str, Any], base: str, ref: str) -> list[Finding]:
    """KEP-6080: at most MAX_PER_REQUEST derived attributes per request, each named by a
    constraint that applies to the request (else it is computed for nothing)."""
    constraints = [
        (tuple(c.get("requests") or ()), c.get("matchAttribute"), c.get("distinctAttribute"))
        for c in ((spec.get("devices") or {}).get("constraints") or [])
    ]
    out: list[Finding] = []
    for where, request_name, derived in derived_places(_requests(spec), base):
        if not derived:
            continue
        if len(derived) > MAX_PER_REQUEST:
            out.append(
                Finding(
                    "derived-attributes-limit",
                    ERROR,
                    ref,
                    f"{where}.derivedAttributes",
                    f"request {request_name!r} has {len(derived)} derived attributes; the API "
                    f"allows at most {MAX_PER_REQUEST}: the claim is rejected",
                )
            )
        names = [str(d.get("name")) for d in derived if d.get("name")]
        for unused_name in unused(request_name, names, constraints):
            out.append(
                Finding(
                    "derived-attribute-unused",
                    WARNING,
                    ref,
                    f"{where}.derivedAttributes",
                    f"derived attribute {unused_name!r} of request {request_name!r} is named "
                    "by no constraint (matchAttribute or distinctAttribute) that applies to "
                    "the request: it is computed for every candidate device for nothing",
                )
            )
    return out


def _check_pod(
    spec: dict[str, Any],
    base: str,
    ref: str,
    namespace: str,
    replicas: int,
    facts: ClusterFacts,
    local_claims: set[tuple[str, str | None]],
    local_templates: Mapping[tuple[str, Any], tuple[str, ...]],
) -> list[Finding]:
    out: list[Finding] = []
    declared = spec.get("resourceClaims") or []
    names = {c.get("name") for c in declared}
    used: set[str] = set()
    containers = [("containers", c) for c in spec.get("containers") or []]
    containers += [("initContainers", c) for c in spec.get("initContainers") or []]
    index = {"containers": 0, "initContainers": 0}
    for group, container in containers:
        i = index[group]
        index[group] += 1
        resources = container.get("resources") or {}
        path = f"{base}.{group}[{i}].resources"
        for j, entry in enumerate(resources.get("claims") or []):
            used.add(entry.get("name"))
            if entry.get("name") not in names:
                out.append(
                    Finding(
                        "container-claim-unknown",
                        ERROR,
                        ref,
                        f"{path}.claims[{j}]",
                        f"container {container.get('name')!r} lists claim {entry.get('name')!r}, "
                        "which spec.resourceClaims does not declare: the pod is rejected",
                    )
                )
        plugin = [
            r
            for r in DEVICE_PLUGIN_RESOURCES
            if r in (resources.get("limits") or {})
            and (facts.advertised is None or r in facts.advertised)
        ]
        if plugin and declared:
            out.append(
                Finding(
                    "device-plugin-and-dra",
                    WARNING,
                    ref,
                    f"{path}.limits",
                    f"container {container.get('name')!r} asks for {plugin[0]} through limits "
                    "beside a DRA claim: two devices are taken (one by the device plugin, one by "
                    "DRA); drop the limit",
                )
            )
    for i, claim in enumerate(declared):
        path = f"{base}.resourceClaims[{i}]"
        if claim.get("name") not in used:
            out.append(
                Finding(
                    "claim-not-used",
                    WARNING,
                    ref,
                    path,
                    f"claim {claim.get('name')!r} is listed by no container: its device is "
                    "allocated but visible in none (add it to resources.claims)",
                )
            )
        claim_name = claim.get("resourceClaimName")
        if claim_name:
            known = set(facts.claims or ()) | {c for c in local_claims if c[1]}
            if (namespace, claim_name) not in known:
                elsewhere = sorted(ns for ns, n in known if n == claim_name)
                if elsewhere:
                    out.append(
                        Finding(
                            "claim-other-namespace",
                            ERROR,
                            ref,
                            path,
                            f"claim {claim_name!r} exists only in namespace(s) {', '.join(elsewhere)}; "
                            f"a pod in {namespace} cannot use it (claims are namespaced): it waits",
                        )
                    )
        template = claim.get("resourceClaimTemplateName")
        if template and replicas > 1:
            out.extend(
                _template_per_replica(
                    spec, path, ref, namespace, template, replicas, facts, local_templates
                )
            )
    if spec.get("nodeName") and declared:
        out.append(
            Finding(
                "node-name-pinned",
                WARNING,
                ref,
                f"{base}.nodeName",
                f"nodeName {spec['nodeName']!r} bypasses the scheduler, which is what allocates "
                "the pod's claims: use a nodeSelector (kubernetes.io/hostname) instead",
            )
        )
    return out


def _template_per_replica(
    spec: dict[str, Any],
    path: str,
    ref: str,
    namespace: str,
    template: str,
    replicas: int,
    facts: ClusterFacts,
    local_templates: Mapping[tuple[str, Any], tuple[str, ...]],
) -> list[Finding]:
    classes = local_templates.get((namespace, template)) or facts.template_classes.get(
        (namespace, template)
    )
    if not classes or not facts.free_devices:
        return []
    selector = spec.get("nodeSelector") or {}
    pinned = spec.get("nodeName")
    free_total = 0
    nodes_seen = 0
    for node, labels in facts.node_labels.items():
        if pinned and node != pinned:
            continue
        if any(labels.get(k) != v for k, v in selector.items()):
            continue
        nodes_seen += 1
        # A replica needs one device of every class its template asks for.
        free_total += min(facts.free_devices.get(c, {}).get(node, 0) for c in classes)
    if free_total >= replicas:
        return []
    where = f"nodes matching {selector}" if selector else "the cluster's nodes"
    return [
        Finding(
            "template-per-replica",
            WARNING,
            ref,
            path,
            f"{replicas} replicas each get their own claim from template {template!r} "
            f"({', '.join(classes)}), but {where} ({nodes_seen}) have {free_total} free: replica "
            f"{free_total + 1} onward stays Pending. To share one device, reference one claim "
            "with resourceClaimName",
        )
    ]

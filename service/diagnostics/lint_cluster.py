"""`lint` over a mirrored cluster: the same mistakes as `lint`, found in what is running, plus
the cluster-wide ones.

    gpu-node-without-driver   warning  a node that looks like a GPU node (device-plugin capacity,
                                       GPU feature labels) has no device of a GPU DRA driver:
                                       the driver is not installed there, or not running
    class-matches-nothing     warning  a DeviceClass whose selectors match no published device
    class-selector-error      error    a DeviceClass selector fails to compile or to evaluate
    claim-not-used            warning  a pod's claim is listed by none of its containers
    device-plugin-and-dra     warning  a pod with claims also asks for nvidia.com/gpu in limits,
                                       and some node's device plugin advertises it (a DRA-only
                                       cluster advertises none: quiet there)
    claim-other-namespace     error    a pod's resourceClaimName exists only in other namespaces
    template-per-replica      warning  replicas of one controller each got a template claim and
                                       some stay Pending for want of devices

Promises: pure; findings sorted by rule then object.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from dra_mirror.service.diagnostics.candidates import Alternative, match
from dra_mirror.service.diagnostics.cluster import advertised, gpu_nodes
from dra_mirror.service.diagnostics.lint import DEVICE_PLUGIN_RESOURCES, ERROR, WARNING, Finding
from dra_mirror.service.model.records import (
    ClaimRecord,
    DeviceClassRecord,
    DeviceEntry,
    NodeRecord,
    ObjectKey,
    PodRecord,
)


def lint_cluster(
    *,
    classes: Mapping[str, DeviceClassRecord],
    devices: Sequence[DeviceEntry],
    claims: Mapping[ObjectKey, ClaimRecord],
    pods: Iterable[PodRecord],
    nodes: Iterable[NodeRecord],
) -> list[Finding]:
    """Findings for one cluster's mirrored state."""
    nodes = list(nodes)
    findings: list[Finding] = []
    findings += _nodes_without_driver(nodes, devices)
    findings += _classes(classes, devices)
    findings += _pods(list(pods), claims, advertised(nodes))
    return sorted(findings, key=lambda f: (f.rule, f.object, f.path))


def _nodes_without_driver(
    nodes: Iterable[NodeRecord], devices: Sequence[DeviceEntry]
) -> list[Finding]:
    # A GPU DRA driver: gpu.nvidia.com, gpu.amd.com, gpu.intel.com, gpu.example.com …
    covered = {e.node for e in devices if "gpu" in e.key.driver and e.node is not None}
    return [
        Finding(
            "gpu-node-without-driver",
            WARNING,
            f"Node {node.meta.name}",
            "",
            "the node looks like a GPU node but no GPU DRA driver publishes devices on it: the "
            "driver is not installed there or not running (claims cannot use its GPUs)",
        )
        for node in gpu_nodes(nodes)
        if node.meta.name not in covered
    ]


def _classes(
    classes: Mapping[str, DeviceClassRecord], devices: Sequence[DeviceEntry]
) -> list[Finding]:
    out = []
    for name, device_class in sorted(classes.items()):
        probe = Alternative(name, name, name, (), "All", 0, {}, ())
        found = match(probe, classes, devices)
        if found.errors:
            for expression, message in found.errors:
                out.append(
                    Finding(
                        "class-selector-error",
                        ERROR,
                        f"DeviceClass {name}",
                        "spec.selectors",
                        f"selector {expression!r} fails: {message}",
                    )
                )
        elif found.class_matched == 0:
            out.append(
                Finding(
                    "class-matches-nothing",
                    WARNING,
                    f"DeviceClass {name}",
                    "spec.selectors",
                    f"no published device matches ({len(device_class.selectors)} selector(s)): "
                    "claims for this class stay Pending",
                )
            )
    return out


def _pods(
    pods: list[PodRecord], claims: Mapping[ObjectKey, ClaimRecord], plugins: frozenset[str]
) -> list[Finding]:
    out: list[Finding] = []
    by_name: dict[str, set[str]] = defaultdict(set)
    for key in claims:
        by_name[key.name].add(key.namespace)
    waiting_replicas: dict[tuple[str, str], list[PodRecord]] = defaultdict(list)
    replicas: dict[tuple[str, str], int] = defaultdict(int)
    for pod in pods:
        ref = f"Pod {pod.meta.namespace}/{pod.meta.name}"
        for i, claim in enumerate(pod.claims):
            path = f"spec.resourceClaims[{i}]"
            if not claim.containers:
                out.append(
                    Finding(
                        "claim-not-used",
                        WARNING,
                        ref,
                        path,
                        f"claim {claim.name!r} is listed by no container: its device is "
                        "allocated but visible in none",
                    )
                )
            if claim.template_name is None and claim.claim_name:
                namespaces = by_name.get(claim.claim_name, set())
                if namespaces and pod.meta.namespace not in namespaces:
                    out.append(
                        Finding(
                            "claim-other-namespace",
                            ERROR,
                            ref,
                            path,
                            f"claim {claim.claim_name!r} exists only in namespace(s) "
                            f"{', '.join(sorted(namespaces))}: claims are namespaced, the pod waits",
                        )
                    )
        if pod.claims:
            for container in pod.containers:
                plugin = [
                    r for r in DEVICE_PLUGIN_RESOURCES if r in container.limits and r in plugins
                ]
                if plugin:
                    out.append(
                        Finding(
                            "device-plugin-and-dra",
                            WARNING,
                            ref,
                            f"container {container.name}",
                            f"asks for {plugin[0]} through limits beside a DRA claim: two "
                            "devices are taken",
                        )
                    )
        owner = pod.meta.controller()
        if owner is not None and any(c.template_name for c in pod.claims):
            group = (pod.meta.namespace, f"{owner.kind} {owner.name}")
            replicas[group] += 1
            if pod.phase == "Pending" and pod.reason == "Unschedulable":
                waiting_replicas[group].append(pod)
    for (namespace, controller), waiting in sorted(waiting_replicas.items()):
        total = replicas[(namespace, controller)]
        if total > 1:
            names = ", ".join(sorted(p.meta.name for p in waiting))
            out.append(
                Finding(
                    "template-per-replica",
                    WARNING,
                    f"{controller.split(' ')[0]} {namespace}/{controller.split(' ', 1)[1]}",
                    "",
                    f"{total} replicas each got their own claim from a template and "
                    f"{len(waiting)} stay Pending ({names}): not enough free devices where they "
                    "may run. To share one device, reference one claim with resourceClaimName",
                )
            )
    return out

"""The DRA series of a `DraSnapshot` (service.http.metrics_dra) as Prometheus text (0.0.4):
every family with its HELP and TYPE, in a fixed order, label values escaped; nothing read,
nothing computed here."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from prometheus_client.utils import floatToGoString

from dra_mirror.service.http.metrics_dra import (
    CLAIM_STATES,
    DEVICE_STATUSES,
    PENDING_BUCKETS,
    DraSnapshot,
)

# (name, type, help) of every family, in the order they are written.
FAMILIES = (
    ("kube_deviceclass_info", "gauge", "Information about a DeviceClass."),
    ("kube_resourceslice_info", "gauge", "Information about a ResourceSlice."),
    ("kube_resourceslice_devices_total", "gauge", "Devices a ResourceSlice publishes."),
    ("kube_resourceclaim_info", "gauge", "Information about a ResourceClaim."),
    ("kube_resourceclaim_status_reserved_for", "gauge",
     "A consumer the ResourceClaim is reserved for (status.reservedFor)."),
    ("kube_resourceclaim_allocation_device_info", "gauge",
     "A device allocated to the ResourceClaim (status.allocation.devices.results)."),
    ("kube_resourceclaim_status_allocated", "gauge",
     "Whether the ResourceClaim is allocated (1) or not (0)."),
    ("kube_resourceclaim_status_reserved", "gauge",
     "Whether the ResourceClaim is reserved for at least one consumer (1) or not (0)."),
    ("kube_pod_resourceclaim_info", "gauge",
     "A pod's reference to a ResourceClaim (spec.resourceClaims, resolved by its status)."),
    ("dra_mirror_devices", "gauge",
     'Devices of valid pools by DeviceClass (CEL selectors; "" = no class) and status.'),
    ("dra_mirror_claims", "gauge", "ResourceClaims by state (as kubectl)."),
    ("dra_mirror_claim_pending_seconds", "histogram",
     "Age of the claims pending now (a histogram of this moment; do not rate() it)."),
    ("dra_mirror_idle_held_devices", "gauge",
     "Devices held by idle claims (allocated, no consumer pod Running)."),
)  # fmt: skip


def render(snapshot: DraSnapshot) -> bytes:
    """The snapshot in the Prometheus text format (0.0.4).

    Written here rather than through prometheus-client's families: a 40,000-claim cluster is
    some 165,000 lines, which prometheus-client formats in seconds (a Sample object and a
    label dict per line) and plain string joins in a fraction of that."""
    lines: dict[str, list[str]] = {name: [] for name, _, _ in FAMILIES}
    for cluster, figures in snapshot.clusters.items():
        c = f'cluster="{_escape(cluster)}"'
        out = lines["kube_deviceclass_info"]
        for name, extended in figures.classes:
            out.append(
                f'{{{c},deviceclass="{_escape(name)}",extended_resource_name="{_escape(extended)}"}} 1'
            )
        out = lines["kube_resourceslice_info"]
        for name, driver, pool, node, _, all_nodes in figures.slices:
            out.append(
                f'{{{c},resourceslice="{_escape(name)}",driver="{_escape(driver)}",'
                f'pool_name="{_escape(pool)}",node_name="{_escape(node)}",'
                f'all_nodes="{str(all_nodes).lower()}"}} 1'
            )
        out = lines["kube_resourceslice_devices_total"]
        for name, driver, pool, node, count, _ in figures.slices:
            out.append(
                f'{{{c},resourceslice="{_escape(name)}",driver="{_escape(driver)}",'
                f'pool="{_escape(pool)}",node="{_escape(node)}"}} {count}'
            )
        info = lines["kube_resourceclaim_info"]
        allocated = lines["kube_resourceclaim_status_allocated"]
        reserved = lines["kube_resourceclaim_status_reserved"]
        for namespace, name, uid, origin, is_allocated, is_reserved in figures.claims:
            claim = f'{c},namespace="{_escape(namespace)}",resourceclaim="{_escape(name)}"'
            info.append(f'{{{claim},uid="{_escape(uid)}",origin="{_escape(origin)}"}} 1')
            allocated.append(f"{{{claim}}} {int(is_allocated)}")
            reserved.append(f"{{{claim}}} {int(is_reserved)}")
        out = lines["kube_resourceclaim_status_reserved_for"]
        for namespace, name, group, resource, consumer, uid in figures.reserved_for:
            out.append(
                f'{{{c},namespace="{_escape(namespace)}",resourceclaim="{_escape(name)}",'
                f'consumer_api_group="{_escape(group)}",consumer_resource="{_escape(resource)}",'
                f'consumer_name="{_escape(consumer)}",consumer_uid="{_escape(uid)}"}} 1'
            )
        out = lines["kube_resourceclaim_allocation_device_info"]
        for namespace, name, request, driver, pool, device in figures.allocated_devices:
            out.append(
                f'{{{c},namespace="{_escape(namespace)}",resourceclaim="{_escape(name)}",'
                f'request="{_escape(request)}",driver="{_escape(driver)}",'
                f'pool="{_escape(pool)}",device="{_escape(device)}"}} 1'
            )
        out = lines["kube_pod_resourceclaim_info"]
        for namespace, pod, uid, pod_claim, claim_name, template in figures.pod_claims:
            out.append(
                f'{{{c},namespace="{_escape(namespace)}",pod="{_escape(pod)}",uid="{_escape(uid)}",'
                f'claim_name="{_escape(pod_claim)}",resourceclaim_name="{_escape(claim_name)}",'
                f'resourceclaim_template_name="{_escape(template)}"}} 1'
            )
        out = lines["dra_mirror_devices"]
        class_names = {name for name, _ in figures.classes} | {k for k, _ in figures.devices}
        for class_name in sorted(class_names):
            for status in DEVICE_STATUSES:
                count = figures.devices[(class_name, status)]
                out.append(f'{{{c},class="{_escape(class_name)}",status="{status}"}} {count}')
        out = lines["dra_mirror_claims"]
        for state in CLAIM_STATES:
            out.append(f'{{{c},state="{state}"}} {figures.claim_states[state]}')
        out = lines["dra_mirror_claim_pending_seconds"]
        buckets, total = _buckets(figures.pending_ages)
        for le, count in buckets:
            out.append(f'_bucket{{{c},le="{le}"}} {count}')
        out.append(f"_count{{{c}}} {len(figures.pending_ages)}")
        out.append(f"_sum{{{c}}} {floatToGoString(total)}")
        lines["dra_mirror_idle_held_devices"].append(f"{{{c}}} {figures.idle_held_devices}")
    text: list[str] = []
    for name, kind, help_text in FAMILIES:
        text.append(f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n")
        if lines[name]:
            text.append(name + f"\n{name}".join(lines[name]) + "\n")
    return "".join(text).encode()


def _escape(value: str) -> str:
    # Label values escape backslash, double quote and newline (text format 0.0.4).
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def _buckets(ages: Sequence[float]) -> tuple[list[tuple[str, int]], float]:
    ordered = sorted(ages)
    buckets = [
        (floatToGoString(bound), bisect.bisect_right(ordered, bound)) for bound in PENDING_BUCKETS
    ]
    buckets.append(("+Inf", len(ordered)))
    return buckets, sum(ordered)

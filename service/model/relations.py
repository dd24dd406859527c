"""The index's reverse maps, named once: `Relation`, and the key and value each maps.

The stores and the schema name relations by these members (`Relation.DEVICE_ALLOCATIONS`); a
`StrEnum` member equals (and hashes as) its value, so `"device_allocations"` read from a
cursor or a Redis key finds the same map. The key and value of each map:

* device_allocations: DeviceKey -> {(claim key, request, shareID): AllocationRef}
* claim_referrers: claim key -> pod keys whose spec names the claim
* template_claims: template key -> claim keys generated from it (resolved through pods)
* class_claims: (cluster, class name) -> claim keys whose requests name the class
* node_slices / node_devices / node_pods: (cluster, node name) -> slice / device / pod keys
* group_pods: (cluster, namespace, PodGroup name) -> pod keys whose spec.schedulingGroup
  names the group (the consumers of a claim reserved for that PodGroup)
* claim_groups: claim key -> PodGroup keys whose spec.resourceClaims (or the names their
  status.resourceClaimStatuses generated) name the claim
* slice_devices: slice key -> DeviceKeys of its valid-generation devices
* pool_devices: (cluster, driver, pool) -> DeviceKeys; uuid_devices: uuid -> DeviceKeys;
  name_devices: device name -> DeviceKeys

Relations keyed by uuid or device name answer across clusters in the stores (ACROSS_CLUSTERS);
the others within the cluster named by the key's first element. Two relations have an
unbounded fan-out (FAN_OUT: every claim of a class, every device named `gpu-0`): a store keeps
their values one by one; for every other relation a from-key links a handful of values, and
the model hands a store the whole list of each from-key a batch touched (`IndexDelta.lists`).
"""

from __future__ import annotations

import enum


class Relation(enum.StrEnum):
    """Indexed relations; the key type each takes is given after the arrow."""

    DEVICE_ALLOCATIONS = "device_allocations"  # DeviceKey -> [AllocationRef]
    CLAIM_REFERRERS = "claim_referrers"  # claim ObjectKey -> [pod ObjectKey] (pod.spec claims)
    TEMPLATE_CLAIMS = "template_claims"  # template ObjectKey -> [claim ObjectKey]
    CLASS_CLAIMS = "class_claims"  # (cluster, class name) -> [claim ObjectKey]
    NODE_SLICES = "node_slices"  # (cluster, node name) -> [slice ObjectKey]
    NODE_DEVICES = "node_devices"  # (cluster, node name) -> [DeviceKey]
    NODE_PODS = "node_pods"  # (cluster, node name) -> [pod ObjectKey]
    GROUP_PODS = "group_pods"  # (cluster, namespace, PodGroup name) -> [pod ObjectKey]
    CLAIM_GROUPS = "claim_groups"  # claim ObjectKey -> [PodGroup ObjectKey]
    SLICE_DEVICES = "slice_devices"  # slice ObjectKey -> [DeviceKey]
    POOL_DEVICES = "pool_devices"  # (cluster, driver, pool) -> [DeviceKey]
    UUID_DEVICES = "uuid_devices"  # uuid -> [DeviceKey] (across clusters)
    NAME_DEVICES = "name_devices"  # device name -> [DeviceKey] (across clusters)


DEVICE_ALLOCATIONS = Relation.DEVICE_ALLOCATIONS
CLAIM_REFERRERS = Relation.CLAIM_REFERRERS
TEMPLATE_CLAIMS = Relation.TEMPLATE_CLAIMS
CLASS_CLAIMS = Relation.CLASS_CLAIMS
NODE_SLICES = Relation.NODE_SLICES
NODE_DEVICES = Relation.NODE_DEVICES
NODE_PODS = Relation.NODE_PODS
GROUP_PODS = Relation.GROUP_PODS
CLAIM_GROUPS = Relation.CLAIM_GROUPS
SLICE_DEVICES = Relation.SLICE_DEVICES
POOL_DEVICES = Relation.POOL_DEVICES
UUID_DEVICES = Relation.UUID_DEVICES
NAME_DEVICES = Relation.NAME_DEVICES
RELATIONS: tuple[Relation, ...] = tuple(Relation)
ACROSS_CLUSTERS = frozenset({UUID_DEVICES, NAME_DEVICES})
FAN_OUT = frozenset({CLASS_CLAIMS, NAME_DEVICES})

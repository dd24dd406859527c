"""Names of the index's reverse maps: the values of `service.stores.protocols.Relation`.

The model may not import the stores layer, so it names the relations by value; the stores
translate `Relation.X` to `Relation.X.value`. The key and value of each map:

* device_allocations: DeviceKey -> {(claim key, request, shareID): AllocationRef}
* claim_referrers: claim key -> pod keys whose spec names the claim
* template_claims: template key -> claim keys generated from it (resolved through pods)
* class_claims: (cluster, class name) -> claim keys whose requests name the class
* node_slices / node_devices / node_pods: (cluster, node name) -> slice / device / pod keys
* slice_devices: slice key -> DeviceKeys of its valid-generation devices
* pool_devices: (cluster, driver, pool) -> DeviceKeys; uuid_devices: uuid -> DeviceKeys;
  name_devices: device name -> DeviceKeys
"""

from __future__ import annotations

DEVICE_ALLOCATIONS = "device_allocations"
CLAIM_REFERRERS = "claim_referrers"
TEMPLATE_CLAIMS = "template_claims"
CLASS_CLAIMS = "class_claims"
NODE_SLICES = "node_slices"
NODE_DEVICES = "node_devices"
NODE_PODS = "node_pods"
SLICE_DEVICES = "slice_devices"
POOL_DEVICES = "pool_devices"
UUID_DEVICES = "uuid_devices"
NAME_DEVICES = "name_devices"
RELATIONS = (
    DEVICE_ALLOCATIONS,
    CLAIM_REFERRERS,
    TEMPLATE_CLAIMS,
    CLASS_CLAIMS,
    NODE_SLICES,
    NODE_DEVICES,
    NODE_PODS,
    SLICE_DEVICES,
    POOL_DEVICES,
    UUID_DEVICES,
    NAME_DEVICES,
)

"""Expected list sizes and per-field costs of the graph, for the cost estimate (`shape`).

The numbers are typical sizes (a node's devices, a class's devices in a mid-sized cluster), not
worst cases: the estimate is the first line, refusing a runaway document (20 levels of class ->
devices -> holders -> pods -> node -> devices… estimates at hundreds of millions) before it
runs, while a dashboard's page of a thousand devices with their holders estimates at tens of
thousands. What a query really resolves is bounded by the execution budget (`budget`). Lists not named here count `default_list` items; connections
count their page (`first`). Fields that scan or aggregate cost more than one by themselves.
"""

from __future__ import annotations

LIST_SIZES: dict[str, int] = {
    "Query.clusters": 5,
    "Query.deviceClasses": 10,
    "Query.resourceSlices": 200,
    "Query.resourceClaimTemplates": 200,
    "Query.nodes": 200,
    "Query.whoHolds": 5,
    "Cluster.nodes": 200,
    "DeviceClass.devices": 500,
    "DeviceClass.claims": 200,
    "ResourceSlice.devices": 32,
    "Node.slices": 4,
    "Node.devices": 32,
    "Node.pods": 30,
    "Device.allocations": 2,
    "Device.classes": 2,
    "Device.pods": 3,
    "ResourceClaim.consumers": 3,
    "ResourceClaim.requests": 2,
    "ClaimAllocation.devices": 2,
    "ResourceClaimTemplate.claims": 50,
    "Pod.claims": 2,
    "Pod.devices": 4,
    "Holding.pods": 3,
}

FIELD_COSTS: dict[str, float] = {
    "Cluster.counts": 500.0,  # a scan of the cluster's devices and claims
    "Query.whoHolds": 10.0,
    "Query.contention": 500.0,
    "Query.chargeback": 200.0,
    "Query.idleHolders": 200.0,
    "Query.deviceHistory": 100.0,
    "Query.claimHistory": 50.0,
    "Query.whoHeld": 50.0,
    "Query.historyGaps": 20.0,
    "Query.explainClaim": 200.0,
    "Query.findDevices": 200.0,
    "Query.lint": 500.0,
}

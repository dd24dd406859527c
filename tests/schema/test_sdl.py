"""The committed SDL (`schema/schema.graphql`) is what the code prints, and keeps the contract's names."""

from __future__ import annotations

import re

from dra_mirror import schema

REGENERATE = "schema/schema.graphql is stale: run `dra-mirror schema --write` and commit it"


def test_committed_sdl_is_current():
    assert schema.SDL_PATH.read_text() == schema.print_sdl(), REGENERATE


def test_the_contract_s_names_are_present():
    sdl = schema.print_sdl()
    for type_name, fields in {
        "Query": "clusters cluster deviceClasses resourceSlices devices resourceClaims resourceClaim "
        "resourceClaimTemplates pods nodes whoHolds",
        "Cluster": "name status counts",
        "ClusterStatus": "connected synced lastEventAt error",
        "ClusterCounts": "devices freeDevices claims pendingClaims",
        "DeviceClass": "cluster name selectors config extendedResourceName devices claims",
        "ResourceSlice": "cluster name driver pool nodeName node allNodes devices sharedCounters",
        "PoolInfo": "name generation resourceSliceCount complete",
        "Device": "cluster driver pool name uuid attributes capacity shareable status allocations "
        "remainingCapacity taints slice node classes pods",
        "Capacity": "name value requestPolicy",
        "Allocation": "request device claim shareID consumedCapacity adminAccess",
        "ResourceClaim": "cluster namespace name uid state origin template requests allocation consumers "
        "idle idleSince createdAt pendingSeconds",
        "DeviceRequest": "name deviceClassName allocationMode count selectors capacity firstAvailable",
        "ClaimAllocation": "node nodeName devices allocatedAt",
        "ResourceClaimTemplate": "cluster namespace name requests claims",
        "Pod": "cluster namespace name uid phase nodeName node claims devices",
        "PodClaim": "name claim templateName containers",
        "Node": "cluster name labels slices devices pods",
        "Holding": "cluster device claim pods shareID since",
        "DeviceConnection": "edges pageInfo totalCount",
        "PageInfo": "hasNextPage endCursor",
    }.items():
        body = re.search(r"^type " + type_name + r" \{\n(.*?)^\}", sdl, re.S | re.M)
        assert body, f"type {type_name} missing"
        declared = set(re.findall(r"^  (\w+)", body.group(1), re.M))
        assert set(fields.split()) <= declared, (type_name, set(fields.split()) - declared)
    for enum, values in {
        "ClaimState": "PENDING ALLOCATED RESERVED DELETING",
        "ClaimOrigin": "TEMPLATE EXTENDED_RESOURCE MANUAL",
        "DeviceStatus": "FREE HELD SHARED BLOCKED",
    }.items():
        body = re.search(r"^enum " + enum + r" \{\n(.*?)^\}", sdl, re.S | re.M)
        assert body and set(re.findall(r"^  (\w+)", body.group(1), re.M)) == set(values.split())
    assert "scalar DateTime" in sdl and "scalar JSON" in sdl

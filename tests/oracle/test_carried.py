"""Alpha fields the mirror carries as written, beside the oracle's reading of the raw objects:
a request's derivedAttributes (KEP-6080) and a device's compatibilityGroups (KEP-5963)."""

from __future__ import annotations

from tests.oracle import objects as o

GPU = "gpu.nvidia.com"
COUNTERS = {"gpu-0-cs": {"sm": "4"}}
SLICE = o.slice_("n1-gpu", GPU, "n1", [
    o.device("gpu-0-mig-a", consumes={"gpu-0-cs": {"sm": "2"}}, groups=["mig"]),
    o.device("gpu-0-vgpu", consumes={"gpu-0-cs": {"sm": "2"}}, groups=["vgpu", "shared"]),
    o.device("gpu-0", consumes={"gpu-0-cs": {"sm": "4"}}),
], node_name="n1", counters=COUNTERS)  # fmt: skip
CLAIM = o.claim("aligned", derived={"numa": 'device.attributes["gpu.nvidia.com"].type'})
AREAS = ("claim.derivedAttributes", "device.compatibilityGroups", "carried")


async def test_derived_attributes_and_compatibility_groups_are_carried(each_store):
    await each_store.show(SLICE, CLAIM)
    truth = each_store.truth()
    assert truth.derived[("team-a", "aligned")] == (
        ("gpu", "numa", 'device.attributes["gpu.nvidia.com"].type'),
    )
    assert truth.compatibility[(GPU, "n1", "gpu-0-vgpu")] == (("gpu-0-cs", ("vgpu", "shared")),)
    assert await each_store.mismatches(*AREAS) == []

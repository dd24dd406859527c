"""Pool counts as KEP-5677's ResourcePoolStatusRequest computes them (1.37 accounting).

Read from the KEP (keps/sig-node/5677-dra-resource-availability-visibility, "Partitionable &
Consumable Device Accounting") and the PoolStatus comments of resource/v1alpha3 types.go at
master, checked against kube-controller-manager's resourcepoolstatusrequest controller:

1. per (driver, pool): only slices of the highest `pool.generation` count ("ResourceSlices
   with older pool generations are ignored during computation");
2. the pool is incomplete when fewer slices of that generation are present than their
   `resourceSliceCount`: then `validationError` is set and every count is unset;
3. `totalDevices`: the devices of those slices;
4. `allocatedDevices`: the distinct device names of the pool in allocation results, "a
   physical device is counted at most once regardless of how many non-AdminAccess claims
   reference it", built "without filtering on pool generation" (a held device no slice
   publishes any more still counts); AdminAccess results "are skipped";
5. `unavailableDevices`: devices with at least one NoSchedule or NoExecute taint, from the
   slice or from a DeviceTaintRule selecting it by driver/pool/device, counted "over all
   devices in the pool regardless of allocation";
6. `availableDevices` = max(0, total - allocated - unavailable);
7. `nodeName`: set when every slice names the same node.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tests.oracle import reading
from tests.oracle.reading import Raw

UNAVAILABLE_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class PoolTruth:
    driver: str
    pool: str
    generation: int
    complete: bool
    node_name: str | None
    resource_slice_count: int | None  # observed slices at the generation; None when incomplete
    total: int | None
    allocated: int | None
    available: int | None
    unavailable: int | None
    validation_error: str | None


def pool_counts(
    slices: list[Raw],
    claims: list[Raw],
    tainted: Callable[[str, str, Raw], bool],
) -> dict[tuple[str, str], PoolTruth]:
    """(driver, pool) -> its counts. `tainted(driver, pool, device)`: the device carries a
    NoSchedule/NoExecute taint (its own or a rule's)."""
    highest: dict[tuple[str, str], int] = {}
    for s in slices:
        driver, name, generation, _ = reading.pool(s)
        highest[(driver, name)] = max(highest.get((driver, name), generation), generation)
    members: dict[tuple[str, str], list[Raw]] = {key: [] for key in highest}
    for s in sorted(slices, key=lambda s: reading.meta(s).get("name") or ""):
        driver, name, generation, _ = reading.pool(s)
        if generation == highest[(driver, name)]:
            members[(driver, name)].append(s)

    in_use: dict[tuple[str, str], set[str]] = {}
    for claim in claims:
        for result in reading.results(claim):
            if result.get("adminAccess"):
                continue  # observers, not consumers
            key = (result.get("driver") or "", result.get("pool") or "")
            in_use.setdefault(key, set()).add(result.get("device") or "")

    out: dict[tuple[str, str], PoolTruth] = {}
    for key, present in members.items():
        driver, name = key
        # "ResourceSliceCount is read from the first slice observed for the pool": the
        # controller's order is its lister's; here, the first slice by name.
        expected = reading.pool(present[0])[3]
        nodes = {(s.get("spec") or {}).get("nodeName") or "" for s in present}
        node = nodes.pop() if len(nodes) == 1 else ""
        if len(present) < expected:
            out[key] = PoolTruth(
                driver, name, highest[key], False, node or None, None, None, None, None, None,
                f"PoolIncomplete: pool {driver}/{name} is incomplete: observed "
                f"{len(present)}/{expected} slices at generation {highest[key]}",
            )  # fmt: skip
            continue
        devices = [d for s in present for d in reading.devices(s)]
        unavailable = sum(1 for d in devices if tainted(driver, name, d))
        allocated = len(in_use.get(key, ()))
        out[key] = PoolTruth(
            driver, name, highest[key], True, node or None, len(present), len(devices),
            allocated, max(0, len(devices) - allocated - unavailable), unavailable, None,
        )  # fmt: skip
    return out

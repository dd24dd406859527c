"""What the chatops answers must say about `tests.schema.world`, computed from its raw dicts
(claims' status.allocation and reservedFor, slices' counters) — never through the graph."""

from __future__ import annotations

from tests.schema import world


def _claims() -> list[tuple[str, dict]]:
    return world.objects("ResourceClaim")


def holders_of(device_keys: list[tuple]) -> list[tuple[str, str, str]]:
    """(cluster, node, namespace/claim) holding any of the device keys."""
    held = world.holders()
    return sorted(
        (k[0], world.valid_devices()[k]["_node"], f"{ns}/{claim}")
        for k in device_keys
        for ns, claim, _share in held.get(k, [])
    )


def named(device: str) -> list[tuple]:
    return [k for k in world.valid_devices() if k[3] == device]


def free_devices(class_prefix: str | None = None) -> list[tuple[str, str, str]]:
    """(cluster, node, device) of devices no claim holds whose counters are all still free.

    A partition consumes counters of its GPU's counter set; a device sharing any counter with
    a held device is blocked, not free. Classes here select on the `type` attribute."""
    devices = world.valid_devices()
    held = set(world.holders())
    used = {
        (k[0], k[1], k[2], c["counterSet"], name)
        for k in held
        for c in devices.get(k, {}).get("consumesCounters", [])
        for name in c["counters"]
    }
    out = []
    for k, d in devices.items():
        if k in held:
            continue
        mine = {
            (k[0], k[1], k[2], c["counterSet"], name)
            for c in d.get("consumesCounters", [])
            for name in c["counters"]
        }
        kind = d.get("attributes", {}).get("type", {}).get("string")
        if mine & used or (class_prefix and kind != class_prefix):
            continue
        out.append((k[0], d["_node"], k[3]))
    return sorted(out)


def pending_claims() -> list[tuple[str, str, str]]:
    """(cluster, namespace/claim, class) of claims neither allocated nor being deleted."""
    return sorted(
        (
            cluster,
            f"{c['metadata']['namespace']}/{c['metadata']['name']}",
            c["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"],
        )
        for cluster, c in _claims()
        if not c["status"].get("allocation") and not c["metadata"].get("deletionTimestamp")
    )


def idle_claims() -> list[tuple[str, str]]:
    """(cluster, namespace/claim) of allocated claims with no Running consumer pod."""
    phases = {
        (cluster, p["metadata"]["namespace"], p["metadata"]["name"]): p["status"]["phase"]
        for cluster, p in world.objects("Pod")
    }
    out = []
    for cluster, c in _claims():
        if not c["status"].get("allocation"):
            continue
        ns = c["metadata"]["namespace"]
        running = [
            r
            for r in c["status"].get("reservedFor", [])
            if phases.get((cluster, ns, r["name"])) == "Running"
        ]
        if not running:
            out.append((cluster, f"{ns}/{c['metadata']['name']}"))
    return sorted(out)

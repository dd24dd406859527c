"""findDevices through GraphQL over the mirrored simulator: "where can I get a GPU with at least
80Gi, free right now", answered over every cluster and checked against truth computed here from
the simulator's own objects (slices at their pool's newest generation, claims' allocation
results, counter arithmetic for MIG partitions); a selector that does not compile is a GraphQL
error naming the compiler's message; one that fails to evaluate on some devices lists them."""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction
from typing import Any

from tests.diagnostics_api.conftest import Mirrored

CLUSTERS = ("east", "manual", "west")
BIG = (
    "device.driver == 'gpu.nvidia.com' && "
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0"
)
FIND = """query Find($selector: String!, $status: DeviceStatus, $cluster: String, $after: String) {
  findDevices(selector: $selector, status: $status, cluster: $cluster, first: 500, after: $after) {
    totalCount pageInfo { hasNextPage endCursor }
    edges { node { cluster driver pool name status node { name } } }
    evaluationErrorCount evaluationErrors { cluster driver pool device message }
  }
}"""
_SUFFIX = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6, "G": 10**9}


def quantity(text: str) -> Fraction:
    for suffix, factor in _SUFFIX.items():
        if text.endswith(suffix):
            return Fraction(text[: -len(suffix)]) * factor
    return Fraction(text)


def _plain(key: str, driver: str) -> str | None:
    """An attribute/capacity key of the driver's domain, without the domain."""
    if "/" not in key:
        return key
    domain, _, name = key.rpartition("/")
    return name if domain == driver else None


def devices_of(m: Mirrored, cluster: str) -> list[dict[str, Any]]:
    """Every device of the newest generation of each pool, with its pool's counter sets."""
    slices = m.raw(cluster, "resourceslices")
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        pool = (s["spec"]["driver"], s["spec"]["pool"]["name"])
        newest[pool] = max(newest.get(pool, 0), s["spec"]["pool"]["generation"])
    counters: dict[tuple[str, str, str], dict[str, Fraction]] = {}
    out = []
    for s in slices:
        spec = s["spec"]
        pool = (spec["driver"], spec["pool"]["name"])
        if spec["pool"]["generation"] != newest[pool]:
            continue
        for cs in spec.get("sharedCounters", []):
            counters[(*pool, cs["name"])] = {
                k: quantity(v["value"]) for k, v in cs["counters"].items()
            }
        for d in spec.get("devices", []):
            out.append({"cluster": cluster, "driver": pool[0], "pool": pool[1], "raw": d})
    for d in out:
        d["sets"] = counters
    return out


def truth(m: Mirrored, *, free_only: bool) -> tuple[set[tuple[str, ...]], set[tuple[str, ...]]]:
    """(devices the BIG selector accepts, devices it fails on), free ones only if asked."""
    accepted: set[tuple[str, ...]] = set()
    failing: set[tuple[str, ...]] = set()
    for cluster in CLUSTERS:
        devices = devices_of(m, cluster)
        allocated = {
            (r["driver"], r["pool"], r["device"])
            for c in m.raw(cluster, "resourceclaims")
            for r in ((c.get("status") or {}).get("allocation") or {})
            .get("devices", {})
            .get("results", [])
        }
        used: dict[tuple[str, str, str], dict[str, Fraction]] = defaultdict(dict)
        for d in devices:
            if (d["driver"], d["pool"], d["raw"]["name"]) in allocated:
                for c in d["raw"].get("consumesCounters", []):
                    bucket = used[(d["driver"], d["pool"], c["counterSet"])]
                    for k, v in c["counters"].items():
                        bucket[k] = bucket.get(k, Fraction(0)) + quantity(v["value"])
        for d in devices:
            ref = (cluster, d["driver"], d["pool"], d["raw"]["name"])
            if d["driver"] != "gpu.nvidia.com":
                continue  # the first clause is false: `&&` absorbs the rest
            memory = [
                v["value"]
                for k, v in d["raw"].get("capacity", {}).items()
                if _plain(k, d["driver"]) == "memory"
            ]
            if not memory:
                failing.add(ref)
                continue
            if quantity(memory[0]) < 80 * 2**30:
                continue
            if free_only:
                if ref[1:] in allocated:
                    continue
                fits = all(
                    d["sets"][(d["driver"], d["pool"], c["counterSet"])][k]
                    - used[(d["driver"], d["pool"], c["counterSet"])].get(k, Fraction(0))
                    >= quantity(v["value"])
                    for c in d["raw"].get("consumesCounters", [])
                    for k, v in c["counters"].items()
                )
                if not fits:
                    continue
            accepted.add(ref)
    return accepted, failing


def refs(found: dict[str, Any]) -> set[tuple[str, ...]]:
    return {
        (e["node"]["cluster"], e["node"]["driver"], e["node"]["pool"], e["node"]["name"])
        for e in found["edges"]
    }


async def test_big_gpus_over_every_cluster(mirrored: Mirrored) -> None:
    found = (await mirrored.data(FIND, selector=BIG))["findDevices"]
    expected, failing = truth(mirrored, free_only=False)
    assert not found["pageInfo"]["hasNextPage"]
    assert refs(found) == expected and found["totalCount"] == len(expected)
    # A100 80Gi passes (exactly 80Gi), H100 81559Mi does not (79.6Gi); H200s in east and west.
    assert {r[0] for r in expected} == {"east", "west", "manual"}
    assert ("manual", "gpu.nvidia.com", "h100-0", "gpu-0") not in expected
    assert ("manual", "gpu.nvidia.com", "a100-0", "gpu-0") in expected
    assert found["evaluationErrorCount"] == len(failing)


async def test_big_gpus_free_right_now(mirrored: Mirrored) -> None:
    found = (await mirrored.data(FIND, selector=BIG, status="FREE"))["findDevices"]
    expected, _ = truth(mirrored, free_only=True)
    everything, _ = truth(mirrored, free_only=False)
    assert refs(found) == expected
    assert 0 < len(expected) < len(everything)  # some are held or blocked
    assert {e["node"]["status"] for e in found["edges"]} == {"FREE"}


async def test_one_cluster_and_paging(mirrored: Mirrored) -> None:
    expected = {r for r in truth(mirrored, free_only=False)[0] if r[0] == "east"}
    seen: list[tuple[str, ...]] = []
    after = None
    while True:
        page = await mirrored.data(
            FIND.replace("first: 500", "first: 7"), selector=BIG, cluster="east", after=after
        )
        found = page["findDevices"]
        assert found["totalCount"] == len(expected)
        seen += sorted(refs(found))
        if not found["pageInfo"]["hasNextPage"]:
            break
        after = found["pageInfo"]["endCursor"]
    assert len(seen) == len(set(seen)) and set(seen) == expected


async def test_a_selector_that_does_not_compile_is_an_error(mirrored: Mirrored) -> None:
    body = await mirrored.query(FIND, selector="device.driver == ")
    assert body["data"] is None
    [error] = body["errors"]
    assert error["extensions"]["code"] == "BAD_SELECTOR"
    assert error["message"].startswith("selector does not compile: ")
    body = await mirrored.query(FIND, selector="device.attributes['gpu.nvidia.com'].cores + 1")
    assert "must evaluate to bool" in body["errors"][0]["message"]
    # the compiler repeats the offending line: a long selector is not echoed back whole
    for selector in ("device.driver == " + "'x" * 4_000, "device.driver === 'a'" + " " * 9_000):
        [error] = (await mirrored.query(FIND, selector=selector))["errors"]
        assert error["extensions"]["code"] == "BAD_SELECTOR"
        assert len(error["message"]) < 2_000
    # beyond the API's 10 Ki limit of a selector expression: refused before compiling
    [error] = (await mirrored.query(FIND, selector="device.driver == 'a'" + " " * 90_000))["errors"]
    assert error["extensions"]["code"] == "BAD_SELECTOR"
    assert "at most 10240" in error["message"] and len(error["message"]) < 2_000


async def test_evaluation_errors_are_listed_not_hidden(mirrored: Mirrored) -> None:
    # Without the driver clause, every device lacking productName fails (NICs, MIG devices).
    selector = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'"
    found = (await mirrored.data(FIND, selector=selector))["findDevices"]
    lacking = {
        (d["cluster"], d["driver"], d["pool"], d["raw"]["name"])
        for cluster in CLUSTERS
        for d in devices_of(mirrored, cluster)
        if not any(
            _plain(k, "gpu.nvidia.com") == "productName" for k in d["raw"].get("attributes", {})
        )
        or d["driver"] != "gpu.nvidia.com"
    }
    assert found["evaluationErrorCount"] == len(lacking) > 0
    shown = found["evaluationErrors"]
    assert len(shown) == min(20, len(lacking))
    assert {(e["cluster"], e["driver"], e["pool"], e["device"]) for e in shown} <= lacking
    assert all("productName" in e["message"] for e in shown)


def numa_nodes(raw: dict[str, Any]) -> list[int] | None:
    """resource.kubernetes.io/numaNode as published: an int, or an `ints` list (KEP-6072)."""
    value = raw.get("attributes", {}).get("resource.kubernetes.io/numaNode")
    if value is None:
        return None
    return [value["int"]] if "int" in value else list(value["ints"])


async def test_gpus_of_one_numa_node_whatever_form_the_driver_publishes(mirrored: Mirrored) -> None:
    selector = "device.attributes['resource.kubernetes.io'].numaNode.includes(1)"
    guarded = f"'numaNode' in device.attributes['resource.kubernetes.io'] && {selector}"
    found = (await mirrored.data(FIND, selector=guarded))["findDevices"]
    expected = {
        (cluster, d["driver"], d["pool"], d["raw"]["name"])
        for cluster in CLUSTERS
        for d in devices_of(mirrored, cluster)
        if 1 in (numa_nodes(d["raw"]) or [])
    }
    assert refs(found) == expected and found["evaluationErrorCount"] == 0
    assert {r[1] for r in expected} == {"gpu.nvidia.com"}  # GPUs 4-7 and their MIG devices

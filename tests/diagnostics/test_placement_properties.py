"""Properties of the allocator over random worlds (Hypothesis): whatever sequence of claims
arrives and leaves, every allocation it writes is one kube-scheduler could write — devices
match, one node, no exclusive device twice, shares within capacity, partitions within their
counters — and whatever it refuses really does not fit (checked by brute force on small
worlds)."""

from __future__ import annotations

import itertools
from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_mirror.service.diagnostics.placement import Ledger, allocate
from dra_mirror.service.model.holdings import Holdings
from dra_mirror.service.model.records import Allocation, Capacity, ClaimRecord, DeviceEntry, key_of
from tests.diagnostics.builders import (
    CLASSES,
    NIC,
    attrs,
    claim,
    entry,
    gpu,
    h200_mig,
    request,
)

PROFILES = ["1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"]


def world(nodes: int, gpus: int, mig_nodes: int):
    devices: list[DeviceEntry] = []
    slices = []
    for n in range(nodes):
        name = f"n{n}"
        if n < mig_nodes:
            mig, counters = h200_mig(name, 0)
            devices += mig
            slices.append(counters)
        devices += [gpu(i + 1, name) for i in range(gpus)]
        devices.append(
            entry(
                "eth0",
                node=name,
                driver=NIC,
                shareable=True,
                attributes=attrs(NIC, interfaceName="eth0"),
                capacity={
                    f"{NIC}/bandwidth": Capacity(
                        "10G", {"default": "1G", "validValues": ["1G", "2G", "5G"]}
                    )
                },
            )
        )
    return devices, slices


asks = st.one_of(
    st.tuples(st.just("gpu"), st.integers(1, 3)),
    st.tuples(st.just("mig"), st.sampled_from(PROFILES)),
    st.tuples(st.just("nic"), st.sampled_from(["1G", "2G", "3G", "5G"])),
)


def make_claim(i: int, ask: tuple) -> ClaimRecord:
    kind, arg = ask
    if kind == "gpu":
        return claim(f"c{i}", request(count=arg))
    if kind == "mig":
        selector = f"device.attributes['gpu.nvidia.com'].profile == '{arg}'"
        return claim(f"c{i}", request("mig", "mig.nvidia.com", selectors=(selector,)))
    return claim(f"c{i}", request("nic", "network-interface", capacity={f"{NIC}/bandwidth": arg}))


def check_ledger(ledger: Ledger, devices: list[DeviceEntry]) -> None:
    for e in devices:
        if e.device.shareable:
            assert all(v >= 0 for v in ledger.remaining_capacity(e).values())
    from dra_mirror.service.diagnostics.ledger import CounterSetKey

    for e in devices:
        for consumption in e.device.consumes_counters:
            key = CounterSetKey(e.key.cluster, e.key.driver, e.key.pool, consumption.counter_set)
            free = ledger.counters_free(key)
            assert free is not None and all(v >= 0 for v in free.values()), (key, free)


def check_allocation(c: ClaimRecord, allocation: Allocation, ledger: Ledger, by_key) -> None:
    nodes = {by_key[(r.driver, r.pool, r.device)].node for r in allocation.results}
    nodes.discard(None)
    assert len(nodes) <= 1
    assert allocation.node_name == (nodes.pop() if nodes else None)
    for r in allocation.results:
        e = by_key[(r.driver, r.pool, r.device)]
        if not e.device.shareable:
            assert not ledger.taken(e.key) and not ledger.holders(e.key)
    [req] = c.requests
    if req.device_class_name == "gpu.nvidia.com":
        assert len(allocation.results) == req.count


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.integers(1, 3),
    gpus=st.integers(0, 3),
    mig_nodes=st.integers(0, 2),
    steps=st.lists(st.tuples(asks, st.booleans()), min_size=1, max_size=14),
)
def test_allocations_are_always_valid(nodes, gpus, mig_nodes, steps) -> None:
    devices, slices = world(nodes, gpus, min(mig_nodes, nodes))
    by_key = {(e.key.driver, e.key.pool, e.key.device): e for e in devices}
    ledger = Ledger(Holdings.build(devices, [], slices=slices))
    live: list[ClaimRecord] = []
    counter = itertools.count()
    for ask, release_one in steps:
        c = make_claim(next(counter), ask)
        result = allocate(c, classes=CLASSES, devices=devices, ledger=ledger, share_id=lambda: "s")
        if isinstance(result, Allocation):
            check_allocation(c, result, ledger, by_key)
            ledger.commit(key_of(c), result)
            live.append(c)
            check_ledger(ledger, devices)
        else:
            # Refused: no single node has enough free matching devices — verify by brute force.
            assert not _fits_somewhere(c, devices, ledger)
        if release_one and live:
            ledger.release(key_of(live.pop(0)))
            check_ledger(ledger, devices)


def _fits_somewhere(c: ClaimRecord, devices: list[DeviceEntry], ledger: Ledger) -> bool:
    [req] = c.requests
    for node in {e.node for e in devices}:
        here = [e for e in devices if e.node == node]
        if req.device_class_name == "gpu.nvidia.com":
            free = [
                e
                for e in here
                if _attribute(e, "type") == "gpu"
                and not ledger.holders(e.key)
                and _counters_fit(e, ledger)
            ]
            if len(free) >= req.count:
                return True
        elif req.device_class_name == "mig.nvidia.com":
            profile = req.selectors[0].split("'")[-2]
            for e in here:
                if _attribute(e, "profile") == profile:
                    if not ledger.holders(e.key) and _counters_fit(e, ledger):
                        return True
        else:
            want = {"1G": 1, "2G": 2, "3G": 5, "5G": 5}[req.capacity[f"{NIC}/bandwidth"]]
            for e in here:
                if e.device.shareable:
                    left = ledger.remaining_capacity(e)[f"{NIC}/bandwidth"]
                    if left >= Fraction(want * 10**9):
                        return True
    return False


def _attribute(e: DeviceEntry, name: str) -> object:
    found = e.device.attributes.get(f"gpu.nvidia.com/{name}")
    return found.value if found is not None else None


def _counters_fit(e: DeviceEntry, ledger: Ledger) -> bool:
    from dra_mirror.service.diagnostics.ledger import CounterSetKey

    for consumption in e.device.consumes_counters:
        free = ledger.counters_free(
            CounterSetKey(e.key.cluster, e.key.driver, e.key.pool, consumption.counter_set)
        )
        if free is None or any(
            Fraction(v) > free.get(k, 0) for k, v in consumption.counters.items()
        ):
            return False
    return True

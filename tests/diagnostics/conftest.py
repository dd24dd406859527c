"""Fixtures of the diagnostics tests: the simulator's `demo` world as the mirror sees it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from dra_mirror.service.diagnostics.explain import explain_claim
from dra_mirror.service.diagnostics.ledger import Ledger
from dra_mirror.service.model.holdings import Holdings
from dra_mirror.service.model.index import ClusterIndex, Event
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    NODE,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    ClaimRecord,
    DeviceClassRecord,
    DeviceEntry,
    NodeRecord,
    ObjectKey,
    PodRecord,
    key_of,
)
from dra_mirror.service.sim.scenario import build_world, load_scenario
from dra_mirror.service.sim.store import ClusterStore

PLURALS = {
    "deviceclasses": DEVICE_CLASS,
    "resourceslices": RESOURCE_SLICE,
    "resourceclaims": RESOURCE_CLAIM,
    "pods": POD,
    "nodes": NODE,
}


@dataclass
class Cluster:
    classes: dict[str, DeviceClassRecord]
    devices: list[DeviceEntry]
    claims: dict[ObjectKey, ClaimRecord]
    pods: list[PodRecord]
    nodes: list[NodeRecord]
    ledger: Ledger

    def explain(self, claim: ClaimRecord, **kw):
        return explain_claim(
            claim,
            classes=self.classes,
            devices=self.devices,
            ledger=self.ledger,
            claims=self.claims,
            pods=self.pods,
            nodes=self.nodes,
            **kw,
        )

    def claim(self, namespace: str, prefix: str) -> ClaimRecord:
        [found] = [
            c
            for k, c in self.claims.items()
            if k.namespace == namespace and k.name.startswith(prefix)
        ]
        return found


def mirror(store: ClusterStore) -> Cluster:
    """A simulated cluster as the mirror sees it: its objects normalized and indexed."""
    index = ClusterIndex(store.name)
    for plural, kind in PLURALS.items():
        records = [normalize(kind, obj, cluster=store.name) for obj in store.list(plural)]
        index.apply([Event("ADDED", r) for r in records], at="2026-11-30T00:00:00Z")
    devices = list(index.devices())
    claims = {key_of(c): c for c in index.records(RESOURCE_CLAIM)}
    return Cluster(
        classes={c.meta.name: c for c in index.records(DEVICE_CLASS)},
        devices=devices,
        claims=claims,
        pods=list(index.records(POD)),
        nodes=list(index.records(NODE)),
        ledger=Ledger(
            Holdings.build(devices, claims.values(), slices=index.records(RESOURCE_SLICE))
        ),
    )


@pytest.fixture(scope="session")
def east() -> Cluster:
    """Cluster `east` of the demo scenario, normalized and indexed by the model."""
    return mirror(build_world(load_scenario("demo")).stores["east"])

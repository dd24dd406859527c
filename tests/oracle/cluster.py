"""A small cluster whose objects change as real clusters' do, for the stateful comparison.

`Cluster` keeps the objects an API server would serve (resource.k8s.io/v1 and core/v1 dicts;
`served(version)` renders them in the version the watcher uses) and turns each real-world
change into the watch events it causes. Its fixed catalog of devices:

* gpu.nvidia.com/n0: `gpu-0`, and `gpu-1` partitioned MIG-style: `gpu-1` consumes the whole
  counter set `gpu-1-cs`, `gpu-1-mig-a`/`-b` half each; the counters are published in their
  own slice of the pool (1.35+: a slice carries devices or sharedCounters, not both), so the
  pool has two slices;
* gpu.nvidia.com/n1: `gpu-0`, `gpu-1`, published in one or two slices;
* nic.example.com/n0: a shareable `eth0` (allowMultipleAllocations) with consumable
  `bandwidth` and `queues`, names written without their domain;
* gpu.nvidia.com/n2: `gpu-0`, which no driver ever publishes (claims may still name it).

Pods `p<i>` use claim `c<i % 3>` of their namespace; pods may join the PodGroup `trainers`,
whose object (sharing claim `c0`) may exist or not while claims are reserved for it.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

from tests.oracle import objects as o

Raw = dict[str, Any]
Key = tuple[str, str, str]  # (kind, namespace, name)
GPU, NIC = "gpu.nvidia.com", "nic.example.com"
NAMESPACES = ("team-a", "team-b")
CLAIMS = ("c0", "c1", "c2")
PODS = ("p0", "p1", "p2", "p3")
GROUP = "trainers"
PHASES = ("Pending", "Running", "Succeeded", "Failed")
EFFECTS = ("None", "NoSchedule", "NoExecute")
KIND_ORDER = (
    "Node",
    "DeviceClass",
    "ResourceSlice",
    "ResourceClaimTemplate",
    "ResourceClaim",
    "PodGroup",
    "Pod",
    "DeviceTaintRule",
)

POOLS: dict[tuple[str, str], list[Raw]] = {
    (GPU, "n0"): [
        o.device("gpu-0", uuid="GPU-n0-0", capacity={"memory": "80Gi"}),
        o.device("gpu-1", uuid="GPU-n0-1", capacity={"memory": "80Gi"}, consumes={"gpu-1-cs": {"memory": "8", "sm": "4"}}),
        o.device("gpu-1-mig-a", uuid="MIG-n0-1a", capacity={"memory": "40Gi"}, consumes={"gpu-1-cs": {"memory": "4", "sm": "2"}}, groups=["mig"]),
        o.device("gpu-1-mig-b", uuid="MIG-n0-1b", capacity={"memory": "40Gi"}, consumes={"gpu-1-cs": {"memory": "4", "sm": "2"}}, groups=["mig"]),
    ],
    (GPU, "n1"): [o.device("gpu-0", uuid="GPU-n1-0"), o.device("gpu-1", uuid="GPU-n1-1")],
    (NIC, "n0"): [o.device("eth0", capacity={"bandwidth": "10G", "queues": "8"}, shareable=True)],
}  # fmt: skip
COUNTERS = {(GPU, "n0"): {"gpu-1-cs": {"memory": "8", "sm": "4"}}}
UNPUBLISHED = [(GPU, "n2", "gpu-0")]
DEVICES = [(d, p, dev["name"]) for (d, p), devs in POOLS.items() for dev in devs] + UNPUBLISHED


def derived_of(claim: str) -> dict[str, str] | None:
    """Claim `c1` asks for a derived attribute (KEP-6080): its spec is immutable, so every
    write of it carries the same one."""
    return {"numa": 'device.attributes["gpu.nvidia.com"].type'} if claim == "c1" else None


def pod_claim(pod: str) -> str:
    return CLAIMS[int(pod[1:]) % len(CLAIMS)]


class Cluster:
    def __init__(self, tag: str = "") -> None:
        self.tag = tag  # makes the uuids of this cluster's hardware its own
        self.objects: dict[Key, Raw] = {}
        self.generations: dict[tuple[str, str], int] = {}
        self.layouts: dict[tuple[str, str], int] = {}  # slices per generation, as last published
        self._rv = itertools.count(1)
        self._uid = itertools.count(1)
        self._share = itertools.count(1)
        self.write(o.node("n0"))
        self.write(o.node("n1"))
        self.write(o.device_class("gpu", GPU))
        self.write(o.device_class("nic", NIC))

    # --- the store ----------------------------------------------------------------------------

    @staticmethod
    def key(obj: Raw) -> Key:
        m = obj["metadata"]
        return (obj["kind"], m.get("namespace") or "", m["name"])

    def write(self, obj: Raw) -> tuple[str, Raw]:
        """Create or update `obj`: a new resourceVersion, the watch event it causes."""
        obj = copy.deepcopy(obj)
        key = self.key(obj)
        old = self.objects.get(key)
        if old is not None:
            obj["metadata"]["uid"] = old["metadata"]["uid"]
        obj["metadata"]["resourceVersion"] = str(next(self._rv))
        self.objects[key] = obj
        return ("ADDED" if old is None else "MODIFIED", obj)

    def remove(self, key: Key) -> list[tuple[str, Raw]]:
        old = self.objects.pop(key, None)
        if old is None:
            return []
        gone = copy.deepcopy(old)
        gone["metadata"]["resourceVersion"] = str(next(self._rv))
        return [("DELETED", gone)]

    def get(self, kind: str, namespace: str, name: str) -> Raw | None:
        return self.objects.get((kind, namespace, name))

    def of_kind(self, kind: str) -> list[Raw]:
        return [obj for (k, _, _), obj in sorted(self.objects.items()) if k == kind]

    def uid(self, prefix: str) -> str:
        return f"{prefix}-{next(self._uid)}"

    # --- drivers ------------------------------------------------------------------------------

    def publish(
        self, pool: tuple[str, str], *, bump: bool, split: bool, partial: bool,
        keep: frozenset[str] | None, taint: tuple[str, str] | None,
    ) -> list[tuple[str, Raw]]:  # fmt: skip
        """The driver (re)publishes a pool: a new generation when `bump`; device slices in two
        parts when `split`; `partial` writes only the first slice of the generation (the rest
        is still being published); `keep` limits the devices; `taint` = (device, effect)."""
        driver, name = pool
        devices = [copy.deepcopy(d) for d in POOLS[pool] if keep is None or d["name"] in keep]
        for d in devices:
            if "uuid" in d["attributes"] and self.tag:
                d["attributes"]["uuid"]["string"] += f"-{self.tag}"
            if taint and d["name"] == taint[0]:
                d["taints"] = [{"key": f"{driver}/xid", "value": "79", "effect": taint[1]}]
        parts = [devices[: len(devices) // 2], devices[len(devices) // 2 :]] if split else [devices]
        slices = [(f"{name}-{driver}-{i}", part, None) for i, part in enumerate(parts)]
        if pool in COUNTERS:
            slices.insert(0, (f"{name}-{driver}-counters", [], COUNTERS[pool]))
        # "Whenever a driver changes something about one or more of the resources in a pool, it
        # must change the generation in all ResourceSlices which are part of that pool": a
        # driver may republish the same layout under the same generation, never another one.
        if self.layouts.get(pool) != len(slices):
            bump = True
        self.layouts[pool] = len(slices)
        generation = self.generations.get(pool, 0) + (1 if bump else 0)
        self.generations[pool] = generation
        events = []
        for i, (slice_name, part, counters) in enumerate(slices):
            if partial and i > 0:
                break
            obj = o.slice_(slice_name, driver, name, part, generation=generation, count=len(slices),
                           node_name=name, counters=counters)  # fmt: skip
            obj["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": f"uid--{name}", "controller": True}]  # fmt: skip
            events.append(self.write(obj))
        wanted = {n for n, _, _ in slices}
        for s in self.of_kind("ResourceSlice"):
            same_pool = (s["spec"]["driver"], s["spec"]["pool"]["name"]) == pool
            if same_pool and s["metadata"]["name"] not in wanted:
                events += self.remove(self.key(s))
        return events

    def withdraw(self, pool: tuple[str, str]) -> list[tuple[str, Raw]]:
        """The driver is uninstalled or its node removed: every slice of the pool goes."""
        events = []
        for s in self.of_kind("ResourceSlice"):
            if (s["spec"]["driver"], s["spec"]["pool"]["name"]) == pool:
                events += self.remove(self.key(s))
        return events

    def taint_rule(
        self, device: tuple[str, str, str], effect: str | None, narrow: str | None = None
    ) -> list[tuple[str, Raw]]:
        """An admin taints a device through a DeviceTaintRule (None: removes the rule);
        `narrow` adds what 1.33/1.34 serve: a DeviceClass ("gpu", or one that does not exist)
        or a CEL selector, on the device's driver and pool (so it may select every device of
        the pool, or none)."""
        name = "-".join(device).replace(".", "-").replace("/", "-")
        if effect is None:
            return self.remove(("DeviceTaintRule", "", name))
        driver, pool, dev = device
        if narrow is None:
            return [self.write(o.taint_rule(name, "example.com/maintenance", effect, driver=driver, pool=pool, device_name=dev))]  # fmt: skip
        by = {"class": {"device_class_name": "gpu"}, "absent-class": {"device_class_name": "absent"},
              "cel": {"cel": (f'device.attributes["{driver}"].type == "gpu"',)}}[narrow]  # fmt: skip
        return [self.write(o.taint_rule(name, "example.com/maintenance", effect, driver=driver, pool=pool, **by))]  # fmt: skip

    # --- workloads ----------------------------------------------------------------------------

    def create_claim(self, ns: str, name: str, *, admin: bool) -> list[tuple[str, Raw]]:
        if self.get("ResourceClaim", ns, name) is not None:
            return []
        return [self.write(o.claim(name, ns, uid=self.uid(f"claim-{name}"), admin=admin,
                                   derived=derived_of(name)))]  # fmt: skip

    def allocate(
        self, ns: str, name: str, devices: list[tuple[str, str, str]], *, qualified: bool
    ) -> list[tuple[str, Raw]]:
        """The scheduler allocates a pending claim (to any device it names, published or not:
        a claim may be listed before the slices, or outlive them)."""
        claim = self.get("ResourceClaim", ns, name)
        if claim is None or "status" in claim or claim["metadata"].get("deletionTimestamp"):
            return []
        admin = bool(claim["spec"]["devices"]["requests"][0]["exactly"].get("adminAccess"))
        results = []
        for driver, pool, dev in devices:
            share = consumed = None
            if driver == NIC:  # shareable: a shareID per allocation, every capacity consumed
                share = f"00000000-0000-4000-8000-{next(self._share):012d}"
                prefix = f"{NIC}/" if qualified else ""
                consumed = {f"{prefix}bandwidth": "2G", f"{prefix}queues": "1"}
            results.append(
                o.result("gpu", driver, pool, dev, share_id=share, consumed=consumed, admin=admin)
            )
        new = o.claim(name, ns, uid=claim["metadata"]["uid"], results=results, node_name=devices[0][1], admin=admin, derived=derived_of(name))  # fmt: skip
        return [self.write(new)]

    def reserve(self, ns: str, name: str, consumer: str) -> list[tuple[str, Raw]]:
        """The scheduler reserves an allocated claim for a pod that uses it, or for the group."""
        claim = self.get("ResourceClaim", ns, name)
        if claim is None or "allocation" not in claim.get("status", {}):
            return []
        status = claim["status"]
        if consumer == GROUP:
            ref = {
                "apiGroup": "scheduling.k8s.io",
                "resource": "podgroups",
                "name": GROUP,
                "uid": "uid-pg",
            }
        else:
            pod = self.get("Pod", ns, consumer)
            if pod is None or pod_claim(consumer) != name:
                return []
            ref = {"resource": "pods", "name": consumer, "uid": pod["metadata"]["uid"]}
        if ref in status.get("reservedFor", []):
            return []
        new = copy.deepcopy(claim)
        new["status"]["reservedFor"] = [*status.get("reservedFor", []), ref]
        return [self.write(new)]

    def release(self, ns: str, name: str, *, deallocate: bool) -> list[tuple[str, Raw]]:
        """The pods are done: reservedFor emptied; `deallocate` also clears the allocation
        (kube-controller-manager does so for claims with the delete-protection finalizer)."""
        claim = self.get("ResourceClaim", ns, name)
        if claim is None or "status" not in claim:
            return []
        new = copy.deepcopy(claim)
        new["status"].pop("reservedFor", None)
        if deallocate:
            new.pop("status")
            new["metadata"].pop("finalizers", None)
        return [self.write(new)]

    def delete_claim(self, ns: str, name: str) -> list[tuple[str, Raw]]:
        """kubectl delete: a claim with finalizers gets a deletionTimestamp first."""
        claim = self.get("ResourceClaim", ns, name)
        if claim is None:
            return []
        if claim["metadata"].get("finalizers") and not claim["metadata"].get("deletionTimestamp"):
            new = copy.deepcopy(claim)
            new["metadata"]["deletionTimestamp"] = "2026-05-01T12:00:00Z"
            return [self.write(new)]
        return self.remove(self.key(claim))

    def create_pod(self, ns: str, name: str, *, in_group: bool) -> list[tuple[str, Raw]]:
        if self.get("Pod", ns, name) is not None:
            return []
        pod = o.pod(name, ns, uid=self.uid(f"pod-{name}"), claims=[pod_claim(name)], node_name="n0",
                    podgroup=GROUP if in_group else None)  # fmt: skip
        return [self.write(pod)]

    def create_group(self, ns: str) -> list[tuple[str, Raw]]:
        """A workload controller creates the PodGroup, sharing `c0` among its pods."""
        if self.get("PodGroup", ns, GROUP) is not None:
            return []
        return [self.write(o.pod_group(GROUP, ns, uid=self.uid("pg"), claim=CLAIMS[0]))]

    def delete_group(self, ns: str) -> list[tuple[str, Raw]]:
        return self.remove(("PodGroup", ns, GROUP))

    def set_phase(self, ns: str, name: str, phase: str) -> list[tuple[str, Raw]]:
        pod = self.get("Pod", ns, name)
        if pod is None or pod["status"]["phase"] == phase:
            return []
        new = copy.deepcopy(pod)
        new["status"]["phase"] = phase
        return [self.write(new)]

    def delete_pod(self, ns: str, name: str) -> list[tuple[str, Raw]]:
        return self.remove(("Pod", ns, name))

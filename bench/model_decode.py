"""Bench: decode + index 40,000 pods, 40,000 claims and 5,000 slices (40,000 devices).

The objects are generated in-process as LIST pages of JSON bytes (500 objects a page, like the
watcher's paged LIST), shaped like real API output (managedFields, labels, status, 8 GPUs of
~12 attributes per slice). Printed, next to a floor measured in the same run on the same bytes:

* floor: msgspec-decoding every page into minimal Structs (items' name/namespace/rv only);
* for scale, the same pages decoded untyped into dicts and kept (what a dict-based mirror does);
* decode: `decode_list` into records (typed wire Structs, then records);
* index: `ClusterIndex.resync` of every kind (reverse maps, pools, holds, transitions);
* store: `MemoryStore.apply` of the resulting Changes (the index folded is the one the store
  serves: applying only publishes the batches' live events).

Run: `.venv/bin/python bench/model_decode.py [--scale 1.0]`. Speed belongs here, not in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time

import msgspec
import orjson

from dra_mirror.service.model.decode import decode_list
from dra_mirror.service.stores.memory import MemoryStore

CLUSTER = "bench"
DRIVER = "gpu.nvidia.com"
PAGE = 500
MANAGED = [
    {
        "manager": "kubelet",
        "operation": "Update",
        "apiVersion": "v1",
        "time": "2026-11-01T00:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:status": {"f:conditions": {".": {}, 'k:{"type":"Ready"}': {}}}},
    },
]


def _meta(name: str, namespace: str | None, rv: int, **extra: object) -> dict:
    meta = {
        "name": name,
        "uid": f"uid-{name}",
        "resourceVersion": str(rv),
        "creationTimestamp": "2026-11-01T00:00:00Z",
        "managedFields": MANAGED,
        "labels": {"app": name.rsplit("-", 1)[0], "team": "ml"},
        **extra,
    }
    if namespace:
        meta["namespace"] = namespace
    return meta


def slices(nodes: int) -> list[dict]:
    out = []
    for n in range(nodes):
        node = f"node-{n:05d}"
        devices = []
        for g in range(8):
            devices.append(
                {
                    "name": f"gpu-{g}",
                    "attributes": {
                        "uuid": {"string": f"GPU-{n:05d}-{g}"},
                        "productName": {"string": "NVIDIA H200"},
                        "index": {"int": g},
                        "minor": {"int": g},
                        "architecture": {"string": "Hopper"},
                        "brand": {"string": "Nvidia"},
                        "cudaComputeCapability": {"version": "9.0.0"},
                        "driverVersion": {"version": "570.124.6"},
                        "cudaDriverVersion": {"version": "12.8.0"},
                        "pcieBusID": {"string": f"0000:{g:02x}:00.0"},
                        "type": {"string": "gpu"},
                        "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{g:02x}"},
                    },
                    "capacity": {"memory": {"value": "143771Mi"}},
                }
            )
        out.append(
            {
                "metadata": _meta(
                    f"{node}-gpu.nvidia.com-x{n}",
                    None,
                    n + 1,
                    ownerReferences=[
                        {
                            "apiVersion": "v1",
                            "kind": "Node",
                            "name": node,
                            "uid": f"uid-{node}",
                            "controller": True,
                        }
                    ],
                ),
                "spec": {
                    "driver": DRIVER,
                    "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": devices,
                },
            }
        )
    return out


def claims_and_pods(nodes: int) -> tuple[list[dict], list[dict]]:
    claims, pods = [], []
    for n in range(nodes):
        node = f"node-{n:05d}"
        for g in range(8):
            i = n * 8 + g
            pod_name, ns = f"train-{i:06d}", f"team-{i % 50}"
            claim_name = f"{pod_name}-gpu-ab{i % 997:03d}"
            claims.append(
                {
                    "metadata": _meta(
                        claim_name,
                        ns,
                        10**6 + i,
                        annotations={"resource.kubernetes.io/pod-claim-name": "gpu"},
                        ownerReferences=[
                            {
                                "apiVersion": "v1",
                                "kind": "Pod",
                                "name": pod_name,
                                "uid": f"uid-{pod_name}",
                                "controller": True,
                            }
                        ],
                        finalizers=["resource.kubernetes.io/delete-protection"],
                    ),
                    "spec": {
                        "devices": {
                            "requests": [
                                {
                                    "name": "gpu",
                                    "exactly": {
                                        "deviceClassName": "gpu.nvidia.com",
                                        "allocationMode": "ExactCount",
                                        "count": 1,
                                    },
                                }
                            ]
                        }
                    },
                    "status": {
                        "allocation": {
                            "devices": {
                                "results": [
                                    {
                                        "request": "gpu",
                                        "driver": DRIVER,
                                        "pool": node,
                                        "device": f"gpu-{g}",
                                    }
                                ]
                            },
                            "nodeSelector": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchFields": [
                                            {
                                                "key": "metadata.name",
                                                "operator": "In",
                                                "values": [node],
                                            }
                                        ]
                                    }
                                ]
                            },
                        },
                        "reservedFor": [
                            {"resource": "pods", "name": pod_name, "uid": f"uid-{pod_name}"}
                        ],
                    },
                }
            )
            pods.append(
                {
                    "metadata": _meta(pod_name, ns, 2 * 10**6 + i),
                    "spec": {
                        "nodeName": node,
                        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                        "containers": [
                            {
                                "name": "trainer",
                                "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                                "command": ["python", "train.py"],
                                "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
                                "resources": {
                                    "requests": {"cpu": "8", "memory": "64Gi"},
                                    "limits": {"memory": "64Gi"},
                                    "claims": [{"name": "gpu"}],
                                },
                            }
                        ],
                    },
                    "status": {
                        "phase": "Running",
                        "startTime": "2026-11-01T00:00:05Z",
                        "podIP": "10.0.0.1",
                        "conditions": [
                            {"type": "Ready", "status": "True"},
                            {"type": "PodScheduled", "status": "True"},
                        ],
                        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim_name}],
                    },
                }
            )
    return claims, pods


def pages(kind: str, items: list[dict]) -> list[bytes]:
    return [
        orjson.dumps(
            {
                "kind": f"{kind}List",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": "1", "continue": "x"},
                "items": items[i : i + PAGE],
            }
        )
        for i in range(0, len(items), PAGE)
    ]


class _FloorMeta(msgspec.Struct):
    name: str = ""
    namespace: str = ""
    resourceVersion: str = ""


class _FloorItem(msgspec.Struct):
    metadata: _FloorMeta


class _FloorList(msgspec.Struct):
    items: list[_FloorItem]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="1.0 = 5,000 nodes")
    parser.add_argument(
        "--gc-threshold",
        type=int,
        default=0,
        help="first-generation GC threshold (0: Python's default 700); a service holding a large "
        "index should raise it, e.g. 50000, so that full collections do not dominate sync",
    )
    args = parser.parse_args()
    if args.gc_threshold:
        gc.set_threshold(args.gc_threshold, 20, 10)
    nodes = int(5000 * args.scale)
    claims, pods = claims_and_pods(nodes)
    bodies = {
        "ResourceSlice": pages("ResourceSlice", slices(nodes)),
        "ResourceClaim": pages("ResourceClaim", claims),
        "Pod": pages("Pod", pods),
    }
    del claims, pods
    total = sum(len(b) for kind in bodies.values() for b in kind)
    objects = nodes + 2 * nodes * 8
    print(f"gc thresholds {gc.get_threshold()}; times are CPU seconds of this process")
    print(
        f"{objects:,} objects ({nodes:,} slices, {nodes * 8:,} claims, {nodes * 8:,} pods), {total / 1e6:.0f} MB of JSON"
    )

    floor_decoder = msgspec.json.Decoder(_FloorList)
    gc.collect()
    start = time.process_time()
    count = sum(len(floor_decoder.decode(b).items) for kind in bodies.values() for b in kind)
    floor = time.process_time() - start
    assert count == objects

    # For scale: the same pages decoded untyped (dicts), kept alive as a mirror would keep them.
    gc.collect()
    start = time.process_time()
    kept = [msgspec.json.decode(b)["items"] for kind in bodies.values() for b in kind]
    untyped = time.process_time() - start
    del kept

    gc.collect()
    start = time.process_time()
    records = {
        kind: [r for b in pages_ for r in decode_list(kind, b, cluster=CLUSTER).records]
        for kind, pages_ in bodies.items()
    }
    decoded = time.process_time() - start
    assert sum(len(r) for r in records.values()) == objects

    store = MemoryStore()
    index = store.open_index(CLUSTER)
    start = time.process_time()
    all_changes = [
        index.resync(kind, records[kind], at="2026-11-01T00:00:00Z")
        for kind in ("ResourceSlice", "Pod", "ResourceClaim")
    ]
    indexed = time.process_time() - start
    transitions = sum(len(c.transitions) for c in all_changes)

    start = time.process_time()
    for changes in all_changes:
        asyncio.run(store.apply(changes))
    stored = time.process_time() - start

    def line(name: str, seconds: float) -> None:
        print(
            f"{name:<28} {seconds:7.2f} s  {objects / seconds:>10,.0f} objects/s  {seconds / floor:5.1f}x floor"
        )

    line("floor (minimal Structs)", floor)
    line("msgspec untyped, kept", untyped)
    line("decode_list -> records", decoded)
    line("ClusterIndex.resync", indexed)
    line("MemoryStore.apply", stored)
    line("decode + index", decoded + indexed)
    line("decode + index + store", decoded + indexed + stored)
    print(
        f"{transitions:,} transitions; {len(list(index.devices())):,} devices; "
        f"{sum(1 for _ in index.idle_claims()):,} idle claims"
    )


if __name__ == "__main__":
    main()

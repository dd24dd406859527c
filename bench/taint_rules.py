"""Benchmark: what a DeviceTaintRule event costs the index, by the kind of rule.

    .venv/bin/python bench/taint_rules.py [--nodes 5000] [--gpus 8] [--runs 3]

A cluster of `--nodes` node-local pools of `--gpus` devices each (half "NVIDIA H200", half
"NVIDIA A100" by node) and one DeviceClass is folded into a `ClusterIndex` as the in-memory
store opens it (not timed). Then, per run, each rule is added and deleted again, and the
class is changed once (the rules naming it are re-matched), timing CPU seconds of the
process:

* `plain`: `deviceSelector: {driver}` — every device re-derived (what 1.35+ rules cost);
* `class`: 1.33/1.34 `deviceClassName` (two CEL selectors of the class);
* `cel`: 1.33/1.34 `selectors` (one CEL selector);
* `class change`: the class's selectors changed, with the `class` rule present.

The floor, measured in the same run: one pass over the index's devices asking the rule's
driver/pool/device criteria (`taint_rules.may_select`), the pass every rule event makes.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dra_mirror.service.diagnostics.cel import rule_selector_matches  # noqa: E402
from dra_mirror.service.model.index import ADDED, DELETED, MODIFIED, ClusterIndex, Event  # noqa: E402
from dra_mirror.service.model.normalize import normalize  # noqa: E402
from dra_mirror.service.model.records import (  # noqa: E402
    DEVICE_CLASS,
    DEVICE_TAINT_RULE,
    RESOURCE_SLICE,
    Record,
)
from dra_mirror.service.model.taint_rules import may_select  # noqa: E402

CLUSTER, DRIVER = "bench", "gpu.nvidia.com"
PRODUCT = f'device.attributes["{DRIVER}"].productName'


def _meta(name: str) -> dict:
    return {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"}


def _slice(node: int, gpus: int) -> dict:
    product = "NVIDIA H200" if node % 2 else "NVIDIA A100"
    devices = [
        {"name": f"gpu-{i}", "attributes": {"productName": {"string": product},
                                             "uuid": {"string": f"GPU-{node}-{i}"}}}
        for i in range(gpus)
    ]  # fmt: skip
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": RESOURCE_SLICE,
        "metadata": _meta(f"node-{node}-gpu"),
        "spec": {"driver": DRIVER, "nodeName": f"node-{node}", "devices": devices,
                 "pool": {"name": f"node-{node}", "generation": 1, "resourceSliceCount": 1}},
    }  # fmt: skip


def _class(product: str) -> Record:
    raw = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": DEVICE_CLASS,
        "metadata": _meta("gpu.example.com"),
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}},
                               {"cel": {"expression": f'{PRODUCT} == "{product}"'}}]},
    }  # fmt: skip
    return normalize(DEVICE_CLASS, raw, cluster=CLUSTER)


def _rule(name: str, selector: dict) -> Record:
    raw = {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": DEVICE_TAINT_RULE,
        "metadata": _meta(name),
        "spec": {"deviceSelector": selector,
                 "taint": {"key": "example.com/drain", "effect": "NoExecute"}},
    }  # fmt: skip
    return normalize(DEVICE_TAINT_RULE, raw, cluster=CLUSTER)


RULES = {
    "plain": {"driver": DRIVER},
    "class": {"deviceClassName": "gpu.example.com"},
    "cel": {"selectors": [{"cel": {"expression": f'{PRODUCT} == "NVIDIA H200"'}}]},
}


def _cpu(step) -> float:
    start = time.process_time()
    step()
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    index = ClusterIndex(
        CLUSTER, link_deltas=False, transitions=False, selector_matcher=rule_selector_matches
    )
    slices = [normalize(RESOURCE_SLICE, _slice(n, args.gpus), cluster=CLUSTER) for n in range(args.nodes)]  # fmt: skip
    index.resync(DEVICE_CLASS, [_class("NVIDIA H200")], at="t0")
    index.resync(RESOURCE_SLICE, slices, at="t0")
    devices = sum(1 for _ in index.devices())
    print(f"{devices} devices in {args.nodes} pools; CPU seconds per event, median of {args.runs}")
    gc.collect()
    gc.freeze()
    figures: dict[str, list[float]] = {"floor": []}
    plain = _rule("plain", RULES["plain"])
    for run in range(args.runs):
        keys = [e.key for e in index.devices()]
        figures["floor"].append(_cpu(lambda: sum(1 for k in keys if may_select(plain, k))))  # noqa: B023
        for name, selector in RULES.items():
            rule = _rule(name, selector)
            t = f"t{run}"
            added = _cpu(lambda: index.apply([Event(ADDED, rule)], at=t))  # noqa: B023
            tainted = sum(1 for e in index.devices() if e.rule_taints)
            figures.setdefault(f"{name} ({tainted} tainted)", []).append(added)
            if name == "class":
                change = _class("NVIDIA A100" if run % 2 == 0 else "NVIDIA H200")
                changed = _cpu(lambda: index.apply([Event(MODIFIED, change)], at=t))  # noqa: B023
                figures.setdefault("class change", []).append(changed)
            index.apply([Event(DELETED, rule)], at=t)
    floor = statistics.median(figures["floor"])
    for name, values in figures.items():
        value = statistics.median(values)
        print(f"  {name:<22} {value:8.3f} s   {value / floor:6.1f}x floor")


if __name__ == "__main__":
    main()

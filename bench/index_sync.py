"""Benchmark: the reactor's index alone, folding a scenario's first LIST of every kind.

    .venv/bin/python bench/index_sync.py [--scenario scale-5000] [--runs 3]
    ... --nodes 10000                 a generated scale scenario
    ... --claims-first                list claims before pods (a sync sees either order)
    ... --history                     the index as history needs it: transitions and
                                      reverse-map deltas (the Redis store's index has both)
    ... --profile /tmp/index.prof     cProfile of the last run (pstats file)

The pages are those `bench/page_server.py` records for the scenario (made once, then cached);
they are decoded into records once (`decode_list`, not timed). Each run then folds them into a
fresh `ClusterIndex` as the in-memory store opens it for `serve` (no transitions, no link
deltas), one `resync` per kind in the order a sync of scale-5000 usually lists them, with the
garbage collector's thresholds raised as during a sync (`service.reactor.heap.SyncGc`).

Printed: the CPU seconds of each kind's resync and their sum, against a floor measured in the
same run: the same records put into one dict per kind under their keys, nothing more. The
in-process sync with its parts (fetching, decoding, both) is `bench/sync_5000.py`.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KINDS = {
    "deviceclasses": "DeviceClass",
    "resourceclaimtemplates": "ResourceClaimTemplate",
    "nodes": "Node",
    "resourceslices": "ResourceSlice",
    "pods": "Pod",
    "resourceclaims": "ResourceClaim",
}


def _records(scenario: str, limit: int) -> tuple[str, dict[str, list]]:
    sys.path.insert(0, str(REPO / "bench"))
    from page_server import COLLECTIONS, load_recording

    from dra_mirror.service.model.decode import decode_list
    from dra_mirror.service.model.sharing import SharedValues

    recording = load_recording(scenario, limit, Path(tempfile.gettempdir()) / "dra-mirror-pages")
    records: dict[str, list] = {}
    for path in COLLECTIONS:
        kind = KINDS[path.rsplit("/", 1)[1]]
        shared = SharedValues()  # as the watcher of one kind shares equal values
        records[kind] = [
            record
            for target, body in recording.bodies.items()
            if target.split("?")[0] == path
            for record in decode_list(kind, body, cluster=recording.cluster, shared=shared).records
        ]
    return recording.cluster, records


def _floor(records: dict[str, list]) -> float:
    from dra_mirror.service.model.records import key_of

    start = time.process_time()
    held = {kind: {key_of(r): r for r in listed} for kind, listed in records.items()}
    seconds = time.process_time() - start
    del held
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="scale-5000")
    parser.add_argument("--nodes", type=int)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--limit", type=int, default=500)
    parser.add_argument("--claims-first", action="store_true")
    parser.add_argument("--history", action="store_true")
    parser.add_argument("--profile")
    args = parser.parse_args()
    scenario = args.scenario
    if args.nodes:
        sys.path.insert(0, str(REPO / "bench"))
        from page_server import scale_scenario

        path = Path(tempfile.gettempdir()) / "dra-mirror-pages" / f"scale-{args.nodes}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(scale_scenario(args.nodes))
        scenario = str(path)

    from dra_mirror.service.model.index import ClusterIndex

    cluster, records = _records(scenario, args.limit)
    order = list(KINDS.values())
    if args.claims_first:
        order.remove("ResourceClaim")
        order.insert(order.index("Pod"), "ResourceClaim")
    gc.collect()
    gc.freeze()  # the decoded records are not the index's cost
    gc.set_threshold(100_000, 100, 10)  # as SyncGc during a sync
    floors, totals, by_kind = [], [], {kind: [] for kind in order}
    for run in range(args.runs):
        floors.append(_floor(records))
        index = ClusterIndex(cluster, link_deltas=args.history, transitions=args.history)
        profiler = None
        if args.profile and run == args.runs - 1:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        total = 0.0
        for kind in order:
            start = time.process_time()
            index.resync(kind, records[kind], at="2026-12-02T00:00:00Z")
            by_kind[kind].append(time.process_time() - start)
            total += by_kind[kind][-1]
        totals.append(total)
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)
        del index
        gc.collect()
    objects = sum(len(listed) for listed in records.values())
    floor, total = statistics.median(floors), statistics.median(totals)
    print(f"{args.nodes or args.scenario}: {objects:,} records, {args.runs} runs, order {order}")
    for kind in order:
        runs = " ".join(f"{s:.3f}" for s in by_kind[kind])
        print(f"  {kind:22s} {statistics.median(by_kind[kind]):.3f} CPU s ({runs})")
    print(
        f"median: index {total:.3f} CPU s ({total / objects * 1e6:.1f} us a record), floor "
        f"{floor:.3f} CPU s, {total / floor:.1f}x"
    )


if __name__ == "__main__":
    main()

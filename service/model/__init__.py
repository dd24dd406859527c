"""The pure core: raw Kubernetes objects in, records, an index and Changes out (no I/O, no await).

* `records`, `changes` — the shared value types (records, Transition, Changes, Seed);
* `quantity` — Kubernetes quantities, exactly;
* `api` (wire Structs), `normalize` (dicts) and `decode` (LIST pages and WATCH lines as bytes)
  — every served version into one record shape, via `slices`, `claims`, `workloads`,
  `metadata`; `MalformedObject` is the only error;
* `index` (`ClusterIndex`, with `devices_index`, `claims_index`, `pods`, `pools`, `links`,
  `relations`, `batch`) — per-cluster state, reverse maps, derived statuses and idleness, and
  the Changes each batch makes: records, transitions, the derived `delta` a store persists and
  the `live` events subscribers get; `view` (`IndexView`) is the index as readers see it;
* `inventory` — derived device status (free / held / shared / blocked) and remaining capacity.
"""

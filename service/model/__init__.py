"""The pure core: raw Kubernetes objects in, records, an index and Changes out (no I/O, no await).

* `records`, `changes` — the shared value types (records, Transition, Changes);
* `quantity` — Kubernetes quantities, exactly;
* `api` (wire Structs), `normalize` (dicts) and `decode` (LIST pages and WATCH lines as bytes)
  — every served version into one record shape, via `slices`, `claims`, `workloads`,
  `metadata`; `MalformedObject` is the only error;
* `index` (`ClusterIndex`, with `devices_index`, `claims_index`, `pools`, `links`, `relations`,
  `delta`) — per-cluster state, reverse maps and the Changes each batch makes;
* `inventory` — derived device status (free / held / shared / blocked) and remaining capacity.
"""

"""The reactor: one task per mirrored cluster, from watch streams to the sinks.

* `cluster`  — `Reactor` (one cluster: watch messages → the model's index → `Changes` → every
  sink, in order), with `delivery` (the sinks' hooks, batches and a seed read, retried while
  a backend is down);
* `reactor`  — `Reactors` / `run_reactors` (the group the app waits on and stops);
* `leased`   — the same reactors run only while this replica holds each cluster's lease, each
  new holder's index seeded with what the shared store holds;
* `feed`, `malformed`, `heap` — the watcher→reactor queue, malformed-object bookkeeping, GC
  settings for the initial sync.

It wires `service.clusters` (what the API servers say) to `service.model` (what it means) and
hands the model's decisions to the stores; it never decides what to write.
"""

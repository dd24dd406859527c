"""State stores: they persist and answer what the model decided, and derive nothing.

* `protocols` — the seams (ChangeSink, StatusSink, StateReader, StateWriter, StateStore) and
  the one error tree (`StoreError` > `StoreUnavailable`);
* `memory`    — the embedded default: the reactors' own indexes, read in place, and the
  in-process bus of their live events (`bus`);
* `redis`, `redis_writes`, `redis_keys`, `redis_calls` — the shared store: each Changes
  written as it says, one fenced transaction a batch; `lease` — who may write a cluster.
"""

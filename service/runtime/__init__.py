"""The composition root: every command builds the mirror here, from `Settings`, and only here.

* `stores` — the state store the settings ask for (in memory, or Redis with a URL), the
  history database with its outbox (in-process, or the Redis stream) and writer options,
  the lease settings;
* `watching` — connections to every cluster and their reactors: into the in-memory store's
  own indexes, or — for the Redis store, whose type says it is shared — under per-cluster
  leases with fencing tokens, each new holder's index seeded with what Redis holds;
* `mirror` — the whole mirror as one Starlette app (`mirror_app`): `serve`, `watch` and
  `demo` run it; `explain --kubeconfig` watches in-process with `watch_clusters`;
* `http_protocol` — the uvicorn HTTP protocol they serve it with (a response in one write).

What is built where is decided by the type of what was built (a `MemoryStore` or a
`RedisStore`), never by probing an object for methods: the one decision that matters —
leased watching for a shared store — cannot be skipped by a wrapper that hides a method.
`service.http.app` only builds the Starlette app around what it is handed.
"""

"""The composition root: every command builds the mirror here, from `Settings`, and only here.

* `mirror` — the whole mirror as one Starlette app (`mirror_app`), built from the settings:
  the state store, the history, the access control, the watchers and the alert engine beside
  them, Slack's settings; `serve`, `watch` and `demo` run it;
* `compose` — one app from parts (`compose_app`): the state the routes share, the API
  surfaces, the lifespan, handed to `service.http.app.create_app` (which only routes and adds
  middleware); `mirror_app` calls it, and so do embeddings that hand in parts of their own;
* `lifespan` — the one ordered lifespan (`MirrorLifespan`): access, resources, MCP sessions,
  the state store, history, watchers, then the schema when it is built late; the reverse on
  shutdown;
* `api` — the API surfaces (`ApiSurfaces`): the schema, `/graphql`'s view, Slack's commands,
  the MCP endpoint;
* `stores` — the state store the settings ask for (in memory, or Redis with a URL), the
  history database with its outbox (in-process, or the Redis stream) and writer options,
  the lease settings;
* `watching` — connections to every cluster and their reactors: into the in-memory store's
  own indexes, or — for the Redis store, whose type says it is shared — under per-cluster
  leases with fencing tokens, each new holder's index seeded with what Redis holds;
  `explain --kubeconfig` watches in-process with `watch_clusters`;
* `server`, `http_protocol`, `connection_limits` — uvicorn's server for the app (its stop
  signals arm the shutdown deadline), the HTTP protocol it serves with (a response in one
  write) and the bounds on the connections it holds;
* `configuration` — what the surfaces read beside `Settings`: Slack's settings, the alerts'
  file;
* `demo` — the demo's mirror: the simulator as the lifespan's first resource, then the mirror;
* `standalone` — what the command line serves or checks without an app: the MCP tools on
  stdio, the SDL, the registered documents' checks.

What is built where is decided by the type of what was built (a `MemoryStore` or a
`RedisStore`), never by probing an object for methods: the one decision that matters —
leased watching for a shared store — cannot be skipped by a wrapper that hides a method.
"""

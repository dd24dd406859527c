"""The questions people ask of the mirror, shared by GraphQL, Slack, the CLI and the web page.

Two kinds of module, one layer: the front ends never phrase a question of their own.

Answered from a state store (the GraphQL resolvers call these over the request's scoped reader):

* `diagnosis` — one cluster's state read from a state store and the pure diagnostics run over
  it (`explainClaim`, `lint`, `findDevices`), over `cluster_state` (the read: the store's
  batched calls, or its in-process index in place) and `ledgers` (each cluster's allocation
  ledger, kept in step);
* `holders`   — `whoHolds`: the devices a text names (uuid, node/device, driver/pool/device,
  bare name) and the claims and pods holding them.

Asked of the graph (GraphQL documents and the rows of their answers; Slack executes them
in-process, the command line over HTTP, each through an `Ask`):

* `asking`    — `Ask`, `QuestionError`, and `in_process` (an `Ask` over a schema);
* `chatops`   — the on-call questions (free, waiting, idle);
* `holdings`  — who-holds;
* `explain`   — `explainClaim`, with a fixed selection or its whole shape (introspection);
* `lint`      — the DRA mistakes in manifests (offline, or on a server) or in a cluster.

Promises: no module here imports a front end (schema, http, slack, cli) or the watchers.
"""

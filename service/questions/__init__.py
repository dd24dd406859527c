"""The questions people ask of the mirror, once for every front end.

One function per question, answered from the state store (and the history where needed)
through the asker's access scope (`asker.Asker`: a scoped reader, the history reads, a clock):

* `holdings`  — who holds a device (uuid, node/device, driver/pool/device or a bare name),
  what each named device is (free, held, shared, blocked) and since when it is held, over
  `holders` (the devices a text names, the claims and pods holding them);
* `free`      — free devices of a class, matching a selector, a partition never counted
  beside its free whole device;
* `claims`    — claims waiting for devices, and idle holders;
* `capacity`  — devices per cluster and driver, and what they do now;
* `pods`      — a pod's claims and the devices allocated to them;
* `explain`, `lint`, `plan` — the diagnostics (`diagnosis`: one cluster's state read once,
  over `cluster_state` and `ledgers`), answered as the graph's facts (`facts`);
* `history`   — who held a device when, its timeline, a claim's lives, contention, idle
  holders, gaps (`history_facts`: their facts).

`local.LocalQuestions(asker)` asks them in this process (Slack, `/mcp`, the command line's
`--kubeconfig`; the graph's resolvers call the functions themselves);
`remote.RemoteQuestions(ask)` asks a mirror in another process over its `/graphql` (the
command line's `--server`, `dra-mirror mcp`); both are `protocol.Questions`. `asking` holds
the errors (`QuestionError` and its kinds) and `Ask`; `scoped` the scoped reader;
`documents` the fixed documents a server registers for its remote askers.

Promises: no module here imports a front end (schema, http, slack, cli, mcp), the watchers or
a transport; nothing here asks the graph in this process.
"""

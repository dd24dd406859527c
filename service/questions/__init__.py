"""The questions people ask of the mirror, shared by GraphQL, Slack, the CLI and the web page.

* `diagnosis` — one cluster's state read from a state store and the pure diagnostics run over
  it (`explainClaim`, `lint`, `findDevices`), over `cluster_state` (the read: the store's
  batched calls, or its in-process index in place) and `ledgers` (each cluster's allocation
  ledger, kept in step);
* `chatops`   — the on-call questions (free, waiting, idle) as GraphQL documents and rows;
* `holdings`  — who-holds as GraphQL documents and rows;
* `explain`   — `explainClaim` asked through introspection.
"""

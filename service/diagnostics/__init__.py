"""Diagnostics, pure: CEL device selectors, the structured allocator, explainClaim's verdicts,
the node filter, lint.

* `cel`, `cel_library` — device selectors evaluated as kube-apiserver and kube-scheduler do;
* `candidates`, `ledger`, `placement` — which devices a request could take, what is taken, and
  allocating a claim the way kube-scheduler's structured allocator would;
* `node_filter` (with `node_affinity`) — which nodes a pod may use (nodeName, nodeSelector,
  required node affinity, cordons, node taints against its tolerations);
* `cluster`, `verdicts`, `explain` — why a claim is Pending, or whether an allocated one is
  healthy;
* `lint`, `lint_cluster` — the common DRA mistakes in manifests and in a mirrored cluster.

The simulator places claims and filters nodes with this same code, so it never places what
`explainClaim` says cannot be placed. Promises: no I/O, no await; reads only the model's
records (import-linter checks it).
"""

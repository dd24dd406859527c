"""The only code that talks to the Kubernetes API servers of the mirrored clusters.

* `kubeconfig` — which clusters: the kubeconfig read and checked without connecting;
* `config`     — connections from kubeconfig contexts or the in-cluster service account;
* `kube_client` — the parts of kubernetes_asyncio used (not its generated API and models);
* `transport`  — raw GET and line-streamed WATCH through kubernetes_asyncio (bytes, no models);
* `errors`     — the one error tree of this boundary, translated once from foreign errors;
* `discovery`  — which resource.k8s.io version each cluster serves (v1, v1beta2, v1beta1);
* `resources`  — what is watched (`WATCHED`, checked by the Helm chart's ClusterRole);
* `watching`   — paged LIST then WATCH per kind, relist on 410, backoff, Retry-After;
* `messages`   — what the watchers report (`Listed`, `Observed`, `Failed`, …);
* `resets`     — evidence that a cluster's resourceVersions were reset, shared by its watchers;
* `stalls`     — the watchdog that ends a watch stream silent for two bookmark intervals;
* `backoff`, `feed`, `malformed`, `heap` — reconnect delays, the watcher→reactor queue,
  malformed-object bookkeeping, GC settings for the initial sync.

Records come out; what they mean is decided by `service.model`, and `service.reactor` wires
the two together.
"""

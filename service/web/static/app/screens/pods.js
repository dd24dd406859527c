// Per pod: the pods that ask for devices, a page at a time, with their claims' states; each
// opens the manual's checklist for that pod (screens/pod.js).
import { useLive, useQuery, useThrottled } from "../hooks.js";
import { ClaimLink, ClaimState, Filters, Loading, Pager, PodLink, PodPhase, Screen, html, useState } from "../ui.js";

export const PAGE_SIZE = 50;
const PODS = `query Pods($cluster: String, $namespace: String, $node: String, $usesDevices: Boolean, $first: Int, $after: String) {
  pods(cluster: $cluster, namespace: $namespace, node: $node, usesDevices: $usesDevices, first: $first, after: $after) {
    totalCount pageInfo { hasNextPage endCursor }
    nodes {
      cluster namespace name phase reason nodeName
      claims { name claimName templateName containers claim { cluster namespace name state } }
      extendedResourceClaim { cluster namespace name state }
      containers { name limits }
    }
  }
}`;
const LIVE = `subscription PodsLive($cluster: String!, $namespace: String) { claimEvents(cluster: $cluster, namespace: $namespace) { type } }`;
const DEVICE_PLUGIN = /^(nvidia\.com\/gpu|amd\.com\/gpu|gpu\.intel\.com\/)/;

export function devicePluginLimits(pod) {
  return pod.containers.flatMap((c) => Object.keys(c.limits || {}).filter((k) => DEVICE_PLUGIN.test(k)).map((k) => `${c.name}: ${k} ${c.limits[k]}`));
}

export function Pods({ params, clusters }) {
  const variables = {
    cluster: params.cluster || null, namespace: params.namespace || null, node: params.node || null,
    usesDevices: params.all === "true" ? null : true, first: PAGE_SIZE, after: params.after || null,
  };
  const [refresh, setRefresh] = useState(0);
  const { data, error } = useQuery(PODS, variables, refresh);
  const bump = useThrottled(() => setRefresh((n) => n + 1), 2000);
  const names = (clusters || []).map((c) => c.name).filter((n) => !params.cluster || n === params.cluster);
  useLive(names.map((c) => ({ document: LIVE, variables: { cluster: c, namespace: params.namespace || null } })), bump, bump);
  const pods = data ? data.pods.nodes : null;
  const filters = [
    { name: "namespace", label: "namespace", placeholder: "any namespace" },
    { name: "node", label: "node", placeholder: "any node" },
    { name: "all", label: "pods", options: [["", "asking for DRA devices"], ["true", "every pod"]] },
  ];
  return html`<${Screen} name="pods" title="Per pod" ready=${!!data} error=${error}>
    <${Filters} screen="pods" params=${params} fields=${filters} />
    <p class="muted small">Open a pod for the checklist: the order for using a GPU, what to check after applying, and the common mistake when one applies.</p>
    ${!data && !error ? html`<${Loading} />` : null}
    ${data ? html`<${Pager} screen="pods" params=${params} connection=${data.pods} pageSize=${PAGE_SIZE} />` : null}
    ${pods && pods.length ? html`<table class="list" data-rows=${pods.length}>
      <thead><tr><th>pod</th><th>phase</th><th>node</th><th>claims</th><th>device-plugin limits</th></tr></thead>
      <tbody>${pods.map((p) => html`<tr key=${`${p.cluster}/${p.namespace}/${p.name}`} data-pod=${`${p.cluster}/${p.namespace}/${p.name}`}>
        <td><${PodLink} cluster=${p.cluster} namespace=${p.namespace} name=${p.name} node=${p.nodeName} />${!params.cluster ? html`<div class="muted small">${p.cluster}</div>` : null}</td>
        <td><${PodPhase} phase=${p.phase} />${p.reason ? html` <span class="muted small">${p.reason}</span>` : null}</td>
        <td class="mono">${p.nodeName || html`<span class="muted">—</span>`}</td>
        <td>${[...p.claims.map((c) => ({ key: c.name, claim: c.claim, label: c.name })),
              ...(p.extendedResourceClaim ? [{ key: "extended", claim: p.extendedResourceClaim, label: "extended resources" }] : [])]
          .map((c) => html`<div key=${c.key}>${c.claim ? html`<${ClaimLink} cluster=${c.claim.cluster} namespace=${c.claim.namespace} name=${c.claim.name} /> <${ClaimState} state=${c.claim.state} />` : html`<span class="warn-text">${c.label}: no claim yet</span>`}</div>`)}</td>
        <td class="mono small">${devicePluginLimits(p).join(", ") || html`<span class="muted">—</span>`}</td>
      </tr>`)}</tbody></table>` : null}
    ${pods && pods.length === 0 ? html`<p class="muted">No pod matches.</p>` : null}
  <//>`;
}

// Resource Claims: state, what each request asks, where it was allocated (node, driver /
// pool / device, share), who consumes it; idle holders flagged as cleanup candidates (louder
// when others wait for the same class); a Pending claim says why (explainClaim).
import { query } from "../graphql.js";
import { useLive, useQuery, useThrottled } from "../hooks.js";
import { ClaimLink, ClaimState, Filters, Loading, Pager, Screen, html, useEffect, useState } from "../ui.js";
import { Allocation, CLAIM_FIELDS, Consumers, IdleNote, Origin, PendingFor, Requests } from "./claim_parts.js";

export const PAGE_SIZE = 50;
const EXPLAIN_AT_ONCE = 10; // pending claims of a page diagnosed without a click

const CLAIMS = `query Claims($cluster: String, $namespace: String, $state: ClaimState, $idle: Boolean,
    $first: Int, $after: String) {
  resourceClaims(cluster: $cluster, namespace: $namespace, state: $state, idle: $idle, first: $first, after: $after) {
    totalCount pageInfo { hasNextPage endCursor } nodes { ...ClaimRow }
  }
}
${CLAIM_FIELDS}`;
export const WAITING = `query Waiting($cluster: String) {
  resourceClaims(cluster: $cluster, state: PENDING, first: 1000) {
    totalCount nodes { cluster requests { deviceClassName firstAvailable { deviceClassName } } }
  }
}`;
const EXPLAIN = `query WhyPending($cluster: String!, $namespace: String!, $name: String!) {
  explainClaim(cluster: $cluster, namespace: $namespace, name: $name) { verdict message }
}`;
const LIVE_CLAIMS = `subscription ClaimsLive($cluster: String!, $namespace: String) {
  claimEvents(cluster: $cluster, namespace: $namespace) { type namespace name }
}`;

// (cluster, class) -> claims waiting for it (from the first 1,000 pending claims).
export function waitingCounter(data) {
  const counts = new Map();
  for (const claim of data ? data.resourceClaims.nodes : []) {
    const classes = new Set();
    for (const r of claim.requests) {
      if (r.deviceClassName) classes.add(r.deviceClassName);
      for (const sub of r.firstAvailable || []) classes.add(sub.deviceClassName);
    }
    for (const c of classes) counts.set(`${claim.cluster}/${c}`, (counts.get(`${claim.cluster}/${c}`) || 0) + 1);
  }
  return (cluster, className) => counts.get(`${cluster}/${className}`) || 0;
}

export function WhyPending({ claim, auto }) {
  const [answer, setAnswer] = useState(null);
  const ask = () => {
    setAnswer({ loading: true });
    query(EXPLAIN, { cluster: claim.cluster, namespace: claim.namespace, name: claim.name }).then(
      (data) => setAnswer({ diagnosis: data.explainClaim }),
      (error) => setAnswer({ error }),
    );
  };
  useEffect(() => { if (auto) ask(); }, [auto, claim.cluster, claim.namespace, claim.name]);
  if (!answer) return html`<button class="link small" onClick=${ask}>why pending?</button>`;
  if (answer.loading) return html`<span class="muted small">diagnosing…</span>`;
  if (answer.error) return html`<span class="error-inline">${answer.error.message}</span>`;
  if (!answer.diagnosis) return html`<span class="muted small">no diagnosis</span>`;
  return html`<div class="small diagnosis" data-verdict=${answer.diagnosis.verdict}><strong>${answer.diagnosis.verdict}</strong>: ${answer.diagnosis.message}</div>`;
}

export function ResourceClaims({ params, clusters }) {
  const variables = {
    cluster: params.cluster || null, namespace: params.namespace || null, state: params.state || null,
    idle: params.idle === "true" ? true : params.idle === "false" ? false : null,
    first: PAGE_SIZE, after: params.after || null,
  };
  const [refresh, setRefresh] = useState(0);
  const { data, error } = useQuery(CLAIMS, variables, refresh);
  // Who waits matters only for idle holders on this page: asked after the page, if any.
  const idleShown = data ? data.resourceClaims.nodes.some((c) => c.idle) : false;
  const waiting = useQuery(WAITING, idleShown ? { cluster: params.cluster || null } : null, refresh);
  const waitingFor = waitingCounter(waiting.data);
  const bump = useThrottled(() => setRefresh((n) => n + 1), 1000);
  const names = (clusters || []).map((c) => c.name).filter((n) => !params.cluster || n === params.cluster);
  useLive(names.map((c) => ({ document: LIVE_CLAIMS, variables: { cluster: c, namespace: params.namespace || null } })), bump, bump);
  const claims = data ? data.resourceClaims.nodes : null;
  let pendingSeen = 0;
  const filters = [
    { name: "namespace", label: "namespace", placeholder: "any namespace" },
    { name: "state", label: "state", options: [["", "any"], ["PENDING", "Pending"], ["ALLOCATED", "Allocated"], ["RESERVED", "Reserved"], ["DELETING", "Deleting"]] },
    { name: "idle", label: "idle holders", options: [["", "any"], ["true", "idle only"], ["false", "not idle"]] },
  ];
  return html`<${Screen} name="claims" title="Resource Claims" ready=${!!data} error=${error}>
    <${Filters} screen="claims" params=${params} fields=${filters} />
    ${!data && !error ? html`<${Loading} />` : null}
    ${data ? html`<${Pager} screen="claims" params=${params} connection=${data.resourceClaims} pageSize=${PAGE_SIZE} />` : null}
    ${claims && claims.length
      ? html`<table class="list" data-rows=${claims.length}>
          <thead><tr><th>claim</th><th>state</th><th>requests</th><th>allocation (node, driver / pool / device)</th><th>consumers</th><th>notes</th></tr></thead>
          <tbody>${claims.map((c) => {
            const auto = c.state === "PENDING" && pendingSeen++ < EXPLAIN_AT_ONCE;
            const loud = c.idle && c.requests.some((r) => waitingFor(c.cluster, r.deviceClassName) > 0);
            return html`<tr key=${`${c.cluster}/${c.namespace}/${c.name}`} data-claim=${`${c.cluster}/${c.namespace}/${c.name}`} data-state=${c.state} class=${loud ? "idle-loud" : ""}>
              <td><${ClaimLink} cluster=${c.cluster} namespace=${c.namespace} name=${c.name} showCluster=${!params.cluster} /><div><${Origin} claim=${c} /></div></td>
              <td><${ClaimState} state=${c.state} /><${PendingFor} claim=${c} /></td>
              <td><${Requests} claim=${c} /></td>
              <td><${Allocation} claim=${c} /></td>
              <td><${Consumers} claim=${c} /></td>
              <td><${IdleNote} claim=${c} waitingFor=${waitingFor} />${c.state === "PENDING" ? html`<${WhyPending} claim=${c} auto=${auto} />` : null}</td>
            </tr>`;
          })}</tbody>
        </table>`
      : null}
    ${claims && claims.length === 0 ? html`<p class="muted">No claim matches.</p>` : null}
    ${data ? html`<${Pager} screen="claims" params=${params} connection=${data.resourceClaims} pageSize=${PAGE_SIZE} />` : null}
  <//>`;
}

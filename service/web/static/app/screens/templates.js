// Resource Claim Templates: what each template asks for, and — opened — the claims generated
// from it with their state and their pods.
import { useLive, useQuery, useThrottled } from "../hooks.js";
import { ClaimLink, ClaimState, Filters, Link, Loading, PodLink, PodPhase, Screen, href, html, useState } from "../ui.js";
import { Requests } from "./claim_parts.js";

const TEMPLATES = `query Templates($cluster: String, $namespace: String) {
  resourceClaimTemplates(cluster: $cluster, namespace: $namespace) {
    cluster namespace name
    requests {
      name deviceClassName allocationMode count selectors adminAccess capacity
      firstAvailable { name deviceClassName allocationMode count selectors capacity }
    }
  }
}`;
// The graph lists a template's claims whole (no paging): asked for one namespace at a time,
// when a template is opened, and shown a page at a time here.
const GENERATED = `query GeneratedClaims($cluster: String!, $namespace: String!) {
  resourceClaimTemplates(cluster: $cluster, namespace: $namespace) {
    name
    claims {
      cluster namespace name state
      allocation { nodeName devices { device { name } } }
      consumers { cluster namespace name phase nodeName }
    }
  }
}`;
const LIVE = `subscription TemplateClaimsLive($cluster: String!, $namespace: String!) {
  claimEvents(cluster: $cluster, namespace: $namespace) { type }
}`;
const SHOWN = 50;

function Generated({ template }) {
  const [refresh, setRefresh] = useState(0);
  const [limit, setLimit] = useState(SHOWN);
  const { data, error } = useQuery(GENERATED, { cluster: template.cluster, namespace: template.namespace }, refresh);
  const bump = useThrottled(() => setRefresh((n) => n + 1), 1000);
  useLive([{ document: LIVE, variables: { cluster: template.cluster, namespace: template.namespace } }], bump, bump);
  if (error) return html`<span class="error-inline">${error.message}</span>`;
  if (!data) return html`<${Loading} what="Reading its claims" />`;
  const found = data.resourceClaimTemplates.find((t) => t.name === template.name);
  const claims = found ? found.claims : [];
  if (!claims.length) return html`<p class="muted small" data-generated="0">No claim was generated from it.</p>`;
  return html`<div data-generated=${claims.length}>
    <table class="list small">
      <thead><tr><th>claim</th><th>state</th><th>node / devices</th><th>pods</th></tr></thead>
      <tbody>${claims.slice(0, limit).map((c) => html`<tr key=${c.name} data-claim=${`${c.cluster}/${c.namespace}/${c.name}`}>
        <td><${ClaimLink} cluster=${c.cluster} namespace=${c.namespace} name=${c.name} /></td>
        <td><${ClaimState} state=${c.state} /></td>
        <td>${c.allocation ? html`<span class="mono">${c.allocation.nodeName || "—"}</span> ${c.allocation.devices.map((d) => d.device.name).join(", ")}` : html`<span class="muted">—</span>`}</td>
        <td>${c.consumers.length ? c.consumers.map((p) => html`<div key=${p.name}><${PodLink} cluster=${p.cluster} namespace=${p.namespace} name=${p.name} node=${p.nodeName} /> <${PodPhase} phase=${p.phase} /></div>`) : html`<span class="muted">none</span>`}</td>
      </tr>`)}</tbody>
    </table>
    ${claims.length > limit ? html`<button class="link" onClick=${() => setLimit(limit + SHOWN)}>show ${Math.min(SHOWN, claims.length - limit)} more of ${claims.length}</button>` : null}
  </div>`;
}

export function ClaimTemplates({ params }) {
  const variables = { cluster: params.cluster || null, namespace: params.namespace || null };
  const { data, error } = useQuery(TEMPLATES, variables);
  const templates = data ? data.resourceClaimTemplates : null;
  const opened = params.template || "";
  const filters = [{ name: "namespace", label: "namespace", placeholder: "any namespace" }];
  return html`<${Screen} name="templates" title="Resource Claim Templates" ready=${!!data} error=${error}>
    <${Filters} screen="templates" params=${params} fields=${filters} />
    ${!data && !error ? html`<${Loading} />` : null}
    ${templates && templates.length === 0 ? html`<p class="muted">No template.</p>` : null}
    ${templates && templates.length ? html`<table class="list" data-rows=${templates.length}>
      <thead><tr><th>template</th><th>requests</th><th>generated claims and their pods</th></tr></thead>
      <tbody>${templates.map((t) => {
        const id = `${t.cluster}/${t.namespace}/${t.name}`;
        const open = opened === id;
        return html`<tr key=${id} data-template=${id}>
          <td><span class="mono">${t.namespace}/${t.name}</span><div class="muted small">${t.cluster}</div></td>
          <td><${Requests} claim=${t} /></td>
          <td>${open
            ? html`<${Link} to=${href("templates", { ...params, template: null })} className="small">close<//><${Generated} template=${t} />`
            : html`<${Link} to=${href("templates", { ...params, template: id })} className="small" data-open=${id}>show the claims made from it<//>`}</td>
        </tr>`;
      })}</tbody></table>` : null}
  <//>`;
}

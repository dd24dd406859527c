// Shared pieces of the screens: markup (htm over React, no build step), links to objects,
// badges, the pager, filters, and the marked places where the graph lacks a figure.
import htm from "../vendor/htm-3.1.1/htm.module.js";
import { Link, href, navigate } from "./router.js";
import { deviceSpec, number } from "./format.js";

const React = window.React;
export const html = htm.bind(React.createElement);
export const { useEffect, useMemo, useRef, useState, Fragment } = React;
export { Link, href };

export function Screen({ name, title, ready, error, actions, children }) {
  useEffect(() => {
    document.title = `${title} · dra-mirror`;
  }, [title]);
  return html`<main data-screen=${name} data-ready=${ready ? "true" : "false"}>
    <header class="screen-head"><h1>${title}</h1>${actions ? html`<div class="actions">${actions}</div>` : null}</header>
    ${error ? html`<${ErrorNote} error=${error} />` : null}
    ${children}
  </main>`;
}

export function ErrorNote({ error, what }) {
  if (!error) return null;
  return html`<div class="error" role="alert">${what ? `${what}: ` : ""}${error.message || String(error)}</div>`;
}

export function Loading({ what = "Loading" }) {
  return html`<p class="loading">${what}…</p>`;
}

// A figure the screen should show but the graph does not serve yet: said, never invented.
export function Gap({ what, needs }) {
  return html`<span class="gap" data-gap=${needs} title=${`Not served by the graph yet (needs ${needs})`}>${what ? `${what}: ` : ""}not in the graph yet</span>`;
}

export function Badge({ kind = "plain", title, children }) {
  return html`<span class=${`badge badge-${kind}`} title=${title}>${children}</span>`;
}

const CLAIM_KINDS = { PENDING: "warn", ALLOCATED: "info", RESERVED: "ok", DELETING: "bad" };
const CLAIM_WORDS = { PENDING: "Pending", ALLOCATED: "Allocated", RESERVED: "Reserved", DELETING: "Deleting" };
export function ClaimState({ state }) {
  return html`<${Badge} kind=${CLAIM_KINDS[state] || "plain"}>${CLAIM_WORDS[state] || state}<//>`;
}

const DEVICE_KINDS = { FREE: "ok", HELD: "info", SHARED: "share", BLOCKED: "muted" };
const DEVICE_WORDS = { FREE: "free", HELD: "held", SHARED: "shared", BLOCKED: "blocked" };
export function DeviceStatus({ status }) {
  return html`<${Badge} kind=${DEVICE_KINDS[status] || "plain"}>${DEVICE_WORDS[status] || status || "—"}<//>`;
}

export function PodPhase({ phase }) {
  const kind = phase === "Running" ? "ok" : phase === "Pending" ? "warn" : phase === "Failed" ? "bad" : "muted";
  return html`<${Badge} kind=${kind}>${phase}<//>`;
}

export function ClaimLink({ cluster, namespace, name, showCluster = false }) {
  return html`<${Link} to=${href("claim", { cluster, namespace, name })} className="mono">${showCluster ? `${cluster}: ` : ""}${namespace}/${name}<//>`;
}

export function PodLink({ cluster, namespace, name, node }) {
  return html`<${Link} to=${href("pod", { cluster, namespace, name, node })} className="mono">${namespace}/${name}<//>`;
}

export function DeviceLink({ device, cluster, label }) {
  const c = cluster || device.cluster;
  const params = { cluster: c, driver: device.driver, pool: device.pool, device: device.name, node: device.nodeName };
  return html`<${Link} to=${href("device", params)} className="mono" title=${deviceSpec(device)}>${label || device.name}<//>`;
}

export function NodeName({ cluster, node }) {
  if (!node) return html`<span class="muted">network-attached</span>`;
  return html`<${Link} to=${href("slices", { cluster, node })} className="mono">${node}<//>`;
}

export function Json({ value }) {
  if (value === null || value === undefined) return html`<span class="muted">—</span>`;
  return html`<pre class="json">${JSON.stringify(value, null, 2)}</pre>`;
}

// A device's attributes, drawn only once opened (a page shows hundreds of devices).
export function Attributes({ attributes }) {
  const [open, setOpen] = useState(false);
  const names = Object.keys(attributes || {});
  return html`<details onToggle=${(e) => setOpen(e.currentTarget.open)}>
    <summary class="small">${names.length} attribute${names.length === 1 ? "" : "s"}</summary>
    ${open ? html`<table class="small attributes"><tbody>${names.map((k) => html`<tr key=${k}><td class="mono">${k}</td><td class="mono">${String(attributes[k])}</td></tr>`)}</tbody></table>` : null}
  </details>`;
}

export function KeyValues({ rows }) {
  return html`<dl class="kv">${rows.filter(Boolean).map(([k, v]) => html`<${Fragment} key=${k}><dt>${k}</dt><dd>${v}</dd><//>`)}</dl>`;
}

// "1–50 of 1,234" and the links to the first and the next page (keyset cursors: the URL's
// `after` is the cursor, `page` only numbers the page for people).
export function Pager({ screen, params, connection, pageSize }) {
  if (!connection) return null;
  const page = Number(params.page || 1);
  const first = (page - 1) * pageSize + 1;
  const shown = connection.nodes ? connection.nodes.length : connection.edges.length;
  const last = first + shown - 1;
  const { hasNextPage, endCursor } = connection.pageInfo;
  return html`<nav class="pager" aria-label="pages">
    <span data-total=${connection.totalCount}>${shown ? `${number(first)}–${number(last)} of ${number(connection.totalCount)}` : `0 of ${number(connection.totalCount)}`}</span>
    ${page > 1 ? html`<${Link} to=${href(screen, { ...params, after: null, page: null })}>« first page<//>` : null}
    ${page > 1 ? html`<a href="#" onClick=${(e) => { e.preventDefault(); window.history.back(); }}>‹ previous</a>` : null}
    ${hasNextPage ? html`<${Link} to=${href(screen, { ...params, after: endCursor, page: page + 1 })} rel="next">next ›<//>` : null}
  </nav>`;
}

// Filter fields bound to the URL: changing one re-reads the screen from its first page.
export function Filters({ screen, params, fields }) {
  const set = (name, value) => navigate(href(screen, { ...params, [name]: value, after: null, page: null }), { replace: true });
  return html`<form class="filters" onSubmit=${(e) => e.preventDefault()}>
    ${fields.map((field) => html`<label key=${field.name}>${field.label}
      ${field.options
        ? html`<select name=${field.name} value=${params[field.name] || ""} onChange=${(e) => set(field.name, e.target.value)}>
            ${field.options.map(([value, label]) => html`<option key=${value} value=${value}>${label}</option>`)}
          </select>`
        : html`<input name=${field.name} defaultValue=${params[field.name] || ""} placeholder=${field.placeholder || ""}
            onKeyDown=${(e) => { if (e.key === "Enter") set(field.name, e.target.value.trim()); }}
            onBlur=${(e) => { if ((params[field.name] || "") !== e.target.value.trim()) set(field.name, e.target.value.trim()); }} />`}
    </label>`)}
  </form>`;
}

export function clusterLabel(cluster) {
  return cluster || "all clusters";
}

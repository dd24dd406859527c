// A claim's page: the claim now (requests, allocation, consumers), the diagnosis explainClaim
// gives (why Pending, or the checklist of an allocated claim), and its life from history —
// created, waited, allocated, consumed, idle, released — with how busy its devices were then
// when the server has a utilisation source.
import { useLive, useQuery, useThrottled } from "../hooks.js";
import { duration, instant } from "../format.js";
import { Timeline } from "../charts.js";
import { query } from "../graphql.js";
import { Badge, ClaimLink, ClaimState, ErrorNote, KeyValues, Link, Loading, Screen, href, html, useEffect, useState } from "../ui.js";
import { Allocation, CLAIM_FIELDS, Consumers, IdleNote, Origin, PendingFor, Requests } from "./claim_parts.js";
import { WAITING, waitingCounter } from "./claims.js";
import { DEVICE_BUSY, disabled } from "./device.js";

const CLAIM = `query Claim($cluster: String!, $namespace: String!, $name: String!) {
  resourceClaim(cluster: $cluster, namespace: $namespace, name: $name) {
    ...ClaimRow
    template { namespace name }
    allocation { devices { request health { container health message } device { published taints } } }
  }
}
${CLAIM_FIELDS}`;
const BUSY = `query ClaimBusy($cluster: String!, $namespace: String!, $name: String!) {
  claimUtilization(cluster: $cluster, namespace: $namespace, name: $name) { device busy energyKwh }
}`;

// How busy its devices were over the last hour (dcgm-exporter's readings); nothing when the
// mirror reads no utilisation, "unknown" for a device without readings, never 0 %.
function shown(busy) {
  if (busy.error) return !(busy.error.codes && busy.error.codes.includes("UTILIZATION_DISABLED"));
  return !!(busy.data && busy.data.claimUtilization && busy.data.claimUtilization.length);
}

function Busy({ busy }) {
  if (busy.error) {
    const off = busy.error.codes && busy.error.codes.includes("UTILIZATION_DISABLED");
    return off ? null : html`<${ErrorNote} what="utilisation" error=${busy.error} />`;
  }
  const rows = busy.data ? busy.data.claimUtilization : null;
  if (!rows || !rows.length) return null;
  return html`<span data-busy=${rows.length}>${rows.map((d, i) => html`${i ? "; " : ""}${d.device}: ${d.busy === null ? "unknown" : `busy ${Math.round(d.busy)} %`}`)} <span class="muted small">(last 1 h)</span></span>`;
}

const DIAGNOSIS = `query ClaimDiagnosis($cluster: String!, $namespace: String!, $name: String!) {
  explainClaim(cluster: $cluster, namespace: $namespace, name: $name) {
    state verdict message
    requests {
      request deviceClassName classExists classDevices needed freeOrShareable nodes verdict summary
      selectors { expression passing rejected } selectorErrors { expression message }
      heldBy { cluster namespace name }
    }
    holders { claim { cluster namespace name } pods { namespace name } running idle idleSince }
    holdersTotal
    checks { name ok detail }
    nodesWithoutDriver
  }
}`;
const LIFE = `query ClaimLife($cluster: String!, $namespace: String!, $name: String!) {
  claimHistory(cluster: $cluster, namespace: $namespace, name: $name) {
    uid
    versions { resourceVersion observedAt deleted }
    waits { since until endReason classes }
    allocations { driver pool device uuid node request shareID since until endReason }
    consumers { name uid since until }
    idle { since until endReason }
  }
}`;
const LIVE = `subscription ClaimLive($cluster: String!, $namespace: String!) {
  claimEvents(cluster: $cluster, namespace: $namespace) { type name }
}`;

function Diagnosis({ diagnosis }) {
  if (!diagnosis) return html`<p class="muted">No diagnosis (the claim is not mirrored).</p>`;
  return html`<div data-verdict=${diagnosis.verdict}>
    <p><${Badge} kind=${diagnosis.verdict === "OK" ? "ok" : "warn"}>${diagnosis.verdict}<//> ${diagnosis.message}</p>
    ${diagnosis.checks.length
      ? html`<ul class="checklist">${diagnosis.checks.map((c) => html`<li key=${c.name} class=${c.ok ? "check-ok" : "check-no"} data-check=${c.name}>${c.name}: ${c.detail}</li>`)}</ul>`
      : null}
    ${diagnosis.requests.map((r) => html`<div key=${r.request} class="card" data-request-verdict=${r.verdict}>
      <strong class="mono">${r.request}</strong> (${r.deviceClassName || "no class"}): <${Badge} kind="warn">${r.verdict}<//> ${r.summary}
      <table class="figures-table small"><tbody>
        <tr><th>class exists</th><td>${r.classExists ? "yes" : "no"}</td></tr>
        <tr><th>devices the class covers</th><td>${r.classDevices}</td></tr>
        ${r.selectors.map((s, i) => html`<tr key=${i}><th class="mono">${s.expression}</th><td>${s.passing} pass, ${s.rejected} turned away</td></tr>`)}
        ${r.selectorErrors.map((s, i) => html`<tr key=${`e${i}`}><th class="mono">${s.expression}</th><td class="error-inline">${s.message}</td></tr>`)}
        <tr><th>free or shareable now</th><td>${r.freeOrShareable} (needs ${r.needed})${r.nodes.length ? ` on ${r.nodes.join(", ")}` : ""}</td></tr>
      </tbody></table>
    </div>`)}
    ${diagnosis.holders.length
      ? html`<h3>Held by (${diagnosis.holdersTotal})</h3><ul>${diagnosis.holders.map((h) => html`<li key=${`${h.claim.namespace}/${h.claim.name}`}>
          <${ClaimLink} cluster=${h.claim.cluster} namespace=${h.claim.namespace} name=${h.claim.name} />
          ${h.idle ? html` <${Badge} kind="bad">idle: cleanup candidate<//>` : h.running ? html` <${Badge} kind="ok">running<//>` : null}
          ${h.pods.length ? html` <span class="muted small">pods ${h.pods.map((p) => p.name).join(", ")}</span>` : null}</li>`)}</ul>`
      : null}
    ${diagnosis.nodesWithoutDriver.length ? html`<p class="notice">GPU nodes where the driver publishes nothing: ${diagnosis.nodesWithoutDriver.join(", ")}</p>` : null}
  </div>`;
}

// A claim's life as events in time order, and the same intervals as a chart.
export function lifeOf(incarnation) {
  const events = [];
  const first = incarnation.versions[0];
  if (first) events.push({ at: first.observedAt, text: "first seen (created or first watched)" });
  for (const w of incarnation.waits) {
    events.push({ at: w.since, text: `waiting for ${w.classes.join(", ") || "devices"}${w.until ? ` for ${duration((Date.parse(w.until) - Date.parse(w.since)) / 1000)} (${w.endReason})` : " — still waiting"}` });
  }
  for (const a of incarnation.allocations) {
    events.push({ at: a.since, text: `allocated ${a.driver} / ${a.pool} / ${a.device}${a.uuid ? ` (${a.uuid})` : ""} for request ${a.request}${a.shareID ? `, share ${a.shareID.slice(0, 8)}` : ""}` });
    if (a.until) events.push({ at: a.until, text: `${a.device} ${a.endReason}` });
  }
  for (const c of incarnation.consumers) {
    events.push({ at: c.since, text: `pod ${c.name} reserves it` });
    if (c.until) events.push({ at: c.until, text: `pod ${c.name} no longer reserves it` });
  }
  for (const s of incarnation.idle) {
    events.push({ at: s.since, text: "idle: allocated, no consumer pod Running" });
    if (s.until) events.push({ at: s.until, text: `no longer idle (${s.endReason})` });
  }
  const last = incarnation.versions[incarnation.versions.length - 1];
  if (last && last.deleted) events.push({ at: last.observedAt, text: "deleted" });
  events.sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
  const rows = [
    ...incarnation.waits.map((w) => ({ label: "waiting", since: w.since, until: w.until, kind: "waiting" })),
    ...incarnation.allocations.map((a) => ({ label: `device ${a.device}`, since: a.since, until: a.until, kind: "allocated" })),
    ...incarnation.consumers.map((c) => ({ label: `pod ${c.name}`, since: c.since, until: c.until, kind: "reserved by a pod" })),
    ...incarnation.idle.map((s) => ({ label: "idle", since: s.since, until: s.until, kind: "idle" })),
  ];
  return { events, rows };
}

// Its devices' busy lines over its life (at most the last 30 days; the history's buckets), one
// question a device; none without a utilisation source (UTILIZATION_DISABLED).
function useLifeBusy(cluster, incarnation, from) {
  const seen = new Map(incarnation.allocations.map((a) => [`${a.driver}/${a.pool}/${a.device}`, a]));
  const devices = [...seen.values()].map((a) => ({ driver: a.driver, pool: a.pool, device: a.device }));
  const to = Math.ceil(Date.now() / 60000) * 60000;
  const start = Math.max(Math.floor(from / 60000) * 60000, to - 30 * 86400000);
  const key = JSON.stringify({ cluster, devices, from: new Date(start).toISOString(), to: new Date(to).toISOString() });
  const [found, setFound] = useState({ key: null, lines: [], error: null });
  useEffect(() => {
    const asked = JSON.parse(key);
    if (!asked.devices.length) return undefined;
    const controller = new AbortController();
    Promise.all(asked.devices.map((d) => query(DEVICE_BUSY, { cluster: asked.cluster, ...d, from: asked.from, to: asked.to }, { signal: controller.signal })))
      .then((answers) => setFound({ key, lines: answers.map((a, i) => ({ label: asked.devices[i].device, points: a.deviceUtilizationHistory })), error: null }),
        (error) => { if (error.name !== "AbortError") setFound({ key, lines: [], error: disabled(error) ? null : error }); });
    return () => controller.abort();
  }, [key]);
  return found.key === key ? found : { lines: [], error: null };
}

function Incarnation({ cluster, inc }) {
  const now = Date.now();
  const { events, rows } = lifeOf(inc);
  const from = Math.min(events.length ? Date.parse(events[0].at) : now - 3600000, now - 60000);
  const busy = useLifeBusy(cluster, inc, from);
  return html`<section class="card" data-incarnation=${inc.uid}>
    <p class="muted small">uid <span class="mono">${inc.uid}</span></p>
    <${Timeline} rows=${rows} from=${from} to=${now} label="the claim's life" lines=${busy.lines} />
    <${ErrorNote} what="utilisation" error=${busy.error} />
    <ul class="timeline">${events.map((e, i) => html`<li key=${i} data-life=${e.text}><span class="mono small">${instant(e.at)}</span> ${e.text}</li>`)}</ul>
  </section>`;
}

function Life({ cluster, history }) {
  if (history.error) return html`<p class="muted" data-history="unavailable">History is not available: ${history.error.message}</p>`;
  if (!history.data) return html`<${Loading} what="Reading history" />`;
  const incarnations = history.data.claimHistory;
  if (!incarnations.length) return html`<p class="muted" data-history="empty">History has no record of this claim.</p>`;
  return incarnations.map((inc) => html`<${Incarnation} key=${inc.uid} cluster=${cluster} inc=${inc} />`);
}

export function ClaimPage({ params }) {
  const target = { cluster: params.cluster, namespace: params.namespace, name: params.name };
  const valid = target.cluster && target.namespace && target.name;
  const [refresh, setRefresh] = useState(0);
  const claim = useQuery(CLAIM, valid ? target : null, refresh);
  // The diagnosis and the history are asked once the claim is drawn (they cost more).
  const drawn = !!claim.data;
  const diagnosis = useQuery(DIAGNOSIS, drawn ? target : null, refresh);
  const history = useQuery(LIFE, drawn ? target : null, refresh);
  const held = drawn && claim.data.resourceClaim && claim.data.resourceClaim.state !== "PENDING";
  const busy = useQuery(BUSY, held ? target : null, refresh);
  const idle = drawn && claim.data.resourceClaim && claim.data.resourceClaim.idle;
  const waiting = useQuery(WAITING, idle ? { cluster: target.cluster } : null, refresh);
  const bump = useThrottled(() => setRefresh((n) => n + 1), 1000);
  useLive(valid ? [{ document: LIVE, variables: { cluster: target.cluster, namespace: target.namespace } }] : [],
    (data) => { if (data.claimEvents.name === target.name) bump(); }, bump);
  const c = claim.data ? claim.data.resourceClaim : null;
  const title = valid ? `Claim ${target.namespace}/${target.name}` : "Claim";
  return html`<${Screen} name="claim" title=${title} ready=${!!claim.data} error=${claim.error}>
    ${!valid ? html`<p class="error">A claim's page needs cluster, namespace and name.</p>` : null}
    ${valid && !claim.data && !claim.error ? html`<${Loading} />` : null}
    ${claim.data && !c ? html`<p class="muted" data-missing="true">No such claim in ${target.cluster} now${history.data && history.data.claimHistory.length ? "; its history is below" : ""}.</p>` : null}
    ${c ? html`<section class="card" data-claim=${`${c.cluster}/${c.namespace}/${c.name}`} data-state=${c.state}>
        <${KeyValues} rows=${[
          ["cluster", c.cluster],
          ["state", html`<${ClaimState} state=${c.state} /><${PendingFor} claim=${c} />`],
          ["origin", html`<${Origin} claim=${c} />${c.template ? html` — <${Link} to=${href("templates", { cluster: c.cluster, namespace: c.template.namespace, template: c.template.name })}>template ${c.template.name}<//>` : null}`],
          ["created", instant(c.createdAt)],
          ["uid", html`<span class="mono small">${c.uid}</span>`],
          ["requests", html`<${Requests} claim=${c} />`],
          ["allocation", html`<${Allocation} claim=${c} />`],
          ["consumers", html`<div data-consumers=${c.consumers.length}><${Consumers} claim=${c} /></div>`],
          c.idle ? ["idle", html`<${IdleNote} claim=${c} waitingFor=${waitingCounter(waiting.data)} />`] : null,
          shown(busy) ? ["utilisation", html`<${Busy} busy=${busy} />`] : null,
        ]} />
      </section>` : null}
    <h2>Diagnosis</h2>
    <${ErrorNote} what="explainClaim" error=${diagnosis.error} />
    ${diagnosis.data ? html`<${Diagnosis} diagnosis=${diagnosis.data.explainClaim} />` : !diagnosis.error && valid ? html`<${Loading} what="Diagnosing" />` : null}
    <h2>Life</h2>
    ${drawn ? html`<${Life} cluster=${target.cluster} history=${history} />` : null}
  <//>`;
}

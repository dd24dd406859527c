// Contention: how long claims waited (p50 / p95) and how many device-hours were held idle,
// per class or per namespace, over a chosen window — charts from the history audits; and what
// each namespace or team held of GPUs and what it costs (chargeback, GPU-equivalent-hours).
import { useQuery } from "../hooks.js";
import { duration, instant, number } from "../format.js";
import { ChartBox, color } from "../charts.js";
import { ClaimLink, ErrorNote, Filters, Loading, Screen, html } from "../ui.js";

const AUDIT = `query Contention($from: DateTime!, $to: DateTime!, $groupBy: ContentionGroup!, $bucket: String, $cluster: String) {
  contention(from: $from, to: $to, groupBy: $groupBy, bucket: $bucket, cluster: $cluster) {
    cluster group since until deviceHoursAvailable deviceHoursAllocated deviceHoursIdle utilization
    claimsWaited waitP50Seconds waitP95Seconds waitMaxSeconds peakPending claimsAbandoned
    gpuHoursAvailable gpuHoursAllocated gpuUtilization
  }
}`;
const CONTEXT = `query ContentionContext($from: DateTime!, $to: DateTime!, $cluster: String) {
  historyGaps(from: $from, to: $to, cluster: $cluster) { cluster since until }
  idleHolders(from: $from, to: $to, cluster: $cluster, first: 20) { cluster namespace claim deviceHoursIdle deviceHoursHeld devices }
}`;
const CHARGEBACK = `query Chargeback($from: DateTime!, $to: DateTime!, $groupBy: ChargebackGroup!, $cluster: String) {
  chargeback(from: $from, to: $to, groupBy: $groupBy, cluster: $cluster) {
    cluster group team gpuHoursHeld gpuHoursInUse costHeld costInUse currency
  }
}`;
const WINDOW_DAYS = { "1d": 1, "7d": 7, "30d": 30 };

// The window ends now (to the minute, so re-renders ask the same); it starts on a whole hour,
// so the audit's hourly peak cache serves all of it but the last hour.
export function auditWindow(days, now = Date.now()) {
  const hour = 3600000;
  const to = new Date(Math.floor(now / 60000) * 60000);
  const from = new Date(Math.floor((to.getTime() - days * 86400000) / hour) * hour);
  return { from: from.toISOString(), to: to.toISOString() };
}

const label = (row, many) => (many ? `${row.cluster}: ${row.group || "—"}` : row.group || "—");

function WindowCharts({ rows, many, groupBy }) {
  const labels = rows.map((r) => label(r, many));
  const noun = groupBy === "CLASS" ? "device class" : "namespace";
  const waits = {
    type: "bar",
    data: { labels, datasets: [
      { label: "wait p50 (s)", data: rows.map((r) => r.waitP50Seconds ?? 0), backgroundColor: color(0) },
      { label: "wait p95 (s)", data: rows.map((r) => r.waitP95Seconds ?? 0), backgroundColor: color(1) },
    ] },
    options: { plugins: { title: { display: true, text: `Wait before allocation, per ${noun}` } }, scales: { y: { title: { display: true, text: "seconds" } } } },
  };
  const hours = {
    type: "bar",
    data: { labels, datasets: [
      { label: "in use", data: rows.map((r) => Math.max(0, r.deviceHoursAllocated - r.deviceHoursIdle)), backgroundColor: color(2), stack: "held" },
      { label: "held idle", data: rows.map((r) => r.deviceHoursIdle), backgroundColor: color(4), stack: "held" },
    ] },
    options: { plugins: { title: { display: true, text: `Device-hours held, per ${noun}` } }, scales: { x: { stacked: true }, y: { stacked: true, title: { display: true, text: "device-hours" } } } },
  };
  return html`<div class="charts">
    <${ChartBox} spec=${waits} label="wait p50 and p95 per group" />
    <${ChartBox} spec=${hours} label="device-hours in use and idle per group" />
  </div>`;
}

function BucketCharts({ rows, many, bucket }) {
  const times = [...new Set(rows.map((r) => r.since))].sort();
  const groups = [...new Set(rows.map((r) => label(r, many)))];
  const series = (field) => groups.map((g, i) => ({
    label: g,
    borderColor: color(i),
    backgroundColor: color(i),
    data: times.map((t) => {
      const row = rows.find((r) => r.since === t && label(r, many) === g);
      return row ? row[field] ?? 0 : 0;
    }),
  }));
  const labels = times.map((t) => instant(t).slice(5, 16));
  const line = (title, field, unit) => ({
    type: "line",
    data: { labels, datasets: series(field) },
    options: { plugins: { title: { display: true, text: `${title}, per ${bucket}` } }, scales: { y: { title: { display: true, text: unit } } } },
  });
  return html`<div class="charts">
    <${ChartBox} spec=${line("Wait p95", "waitP95Seconds", "seconds")} label="wait p95 over time" />
    <${ChartBox} spec=${line("Device-hours held idle", "deviceHoursIdle", "device-hours")} label="idle device-hours over time" />
  </div>`;
}

function Table({ rows, many }) {
  return html`<table class="list" data-rows=${rows.length}>
    <thead><tr><th>group</th><th class="num" title="served waits (allocated) that began while the mirror watched: the wait figures are over these">claims waited</th><th class="num" title="waits that ended with the claim deleted or no pod needing it">abandoned</th><th class="num">wait p50</th><th class="num">wait p95</th><th class="num">longest</th>
      <th class="num">peak pending</th><th class="num">device-hours available</th><th class="num">allocated</th><th class="num">held idle</th><th class="num" title="allocated / available device-hours: every device counts, a partition as much as a GPU">utilization (devices)</th>
      <th class="num" title="GPU-equivalent-hours: a GPU counts once, a partition its share of the GPU's memory slices">GPU-equivalent-hours available</th><th class="num">GPU-equivalent-hours allocated</th><th class="num">GPU utilization</th></tr></thead>
    <tbody>${rows.map((r) => html`<tr key=${`${r.cluster}/${r.group}`} data-group=${`${r.cluster}/${r.group}`}>
      <td class="mono">${label(r, many)}</td>
      <td class="num" data-field="claimsWaited">${number(r.claimsWaited)}</td>
      <td class="num" data-field="claimsAbandoned">${number(r.claimsAbandoned)}</td>
      <td class="num" data-field="waitP50Seconds">${duration(r.waitP50Seconds)}</td>
      <td class="num" data-field="waitP95Seconds">${duration(r.waitP95Seconds)}</td>
      <td class="num">${duration(r.waitMaxSeconds)}</td>
      <td class="num">${number(r.peakPending)}</td>
      <td class="num">${r.deviceHoursAvailable === null ? "—" : number(r.deviceHoursAvailable, 1)}</td>
      <td class="num">${number(r.deviceHoursAllocated, 1)}</td>
      <td class="num" data-field="deviceHoursIdle">${number(r.deviceHoursIdle, 2)}</td>
      <td class="num">${r.utilization === null ? "—" : `${number(r.utilization, 1)} %`}</td>
      <td class="num">${r.gpuHoursAvailable === null ? "—" : number(r.gpuHoursAvailable, 2)}</td>
      <td class="num">${number(r.gpuHoursAllocated, 2)}</td>
      <td class="num" data-field="gpuUtilization">${r.gpuUtilization === null ? "—" : `${number(r.gpuUtilization, 1)} %`}</td>
    </tr>`)}</tbody></table>`;
}

const cost = (value, currency) => (value === null ? "—" : `${number(value, 2)} ${currency}`);

function Chargeback({ rows, many, byTeam }) {
  if (!rows.length) return html`<p class="muted">No GPU was held in this window.</p>`;
  const priced = rows.some((r) => r.currency !== null);
  return html`<table class="list" data-chargeback=${rows.length}>
    <thead><tr><th>${byTeam ? "team" : "namespace"}</th>${byTeam ? null : html`<th>team</th>`}
      <th class="num" title="GPU-equivalent-hours allocated: a whole GPU 1 per hour, a MIG partition its share of the GPU's memory slices, a share its consumed capacity">GPU-equivalent-hours held</th>
      <th class="num" title="held minus idle-held: while a consumer pod ran">in use</th><th class="num">held idle</th>
      <th class="num" title="each hold's GPU-equivalent-hours times the price per GPU-hour of its device's model, else its class, else the default">cost held</th><th class="num">cost in use</th></tr></thead>
    <tbody>${rows.map((r) => html`<tr key=${`${r.cluster}/${r.group}`} data-charge=${`${r.cluster}/${r.group}`}>
      <td class="mono">${label(r, many)}</td>${byTeam ? null : html`<td>${r.team}</td>`}
      <td class="num" data-field="gpuHoursHeld">${number(r.gpuHoursHeld, 2)}</td>
      <td class="num" data-field="gpuHoursInUse">${number(r.gpuHoursInUse, 2)}</td>
      <td class="num">${number(Math.max(0, r.gpuHoursHeld - r.gpuHoursInUse), 2)}</td>
      <td class="num" data-field="costHeld">${cost(r.costHeld, r.currency)}</td>
      <td class="num" data-field="costInUse">${cost(r.costInUse, r.currency)}</td>
    </tr>`)}</tbody></table>
    ${priced ? null : html`<p class="muted small" data-unpriced>No price table is configured (DRA_MIRROR_HISTORY_PRICES): hours only.</p>`}`;
}

export function Contention({ params }) {
  const groupBy = params.groupBy === "NAMESPACE" ? "NAMESPACE" : "CLASS";
  const windowName = WINDOW_DAYS[params.window] ? params.window : "7d";
  const bucket = ["1h", "6h", "1d"].includes(params.bucket) ? params.bucket : null;
  const span = auditWindow(WINDOW_DAYS[windowName]);
  const cluster = params.cluster || null;
  const totals = useQuery(AUDIT, { ...span, groupBy, bucket: null, cluster });
  const buckets = useQuery(AUDIT, bucket ? { ...span, groupBy, bucket, cluster } : null);
  const context = useQuery(CONTEXT, { ...span, cluster });
  const chargeBy = params.chargeBy === "TEAM" ? "TEAM" : "NAMESPACE";
  const charges = useQuery(CHARGEBACK, { ...span, groupBy: chargeBy, cluster });
  const rows = totals.data ? totals.data.contention : null;
  const many = rows ? new Set(rows.map((r) => r.cluster)).size > 1 : false;
  const filters = [
    { name: "groupBy", label: "per", options: [["CLASS", "device class"], ["NAMESPACE", "namespace"]] },
    { name: "window", label: "window", options: [["7d", "last 7 days"], ["1d", "last day"], ["30d", "last 30 days"]] },
    { name: "bucket", label: "over time", options: [["", "whole window"], ["1h", "per hour"], ["6h", "per 6 hours"], ["1d", "per day"]] },
  ];
  const gaps = context.data ? context.data.historyGaps : [];
  return html`<${Screen} name="contention" title="Contention" ready=${!!rows || !!totals.error} error=${totals.error}>
    <${Filters} screen="contention" params=${params} fields=${filters} />
    <p class="muted small">From ${instant(span.from)} to ${instant(span.to)}${cluster ? ` in ${cluster}` : ", every cluster"}.</p>
    ${gaps.length ? html`<div class="notice" data-gaps=${gaps.length}>History has gaps in this window (clusters not watched): ${gaps.map((g) => `${g.cluster} ${instant(g.since)} – ${instant(g.until)}`).join("; ")}. Figures there are missing, not zero.</div>` : null}
    ${!rows && !totals.error ? html`<${Loading} what="Auditing history" />` : null}
    ${rows && rows.length === 0 ? html`<p class="muted">Nothing in this window.</p>` : null}
    ${rows && rows.length ? html`<${WindowCharts} rows=${rows} many=${many} groupBy=${groupBy} />` : null}
    ${bucket && buckets.data && buckets.data.contention.length ? html`<${BucketCharts} rows=${buckets.data.contention} many=${many} bucket=${bucket} />` : null}
    <${ErrorNote} what="over time" error=${buckets.error} />
    ${rows && rows.length ? html`<${Table} rows=${rows} many=${many} />` : null}
    <h2>Chargeback in GPU-equivalent-hours</h2>
    <${Filters} screen="contention" params=${params} fields=${[{ name: "chargeBy", label: "per", options: [["NAMESPACE", "namespace"], ["TEAM", "team"]] }]} />
    <${ErrorNote} what="chargeback" error=${charges.error} />
    ${charges.data ? html`<${Chargeback} rows=${charges.data.chargeback} many=${!cluster && new Set(charges.data.chargeback.map((r) => r.cluster)).size > 1} byTeam=${chargeBy === "TEAM"} />` : null}
    <h2>Idle holders in this window</h2>
    <${ErrorNote} what="idle holders" error=${context.error} />
    ${context.data ? (context.data.idleHolders.length
      ? html`<table class="list" data-idle-holders=${context.data.idleHolders.length}>
          <thead><tr><th>claim</th><th class="num">device-hours idle</th><th class="num">held</th><th class="num">devices</th></tr></thead>
          <tbody>${context.data.idleHolders.map((h) => html`<tr key=${`${h.cluster}/${h.namespace}/${h.claim}`}>
            <td><${ClaimLink} cluster=${h.cluster} namespace=${h.namespace} name=${h.claim} showCluster=${!cluster} /></td>
            <td class="num">${number(h.deviceHoursIdle, 2)}</td><td class="num">${number(h.deviceHoursHeld, 2)}</td><td class="num">${h.devices}</td>
          </tr>`)}</tbody></table>`
      : html`<p class="muted">No claim held devices idle.</p>`) : null}
  <//>`;
}

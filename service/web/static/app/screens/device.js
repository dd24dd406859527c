// A device's page: the device as published (attributes, capacity, status), who holds it now
// and since when, and a timeline of its holders over the last days (history), with how busy
// it was (the history's five-minute buckets) when the server has a utilisation source.
import { useLive, useNow, useQuery, useThrottled } from "../hooks.js";
import { duration, instant } from "../format.js";
import { Timeline } from "../charts.js";
import { Attributes, Badge, ClaimLink, ClaimState, DeviceStatus, ErrorNote, KeyValues, Link, Loading, NodeName, PodLink, PodPhase, Screen, href, html, useState } from "../ui.js";
import { DEVICE_FIELDS, Withheld } from "./slices.js";
import { capacityText } from "./slice_groups.js";
import { Health, NotPublished, Taints } from "./device_facts.js";

const ON_NODE = `query DeviceOnNode($cluster: String!, $node: String!, $driver: String!) {
  devices(cluster: $cluster, node: $node, driver: $driver, first: 1000) { nodes { ...SliceDevice } }
}
${DEVICE_FIELDS}`;
const HOLDERS = `query DeviceHolders($cluster: String!, $spec: String!) {
  whoHolds(device: $spec, cluster: $cluster) {
    request shareID consumedCapacity since
    claim { cluster namespace name state idle idleSince origin }
    pods { cluster namespace name phase nodeName }
    device { ...SliceDevice allocations { request shareID health { container health message } } }
  }
}
${DEVICE_FIELDS}`;
const TIMELINE = `query DeviceTimeline($cluster: String!, $spec: String!, $from: DateTime!, $to: DateTime!) {
  deviceHistory(device: $spec, from: $from, to: $to, cluster: $cluster) {
    uuid
    inventory { driver pool device node since until endReason }
    allocations { driver pool device namespace claim request shareID since until endReason pods { name since until } }
  }
}`;
export const DEVICE_BUSY = `query DeviceBusy($cluster: String!, $driver: String!, $pool: String!, $device: String!, $from: DateTime!, $to: DateTime!) {
  deviceUtilizationHistory(cluster: $cluster, driver: $driver, pool: $pool, device: $device, from: $from, to: $to) { start busy }
}`;
const LIVE = `subscription DeviceLive($cluster: String!, $node: String) {
  deviceEvents(cluster: $cluster, node: $node) {
    type old { device { driver pool name } } new { device { driver pool name } }
  }
}`;
export const WINDOWS = { "1d": 1, "7d": 7, "30d": 30 };

// The window ends at the next whole minute (one cache key per minute, not per render).
function useTimeline(cluster, spec, windowName, refresh, valid) {
  const to = new Date(Math.ceil(Date.now() / 60000) * 60000);
  const from = new Date(to.getTime() - WINDOWS[windowName] * 86400000);
  const result = useQuery(TIMELINE, valid ? { cluster, spec, from: from.toISOString(), to: to.toISOString() } : null, refresh);
  return { ...result, from, to };
}

// The device's busy line over the window: [] without a utilisation source (UTILIZATION_DISABLED).
export function busyLines(busy, label) {
  if (!busy.data) return [];
  return [{ label, points: busy.data.deviceUtilizationHistory }];
}
export const disabled = (error) => !!(error && error.codes && error.codes.includes("UTILIZATION_DISABLED"));

// When the API server gives no allocation time, history knows when the hold began.
function heldSince(holding, timeline) {
  if (holding.since) return { at: holding.since, source: null };
  const open = timeline.data
    ? timeline.data.deviceHistory.flatMap((t) => t.allocations).find((a) => !a.until && a.namespace === holding.claim.namespace && a.claim === holding.claim.name)
    : null;
  return open ? { at: open.since, source: "history" } : null;
}

// The chart starts where the window's history does (a device first seen an hour ago is not
// drawn as a sliver at the end of seven empty days).
function chartStart(windowStart, spans) {
  const earliest = Math.min(...spans.map((s) => Date.parse(s.since)));
  const now = Date.now();
  return Math.max(windowStart, earliest - Math.max(60000, (now - earliest) * 0.05));
}

function History({ cluster, windowName, timeline, busy, name }) {
  const { data, error, from } = timeline;
  if (error) return html`<p class="muted" data-history="unavailable">History is not available: ${error.message}</p>`;
  if (!data) return html`<${Loading} what="Reading history" />`;
  const allocations = data.deviceHistory.flatMap((t) => t.allocations);
  const inventory = data.deviceHistory.flatMap((t) => t.inventory);
  if (!allocations.length && !inventory.length) return html`<p class="muted" data-history="empty">No history for this device in the last ${windowName}.</p>`;
  const rows = allocations.map((a) => ({ label: `${a.namespace}/${a.claim}`, since: a.since, until: a.until, kind: a.until ? "held" : "held now" }));
  return html`<div data-history="loaded" data-holdings=${allocations.length}>
    <${Timeline} rows=${rows} from=${chartStart(from.getTime(), [...allocations, ...inventory])} to=${Date.now()} label="holders over time" lines=${busyLines(busy, name)} />
    ${disabled(busy.error) ? null : html`<${ErrorNote} what="utilisation" error=${busy.error} />`}
    <table class="list">
      <thead><tr><th>claim</th><th>request</th><th>from</th><th>until</th><th>held for</th><th>pods</th></tr></thead>
      <tbody>${allocations.slice().sort((a, b) => Date.parse(b.since) - Date.parse(a.since)).map((a, i) => html`<tr key=${i} data-holding=${`${a.namespace}/${a.claim}`}>
        <td><${ClaimLink} cluster=${cluster} namespace=${a.namespace} name=${a.claim} /></td>
        <td class="mono">${a.request}${a.shareID ? html` <span class="muted small">share ${a.shareID.slice(0, 8)}</span>` : null}</td>
        <td class="mono small">${instant(a.since)}</td>
        <td class="mono small">${a.until ? html`${instant(a.until)} <span class="muted">(${a.endReason})</span>` : html`<${Badge} kind="info">held now<//>`}</td>
        <td>${duration(((a.until ? Date.parse(a.until) : Date.now()) - Date.parse(a.since)) / 1000)}</td>
        <td class="small">${a.pods.map((p) => p.name).join(", ") || html`<span class="muted">none</span>`}</td>
      </tr>`)}</tbody>
    </table>
    <h3>Published</h3>
    <ul class="timeline">${inventory.map((v, i) => html`<li key=${i}><span class="mono small">${instant(v.since)}</span> ${v.driver}/${v.pool}/${v.device} on ${v.node || "no node"}${v.until ? ` until ${instant(v.until)} (${v.endReason})` : " — published now"}</li>`)}</ul>
  </div>`;
}

// The health the consumer pods' kubelets report, per allocation result holding the device.
function healthRows(holdings) {
  const allocations = holdings && holdings.length ? holdings[0].device.allocations : [];
  if (!allocations.length) return null;
  return ["health", html`<div data-device-health=${allocations.length}>${allocations.map((a, i) => html`<div key=${i}>
    ${a.claim ? html`<span class="mono small">${a.claim.namespace}/${a.claim.name}</span> ` : null}<${Health} reports=${a.health} />
  </div>`)}</div>`];
}

// How long a holder has held the device, counting while the page stays open (only this cell
// re-renders each second, not the charts).
function HeldFor({ held }) {
  const now = useNow(1000);
  return html`<span class="muted small">(${duration((now - Date.parse(held.at)) / 1000)}${held.source ? `, from ${held.source}` : ""})</span>`;
}

export function DevicePage({ params }) {
  const { cluster, driver, pool, device: name, node } = params;
  const windowName = WINDOWS[params.window] ? params.window : "7d";
  const valid = cluster && driver && pool && name;
  const spec = `${driver}/${pool}/${name}`;
  const [refresh, setRefresh] = useState(0);
  const onNode = useQuery(ON_NODE, valid && node ? { cluster, node, driver } : null, refresh);
  const holders = useQuery(HOLDERS, valid ? { cluster, spec } : null, refresh);
  const bump = useThrottled(() => setRefresh((n) => n + 1), 1000);
  const mine = (d) => d && d.device.driver === driver && d.device.pool === pool && d.device.name === name;
  useLive(valid ? [{ document: LIVE, variables: { cluster, node: node || null } }] : [],
    (data) => { if (mine(data.deviceEvents.old) || mine(data.deviceEvents.new)) bump(); }, bump);
  const timeline = useTimeline(cluster, spec, windowName, refresh, valid);
  const busy = useQuery(DEVICE_BUSY, valid ? { cluster, driver, pool, device: name, from: timeline.from.toISOString(), to: timeline.to.toISOString() } : null, refresh);
  const holdings = holders.data ? holders.data.whoHolds.filter((h) => h.claim) : null; // null claim: deleted since read
  const published = onNode.data ? onNode.data.devices.nodes.find((d) => d.pool === pool && d.name === name) : null;
  const device = published || (holdings && holdings.length ? holdings[0].device : null);
  const ready = holders.data && (!node || onNode.data);
  return html`<${Screen} name="device" title=${valid ? `Device ${name}` : "Device"} ready=${!!ready} error=${holders.error || onNode.error}>
    ${!valid ? html`<p class="error">A device's page needs cluster, driver, pool and device.</p>` : null}
    ${valid && !ready ? html`<${Loading} />` : null}
    ${ready && !device ? html`<p class="muted" data-missing="true">${node ? `No device ${spec} is published on ${node} now.` : "Not held now, and no node given to find it by."}</p>` : null}
    ${device ? html`<section class="card" data-device=${`${cluster}/${driver}/${pool}/${name}`} data-status=${device.status}>
      <${KeyValues} rows=${[
        ["cluster", cluster],
        ["driver / pool", html`<span class="mono">${driver} / ${pool}</span>`],
        ["node", html`<${NodeName} cluster=${cluster} node=${device.nodeName} />`],
        ["uuid", html`<span class="mono">${device.uuid || "—"}</span>`],
        ["status", html`<${DeviceStatus} status=${device.status} />${device.shareable ? html` <${Badge} kind="share">Shareable<//>` : null}`],
        ["slice", device.slice
          ? html`<span class="mono small">${device.slice.name}</span> (generation ${device.slice.pool.generation}${device.slice.pool.complete ? ", complete" : ", incomplete"})`
          : html`<span class="muted">none now</span>`],
        ["capacity", capacityText(device)],
        ["taints", html`<${Taints} taints=${device.taints} />`],
        healthRows(holdings),
      ]} />
      ${!device.published
        ? html`<${NotPublished} cluster=${cluster} driver=${driver} pool=${pool} name=${name} node=${device.nodeName}
            holders=${(holdings || []).map((h) => h.claim)} />`
        : null}
      <${Attributes} attributes=${device.attributes} />
    </section>` : null}
    <h2>Held by now</h2>
    ${holdings && holdings.length === 0 && !(device && device.withheldAllocations) ? html`<p class="muted" data-holders="0">Nobody holds it.</p>` : null}
    ${holdings && holdings.length === 0 && device && device.withheldAllocations
      ? html`<p class="withheld" data-holders="withheld" data-withheld=${device.withheldAllocations}>Held in another namespace: the holder is a claim your access does not show${device.withheldAllocations > 1 ? ` (${device.withheldAllocations} allocations)` : ""}.</p>`
      : null}
    ${holdings && holdings.length ? html`<table class="list" data-holders=${holdings.length}>
      <thead><tr><th>claim</th><th>state</th><th>since</th><th>request / share</th><th>pods</th></tr></thead>
      <tbody>${holdings.map((h, i) => html`<tr key=${i} data-holder=${`${h.claim.namespace}/${h.claim.name}`}>
        <td><${ClaimLink} cluster=${h.claim.cluster} namespace=${h.claim.namespace} name=${h.claim.name} /></td>
        <td><${ClaimState} state=${h.claim.state} />${h.claim.idle ? html` <${Badge} kind="bad">idle: cleanup candidate<//>` : null}</td>
        <td>${((held) => held
          ? html`${instant(held.at)} <${HeldFor} held=${held} />`
          : html`<span class="muted">—</span>`)(heldSince(h, timeline))}</td>
        <td class="mono small">${h.request}${h.shareID ? ` · ${h.shareID.slice(0, 8)}` : ""}${Object.keys(h.consumedCapacity || {}).length ? ` · ${Object.entries(h.consumedCapacity).map(([k, v]) => `${k.split("/").pop()} ${v}`).join(", ")}` : ""}</td>
        <td>${h.pods.length ? h.pods.map((p) => html`<div key=${p.name}><${PodLink} cluster=${p.cluster} namespace=${p.namespace} name=${p.name} node=${p.nodeName} /> <${PodPhase} phase=${p.phase} /></div>`) : html`<span class="muted">none</span>`}</td>
      </tr>`)}</tbody></table>` : null}
    ${holdings && holdings.length && device ? html`<${Withheld} count=${device.withheldAllocations} />` : null}
    <${ErrorNote} what="holders" error=${holders.error} />
    <h2>Holders over the last ${windowName}
      ${Object.keys(WINDOWS).map((w) => html` <${Link} key=${w} to=${href("device", { ...params, window: w })} className=${w === windowName ? "badge badge-info" : "badge"}>${w}<//>`)}</h2>
    ${valid ? html`<${History} cluster=${cluster} windowName=${windowName} timeline=${timeline} busy=${busy} name=${name} />` : null}
  <//>`;
}

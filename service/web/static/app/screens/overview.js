// Overview: per cluster, what its devices and claims are doing now, and what looks wrong.
import { query } from "../graphql.js";
import { useLive, useQuery, useThrottled } from "../hooks.js";
import { duration, number, since } from "../format.js";
import { Badge, ErrorNote, Gap, Link, Loading, Screen, href, html, useEffect, useState } from "../ui.js";

const OVERVIEW = `query Overview {
  clusters { name status { connected synced apiVersion draServed draVersions lastEventAt lastSyncAt error malformed } }
}`;
// First the totals (no device status needed: cheap at any size), then each status count
// (each scans every device's status: ~200 ms at 40,000 devices).
const TOTALS = `query OverviewTotals($cluster: String!) {
  devices(cluster: $cluster, first: 0) { totalCount }
  claims: resourceClaims(cluster: $cluster, first: 0) { totalCount }
  pending: resourceClaims(cluster: $cluster, state: PENDING, first: 0) { totalCount }
}`;
// After the totals (pool status reads every slice and claim of the cluster).
const UNAVAILABLE = `query OverviewUnavailable($cluster: String!) {
  unpublished: devices(cluster: $cluster, published: false, first: 0) { totalCount }
  pools: resourcePools(cluster: $cluster) { unavailableDevices }
}`;
// Physical devices (a GPU with its partitions is one), per driver: what people count and buy.
// (Every cluster the asker sees, filtered here: a cluster outside the scope is no error.)
const PHYSICAL = `query OverviewPhysical {
  capacity {
    cluster driver type physical physicalFree physicalWhole physicalPartitioned physicalShared heldEquivalents
    partitionedDevices { physical node state heldEquivalents inUse }
  }
}`;
const DEVICES_BY_STATUS = `query DevicesByStatus($cluster: String!, $status: DeviceStatus!) {
  devices(cluster: $cluster, status: $status, first: 0) { totalCount }
}`;
const IDLE_HOLDERS = `query IdleHolderCount($cluster: String!) {
  resourceClaims(cluster: $cluster, idle: true, first: 0) { totalCount }
}`;
const PENDING_AGES = `query PendingAges($cluster: String!, $after: String) {
  resourceClaims(cluster: $cluster, state: PENDING, first: 1000, after: $after) {
    totalCount pageInfo { hasNextPage endCursor } nodes { pendingSeconds }
  }
}`;
const FINDINGS = `query ClusterFindings($cluster: String!) {
  lint(cluster: $cluster) { rule severity object message }
}`;
const LIVE_CLAIMS = `subscription OverviewClaims($cluster: String!) { claimEvents(cluster: $cluster) { type } }`;
const LIVE_DEVICES = `subscription OverviewDevices($cluster: String!) { deviceEvents(cluster: $cluster) { type } }`;
const MAX_PENDING_PAGES = 5;

// How long the pending claims have waited: every page of their ages (at most 5,000 claims).
function usePendingAges(cluster, refresh) {
  const [state, setState] = useState(null);
  useEffect(() => {
    let cancelled = false;
    (async () => {
      let after = null;
      const ages = [];
      let total = 0;
      let more = false;
      for (let page = 0; page < MAX_PENDING_PAGES; page += 1) {
        const data = await query(PENDING_AGES, { cluster, after });
        const connection = data.resourceClaims;
        total = connection.totalCount;
        ages.push(...connection.nodes.map((n) => n.pendingSeconds).filter((s) => s !== null));
        more = connection.pageInfo.hasNextPage;
        if (!more) break;
        after = connection.pageInfo.endCursor;
      }
      if (!cancelled) setState({ total, longest: ages.length ? Math.max(...ages) : null, read: ages.length, more, error: null });
    })().catch((error) => !cancelled && setState({ error }));
    return () => { cancelled = true; };
  }, [cluster, refresh]);
  return state;
}

function StatusCount({ cluster, status, refresh, onLoaded }) {
  const { data, error } = useQuery(DEVICES_BY_STATUS, { cluster, status }, refresh);
  useEffect(() => { if (data) onLoaded(status, data.devices.totalCount); }, [data]);
  if (error) return html`<span class="error-inline">${error.message}</span>`;
  if (!data) return html`<span class="muted">…</span>`;
  return html`<${Link} to=${href("slices", { cluster, status })} data-count=${`devices-${status.toLowerCase()}`}>${number(data.devices.totalCount)}<//>`;
}

const PHYSICAL_NOUNS = { gpu: "GPUs", nic: "NICs" };

function PhysicalDevices({ cluster, refresh }) {
  const { data, error } = useQuery(PHYSICAL, {}, refresh);
  if (error) return html`<span class="error-inline">${error.message}</span>`;
  if (!data) return html`<span class="muted">…</span>`;
  const rows = data.capacity.filter((r) => r.cluster === cluster && r.physical > 0);
  if (!rows.length) return html`<span class="muted">none</span>`;
  return html`<table class="figures-table"><tbody>${rows.map((r) => {
    const noun = PHYSICAL_NOUNS[r.type] || `${r.type} devices`;
    const held = Number(r.heldEquivalents.toFixed(3));
    return html`<tr data-physical=${r.type}><th title=${`${r.driver}: a GPU and its partitions count once`}>${noun}</th>
      <td><span data-count=${`physical-${r.type}`}>${number(r.physical)}</span>: ${number(r.physicalFree)} free,
        ${number(r.physicalWhole)} in use whole, ${number(r.physicalPartitioned)} partitioned, ${number(r.physicalShared)} shared
        <span class="muted" title="a whole device 1, a partition its share of the GPU's memory slices, a share its consumed capacity">(${held} ${r.type === "gpu" ? "GPU" : noun}-equivalents held)</span>
        ${r.partitionedDevices.length ? html`<ul class="small">${r.partitionedDevices.map((p) => html`<li>${p.physical}${p.node ? ` on ${p.node}` : ""} ${p.state}: ${p.inUse.join(", ")}</li>`)}</ul>` : null}</td></tr>`;
  })}</tbody></table>`;
}

function ClusterCard({ cluster, refresh, onTotals }) {
  const { name, status } = cluster;
  const totals = useQuery(TOTALS, { cluster: name }, refresh);
  useEffect(() => { if (totals.data || totals.error) onTotals(name); }, [totals.data, totals.error]);
  if (!totals.data) {
    return html`<section class="card cluster-card" data-cluster=${name} data-complete="false">
      <header><h2>${name}</h2></header>${totals.error ? html`<${ErrorNote} error=${totals.error} />` : html`<${Loading} />`}</section>`;
  }
  return html`<${ClusterFigures} cluster=${cluster} totals=${totals.data} refresh=${refresh} />`;
}

function ClusterFigures({ cluster, totals, refresh }) {
  const { name, status } = cluster;
  const counts = { devices: totals.devices.totalCount, claims: totals.claims.totalCount, pendingClaims: totals.pending.totalCount };
  const unavailable = useQuery(UNAVAILABLE, { cluster: name }, refresh);
  const tainted = unavailable.data ? unavailable.data.pools.reduce((sum, p) => sum + (p.unavailableDevices || 0), 0) : null;
  const unpublished = unavailable.data ? unavailable.data.unpublished.totalCount : null;
  const [loaded, setLoaded] = useState({});
  const noteLoaded = (what, value) => setLoaded((previous) => ({ ...previous, [what]: value }));
  const idle = useQuery(IDLE_HOLDERS, { cluster: name }, refresh);
  const pending = usePendingAges(name, refresh);
  const findings = useQuery(FINDINGS, { cluster: name }, refresh);
  const idleCount = idle.data ? idle.data.resourceClaims.totalCount : null;
  const complete = ["FREE", "HELD", "SHARED", "BLOCKED"].every((s) => s in loaded) && idle.data && pending && findings.data && unavailable.data;
  const withoutDriver = findings.data ? findings.data.lint.filter((f) => f.rule === "gpu-node-without-driver") : [];
  const others = findings.data ? findings.data.lint.filter((f) => f.rule !== "gpu-node-without-driver") : [];
  const waiting = counts.pendingClaims > 0;
  return html`<section class="card cluster-card" data-cluster=${name} data-complete=${complete ? "true" : "false"}>
    <header>
      <h2><${Link} to=${href("overview", { cluster: name })}>${name}<//></h2>
      ${status.apiVersion
        ? html`<${Badge} kind="info">resource.k8s.io/${status.apiVersion}<//>`
        : status.draServed === false
          ? html`<${Badge} kind="warn" data-dra="not-served">DRA not served (resource.k8s.io: ${(status.draVersions || []).join(", ") || "none"})<//>`
          : html`<${Badge} kind="warn">DRA version not known yet<//>`}
      ${status.connected ? html`<${Badge} kind="ok">connected<//>` : html`<${Badge} kind="bad">not connected<//>`}
      ${status.synced ? html`<${Badge} kind="ok">synced<//>` : html`<${Badge} kind="warn">not synced<//>`}
    </header>
    ${status.error ? html`<div class="error">${status.error}</div>` : null}
    <p class="muted small">last event ${since(status.lastEventAt)} · last list ${since(status.lastSyncAt)}
      ${Object.entries(status.malformed || {}).map(([kind, n]) => html` · <span class="warn-text">${n} malformed ${kind}</span>`)}</p>
    <div class="figures">
      <div class="figure-group">
        <h3>Physical devices</h3>
        <${PhysicalDevices} cluster=${name} refresh=${refresh} />
      </div>
      <div class="figure-group">
        <h3 title="every device a driver publishes: each partition counts">Devices</h3>
        <table class="figures-table"><tbody>
          <tr><th>total</th><td><${Link} to=${href("slices", { cluster: name })} data-count="devices">${number(counts.devices)}<//></td></tr>
          <tr><th>free</th><td><${StatusCount} cluster=${name} status="FREE" refresh=${refresh} onLoaded=${noteLoaded} /></td></tr>
          <tr><th>held</th><td><${StatusCount} cluster=${name} status="HELD" refresh=${refresh} onLoaded=${noteLoaded} /></td></tr>
          <tr><th>shared</th><td><${StatusCount} cluster=${name} status="SHARED" refresh=${refresh} onLoaded=${noteLoaded} /></td></tr>
          <tr><th title="free themselves, but sibling partitions use their counters">blocked</th><td><${StatusCount} cluster=${name} status="BLOCKED" refresh=${refresh} onLoaded=${noteLoaded} /></td></tr>
          <tr><th title="a NoSchedule or NoExecute taint from their slice: not available to claims that do not tolerate it (pools of complete generations)">tainted</th><td>${tainted === null ? html`<span class="muted">…</span>` : html`<span data-count="devices-tainted">${number(tainted)}</span>`}</td></tr>
          <tr><th title="held by an allocation result, published by no slice now">held, not published</th><td>${unpublished === null ? html`<span class="muted">…</span>` : html`<span data-count="devices-unpublished">${number(unpublished)}</span>`}</td></tr>
        </tbody></table>
      </div>
      <div class="figure-group">
        <h3>Claims</h3>
        <table class="figures-table"><tbody>
          <tr><th>total</th><td><${Link} to=${href("claims", { cluster: name })} data-count="claims">${number(counts.claims)}<//></td></tr>
          <tr><th>pending</th><td><${Link} to=${href("claims", { cluster: name, state: "PENDING" })} data-count="claims-pending">${number(counts.pendingClaims)}<//>
            ${pending && pending.error ? html` <span class="error-inline">${pending.error.message}</span>` : null}
            ${pending && !pending.error && pending.longest !== null
              ? html` <span class="muted" data-longest-pending=${Math.round(pending.longest)}>longest ${duration(pending.longest)}${pending.more ? ` (of the first ${number(pending.read)})` : ""}</span>`
              : null}</td></tr>
          <tr><th>idle holders</th><td>
            ${idle.error ? html`<span class="error-inline">${idle.error.message}</span>` : null}
            ${idleCount === null ? html`<span class="muted">…</span>`
              : html`<${Link} to=${href("claims", { cluster: name, idle: "true" })} data-count="claims-idle">${number(idleCount)}<//>
                ${idleCount > 0 && waiting ? html` <${Badge} kind="bad" title="allocated with no running pod while other claims wait">cleanup candidates while ${number(counts.pendingClaims)} wait<//>` : null}`}
          </td></tr>
        </tbody></table>
      </div>
    </div>
    ${counts.devices === 0
      ? html`<div class="notice" data-empty="devices"><strong>The device list is empty.</strong> No DRA driver publishes ResourceSlices in this cluster: check that the driver is installed and its pods run on the GPU nodes, and that the cluster serves resource.k8s.io.</div>`
      : null}
    ${findings.error ? html`<${ErrorNote} what="findings" error=${findings.error} />` : null}
    ${withoutDriver.length
      ? html`<div class="notice" data-finding="gpu-node-without-driver"><strong>GPU nodes without DRA devices (${withoutDriver.length}):</strong> ${withoutDriver.slice(0, 10).map((f) => f.object.replace(/^Node /, "")).join(", ")}${withoutDriver.length > 10 ? ", …" : ""} — the driver is not installed there, or not running.</div>`
      : null}
    ${others.length
      ? html`<details class="findings"><summary>${others.length} other finding${others.length === 1 ? "" : "s"}</summary><ul>
          ${others.slice(0, 20).map((f, i) => html`<li key=${i}><${Badge} kind=${f.severity === "ERROR" ? "bad" : "warn"}>${f.rule}<//> <span class="mono">${f.object}</span>: ${f.message}</li>`)}
        </ul></details>`
      : null}
  </section>`;
}

export function Overview({ params, clusters }) {
  const [refresh, setRefresh] = useState(0);
  const { data, error } = useQuery(OVERVIEW, {}, refresh);
  const shown = data ? data.clusters.filter((c) => !params.cluster || c.name === params.cluster) : null;
  const [withTotals, setWithTotals] = useState(() => new Set());
  const noteTotals = (name) => setWithTotals((seen) => (seen.has(name) ? seen : new Set([...seen, name])));
  // Drawn once every card shows its totals; the per-status counts fill in after.
  const ready = !!shown && shown.every((c) => withTotals.has(c.name));
  const bump = useThrottled(() => setRefresh((n) => n + 1), 3000);
  const names = (clusters || []).map((c) => c.name).filter((n) => !params.cluster || n === params.cluster);
  useLive(
    names.flatMap((cluster) => [
      { document: LIVE_CLAIMS, variables: { cluster } },
      { document: LIVE_DEVICES, variables: { cluster } },
    ]),
    bump,
    bump,
  );
  return html`<${Screen} name="overview" title=${params.cluster ? `Overview: ${params.cluster}` : "Overview"} ready=${ready} error=${error}>
    ${!data && !error ? html`<${Loading} />` : null}
    ${shown && shown.length === 0 ? html`<p class="muted">No cluster named ${params.cluster} is mirrored.</p>` : null}
    <div class="cards">${(shown || []).map((c) => html`<${ClusterCard} key=${c.name} cluster=${c} refresh=${refresh} onTotals=${noteTotals} />`)}</div>
  <//>`;
}

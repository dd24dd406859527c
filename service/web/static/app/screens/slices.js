// Resource Slices: the devices drivers publish, a page at a time, grouped by pool (driver,
// node, generation, complete or not) and, for partitionable GPUs, by the counter set the
// partitions share — so MIG partitions sit under their GPU with what blocks what.
import { query } from "../graphql.js";
import { useLive, useQuery, useThrottled } from "../hooks.js";
import { attribute } from "../format.js";
import { Attributes, Badge, ClaimLink, DeviceLink, DeviceStatus, ErrorNote, Filters, Loading, NodeName, Pager, Screen, html, useEffect, useState } from "../ui.js";
import { blockers, capacityText, groupPools } from "./slice_groups.js";

// A page of devices: 100 (each costs the server its status, holders and slice), or a whole
// node's (at most a few hundred, read through the node's reverse map) when one node is asked.
export const PAGE_SIZE = 100;
export const NODE_PAGE_SIZE = 500;

export const DEVICE_FIELDS = `fragment SliceDevice on Device {
  cluster driver pool name uuid nodeName status shareable published attributes consumesCounters taints
  capacity { name value requestPolicy { default validValues validRange { min max step } } }
  remainingCapacity { name value }
  slice { name nodeName allNodes pool { name generation resourceSliceCount complete } }
  allocations { request shareID consumedCapacity claim { cluster namespace name state idle } }
  withheldAllocations
}`;
const DEVICES = `query SliceDevices($cluster: String, $node: String, $driver: String, $className: String,
    $status: DeviceStatus, $first: Int, $after: String) {
  devices(cluster: $cluster, node: $node, driver: $driver, className: $className, status: $status,
          first: $first, after: $after) {
    totalCount pageInfo { hasNextPage endCursor } nodes { ...SliceDevice }
  }
}
${DEVICE_FIELDS}`;
const NODE_SLICES = `query NodeSlices($cluster: String!, $node: String!) {
  resourceSlices(cluster: $cluster, node: $node) { name driver pool { name generation } sharedCounters }
}`;
// KEP-5677's pool status, asked once the page is drawn (it reads every slice and claim of
// the cluster: ~0.2 s at 40,000 devices).
const POOL_STATUS = `query PoolStatus($cluster: String, $driver: String) {
  resourcePools(cluster: $cluster, driver: $driver) {
    cluster driver poolName generation totalDevices allocatedDevices availableDevices unavailableDevices validationError
  }
}`;
const LIVE_DEVICES = `subscription SlicesLive($cluster: String!, $node: String) { deviceEvents(cluster: $cluster, node: $node) { type } }`;

// The slices of the nodes whose pools share counters (for what the partitions may use).
function useNodeSlices(devices) {
  const wanted = devices
    ? [...new Set(devices.filter((d) => d.nodeName && d.consumesCounters.length).map((d) => `${d.cluster}\u0000${d.nodeName}`))]
    : null;
  const key = wanted ? wanted.join("\u0001") : null;
  const [slices, setSlices] = useState(null);
  useEffect(() => {
    if (key === null) return undefined;
    let cancelled = false;
    Promise.all(wanted.map((w) => {
      const [cluster, node] = w.split("\u0000");
      return query(NODE_SLICES, { cluster, node }).then((data) => data.resourceSlices.map((s) => ({ ...s, cluster, node })));
    })).then((found) => !cancelled && setSlices(found.flat()), () => !cancelled && setSlices([]));
    return () => { cancelled = true; };
  }, [key]);
  return key === null ? null : slices;
}

// Holders outside the viewer's access are not named, only counted: the device is still held.
export function Withheld({ count }) {
  if (!count) return null;
  return html`<div class="withheld small" data-withheld=${count} title="claims in namespaces your access does not show">held in another namespace${count > 1 ? ` (${count})` : ""}</div>`;
}

function Holders({ device }) {
  if (!device.allocations.length && !device.withheldAllocations) return html`<span class="muted">—</span>`;
  return html`${device.allocations.map((a, i) => html`<div key=${i}>
    <${ClaimLink} cluster=${a.claim.cluster} namespace=${a.claim.namespace} name=${a.claim.name} />
    ${a.shareID ? html` <span class="muted small">share ${a.shareID.slice(0, 8)}</span>` : null}
    ${a.claim.idle ? html` <${Badge} kind="bad" title="allocated, no consumer pod Running">idle<//>` : null}
  </div>`)}<${Withheld} count=${device.withheldAllocations} />`;
}

function Kind({ device }) {
  const type = attribute(device, "type");
  const profile = attribute(device, "profile");
  const product = attribute(device, "productName");
  const parts = [type === "mig" ? `MIG ${profile || ""}` : type, type !== "mig" ? product : null].filter(Boolean);
  return html`<span>${parts.join(" · ") || html`<span class="muted">—</span>`}</span>`;
}

function DeviceRows({ devices, group }) {
  return devices.map((d) => {
    const blockedBy = d.status === "BLOCKED" && group ? blockers(d, group) : [];
    return html`<tr key=${`${d.cluster}/${d.driver}/${d.pool}/${d.name}`} data-device=${`${d.cluster}/${d.driver}/${d.pool}/${d.name}`} data-status=${d.status}>
      <td><${DeviceLink} device=${d} /></td>
      <td><${Kind} device=${d} /></td>
      <td class="mono small" title=${d.uuid || ""}>${d.uuid ? (d.uuid.length > 16 ? `${d.uuid.slice(0, 15)}…` : d.uuid) : html`<span class="muted">—</span>`}</td>
      <td><${DeviceStatus} status=${d.status} />${d.taints && d.taints.length ? html` <${Badge} kind="warn" title=${JSON.stringify(d.taints)}>tainted<//>` : null}</td>
      <td><${Holders} device=${d} /></td>
      <td>${blockedBy.length ? blockedBy.map((b) => html`<div key=${b.name}><${DeviceLink} device=${b} /></div>`) : d.status === "BLOCKED" ? html`<span class="muted">sibling partitions</span>` : null}</td>
      <td class="small">${d.shareable ? html`<${Badge} kind="share" title="allowMultipleAllocations">Shareable<//> ` : null}${capacityText(d)}</td>
      <td><${Attributes} attributes=${d.attributes} /></td>
    </tr>`;
  });
}

function DeviceTable({ devices, group }) {
  return html`<table class="list">
    <thead><tr><th>device</th><th>kind</th><th>uuid</th><th>status</th><th>held by</th><th>blocked by</th><th>capacity</th><th>attributes</th></tr></thead>
    <tbody><${DeviceRows} devices=${devices} group=${group} /></tbody>
  </table>`;
}

function CounterGroup({ group }) {
  const gpu = group.gpu;
  const heldPartitions = group.devices.filter((d) => attribute(d, "type") === "mig" && (d.status === "HELD" || d.status === "SHARED"));
  const wholeHeld = gpu && (gpu.status === "HELD" || gpu.status === "SHARED");
  // The GPU and what is held stay in sight; the other partitions fold away.
  const shown = group.devices.filter((d) => d === gpu || d.status === "HELD" || d.status === "SHARED");
  const folded = group.devices.filter((d) => !shown.includes(d));
  return html`<div class=${`gpu-group${heldPartitions.length ? " mig-applied" : ""}`} data-counter-set=${group.counterSet}>
    <header>
      <strong>${gpu ? html`<${DeviceLink} device=${gpu} />` : group.counterSet}</strong>
      ${gpu && gpu.uuid ? html`<span class="mono small">${gpu.uuid}</span>` : null}
      ${gpu ? html`<span class="muted">${attribute(gpu, "productName") || ""}</span>` : null}
      <span class="muted small">counter set ${group.counterSet}</span>
      ${heldPartitions.length
        ? html`<${Badge} kind="share" title="hardware isolation: each partition has its own memory and compute">MIG applied: ${heldPartitions.length} partition${heldPartitions.length === 1 ? "" : "s"} held<//>`
        : wholeHeld ? html`<${Badge} kind="info">whole GPU held<//>` : html`<${Badge} kind="ok">no partition held<//>`}
    </header>
    ${shown.length ? html`<${DeviceTable} devices=${shown} group=${group} />` : null}
    ${folded.length
      ? html`<details class="partitions"><summary>${folded.length} more partition${folded.length === 1 ? "" : "s"} of this GPU
          (${["FREE", "BLOCKED"].map((s) => `${folded.filter((d) => d.status === s).length} ${s.toLowerCase()}`).join(", ")})</summary>
          <${DeviceTable} devices=${folded} group=${group} /></details>`
      : null}
  </div>`;
}

// total / allocated / available / unavailable (tainted) devices of the pool, as the pool
// status request of Kubernetes 1.37 counts them; or why it cannot count (an incomplete pool).
function PoolAvailability({ status }) {
  if (status === undefined) return html`<span class="muted small" data-pool-status="loading">availability…</span>`;
  if (status === null) return null;
  if (status.validationError) return html`<span data-pool-status="not-counted"><${Badge} kind="warn" title=${status.validationError}>not counted: ${status.validationError}<//></span>`;
  return html`<span class="small" data-pool-status=${`${status.totalDevices}/${status.allocatedDevices}/${status.availableDevices}/${status.unavailableDevices}`}
    title="KEP-5677 pool status, in devices as the KEP counts them (each MIG partition is a device; the Overview counts physical GPUs): admin-access results consume nothing, a shared device counts once, a NoSchedule/NoExecute taint makes a device unavailable">
    ${status.totalDevices} devices · ${status.allocatedDevices} allocated · ${status.availableDevices} available${status.unavailableDevices ? html` · <span class="warn-text">${status.unavailableDevices} tainted</span>` : ""}</span>`;
}

function Pool({ pool, status }) {
  const { first, groups, loose } = pool;
  const info = first.slice.pool;
  return html`<section class="pool card" data-pool=${`${first.cluster}/${first.driver}/${first.pool}`}>
    <header>
      <h2 class="mono">${first.pool}</h2>
      <span class="mono">${first.driver}</span>
      <span>node <${NodeName} cluster=${first.cluster} node=${first.nodeName || first.slice.nodeName} /></span>
      <span class="muted">${first.cluster}</span>
      <span>generation ${info.generation}</span>
      <span>${info.resourceSliceCount} slice${info.resourceSliceCount === 1 ? "" : "s"}</span>
      ${info.complete ? html`<${Badge} kind="ok">complete<//>` : html`<${Badge} kind="bad" title="not every slice of the newest generation is published">incomplete<//>`}
      <span class="muted small">${pool.sliceNames.join(", ")}</span>
      <${PoolAvailability} status=${status} />
    </header>
    ${groups.map((g) => html`<${CounterGroup} key=${g.counterSet} group=${g} />`)}
    ${loose.length ? html`<${DeviceTable} devices=${loose} group=${null} />` : null}
  </section>`;
}

export function ResourceSlices({ params, clusters }) {
  const variables = {
    cluster: params.cluster || null, node: params.node || null, driver: params.driver || null,
    className: params.className || null, status: params.status || null, after: params.after || null,
  };
  const pageSize = params.node ? NODE_PAGE_SIZE : PAGE_SIZE;
  variables.first = pageSize;
  const [refresh, setRefresh] = useState(0);
  const { data, error } = useQuery(DEVICES, variables, refresh);
  const devices = data ? data.devices.nodes : null;
  const nodeSlices = useNodeSlices(devices);
  const pools = devices ? groupPools(devices, nodeSlices || []) : [];
  const poolStatus = useQuery(POOL_STATUS, data ? { cluster: params.cluster || null, driver: params.driver || null } : null, refresh);
  const statusOf = (p) => {
    if (!poolStatus.data) return poolStatus.error ? null : undefined;
    const { cluster, driver, pool: name } = p.first;
    return poolStatus.data.resourcePools.find((s) => s.cluster === cluster && s.driver === driver && s.poolName === name) || null;
  };
  const bump = useThrottled(() => setRefresh((n) => n + 1), 2000);
  const names = (clusters || []).map((c) => c.name).filter((n) => !params.cluster || n === params.cluster);
  useLive(names.map((c) => ({ document: LIVE_DEVICES, variables: { cluster: c, node: params.node || null } })), bump, bump);
  const filters = [
    { name: "node", label: "node", placeholder: "any node" },
    { name: "driver", label: "driver", placeholder: "any driver" },
    { name: "className", label: "device class", placeholder: "any class" },
    { name: "status", label: "status", options: [["", "any"], ["FREE", "free"], ["HELD", "held"], ["SHARED", "shared"], ["BLOCKED", "blocked"]] },
  ];
  return html`<${Screen} name="slices" title="Resource Slices" ready=${!!data} error=${error}>
    <${Filters} screen="slices" params=${params} fields=${filters} />
    <p class="legend">MIG partitions: <strong>hardware isolation</strong> — each has its own memory and compute slices of its GPU,
      so holding one blocks the whole GPU and the partitions that overlap it (they share the GPU's counters).
      <${Badge} kind="share">Shareable<//> devices (allowMultipleAllocations): <strong>software sharing</strong> — several claims hold
      them at once, each consuming part of the capacity; no isolation between them.</p>
    ${!data && !error ? html`<${Loading} />` : null}
    ${data ? html`<${Pager} screen="slices" params=${params} connection=${data.devices} pageSize=${pageSize} />` : null}
    <div data-counters=${nodeSlices === null && devices && devices.some((d) => d.consumesCounters.length) ? "loading" : "loaded"}>
      ${pools.map((p) => html`<${Pool} key=${p.key} pool=${p} status=${statusOf(p)} />`)}
    </div>
    <${ErrorNote} what="pool status" error=${poolStatus.error} />
    ${data && data.devices.totalCount === 0 ? html`<p class="muted">No device matches.</p>` : null}
    ${data ? html`<${Pager} screen="slices" params=${params} connection=${data.devices} pageSize=${pageSize} />` : null}
  <//>`;
}

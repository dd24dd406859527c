// Pieces of a claim shared by the claims list, a claim's page and the templates screen:
// its GraphQL fields, its requests, its allocation and its consumers, as people read them.
import { duration, since } from "../format.js";
import { useNow } from "../hooks.js";
import { Badge, DeviceLink, Fragment, NodeName, PodLink, PodPhase, html } from "../ui.js";
import { Cel } from "./classes.js";
import { Health, NotPublished, Taints } from "./device_facts.js";

export const CLAIM_FIELDS = `fragment ClaimRow on ResourceClaim {
  cluster namespace name uid state origin templateName createdAt pendingSeconds idle idleSince
  requests {
    name deviceClassName allocationMode count selectors adminAccess capacity
    firstAvailable { name deviceClassName allocationMode count selectors capacity }
  }
  allocation {
    nodeName allocatedAt
    devices { request shareID consumedCapacity adminAccess device { cluster driver pool name uuid nodeName } }
  }
  consumers { cluster namespace name phase nodeName }
}`;

const ORIGIN = { TEMPLATE: "from a template", EXTENDED_RESOURCE: "extended resource", MANUAL: "made by hand" };
export function Origin({ claim }) {
  return html`<span class="muted small">${ORIGIN[claim.origin] || claim.origin}${claim.templateName ? html` <span class="mono">${claim.templateName}</span>` : null}</span>`;
}

function Capacity({ capacity }) {
  const entries = Object.entries(capacity || {});
  if (!entries.length) return null;
  return html`<span class="small"> asking ${entries.map(([k, v]) => `${k.split("/").pop()} ${v}`).join(", ")}</span>`;
}

function OneRequest({ request, alternative = false }) {
  const count = request.allocationMode === "All" ? "all" : `${request.count} ×`;
  return html`<div class="request" data-request=${request.name}>
    <span class="mono">${request.name}</span>: ${count} <span class="mono">${request.deviceClassName || "—"}</span>
    ${request.adminAccess ? html` <${Badge} kind="warn">admin access<//>` : null}<${Capacity} capacity=${request.capacity} />
    ${request.selectors.map((s, i) => html`<${Cel} key=${i} expression=${s} />`)}
    ${!alternative && request.firstAvailable && request.firstAvailable.length
      ? html`<div class="small">first available of:${request.firstAvailable.map((sub) => html`<div key=${sub.name} class="alternative"><${OneRequest} request=${sub} alternative=${true} /></div>`)}</div>`
      : null}
  </div>`;
}

export function Requests({ claim }) {
  return claim.requests.map((r) => html`<${OneRequest} key=${r.name} request=${r} />`);
}

export function Allocation({ claim }) {
  const a = claim.allocation;
  if (!a) return html`<span class="muted">not allocated</span>`;
  return html`<div>
    <div>node <${NodeName} cluster=${claim.cluster} node=${a.nodeName} />${a.allocatedAt ? html` <span class="muted small">since ${since(a.allocatedAt)}</span>` : null}</div>
    ${a.devices.map((r, i) => html`<div key=${i} class="small" data-allocated=${`${r.device.driver}/${r.device.pool}/${r.device.name}`}>
      <span class="mono">${r.request}</span> → <span class="mono">${r.device.driver}</span> / <span class="mono">${r.device.pool}</span> / <${DeviceLink} device=${{ ...r.device, cluster: claim.cluster }} />
      ${r.shareID ? html` <span class="muted" title=${r.shareID}>share ${r.shareID.slice(0, 8)}</span>` : null}
      ${Object.keys(r.consumedCapacity || {}).length ? html` <span class="muted">consumes ${Object.entries(r.consumedCapacity).map(([k, v]) => `${k.split("/").pop()} ${v}`).join(", ")}</span>` : null}
      ${r.adminAccess ? html` <${Badge} kind="warn">admin access<//>` : null}
      <${DeviceFacts} claim=${claim} allocation=${a} result=${r} />
    </div>`)}
  </div>`;
}

// On a claim's page (its query asks for them): the device's taints, whether a slice
// publishes it, and what the kubelet reports of its health.
function DeviceFacts({ claim, allocation, result }) {
  const d = result.device;
  if (d.published === undefined && result.health === undefined) return null;
  return html`<div class="device-facts">
    ${d.published === false
      ? html`<${NotPublished} cluster=${claim.cluster} driver=${d.driver} pool=${d.pool} name=${d.name}
          node=${d.nodeName || allocation.nodeName} holders=${[{ namespace: claim.namespace, name: claim.name }]} />`
      : null}
    ${d.taints && d.taints.length ? html`<div>taints: <${Taints} taints=${d.taints} /></div>` : null}
    ${result.health !== undefined ? html`<div>health: <${Health} reports=${result.health} /></div>` : null}
  </div>`;
}

export function Consumers({ claim }) {
  if (!claim.consumers.length) return html`<span class="muted">none</span>`;
  return claim.consumers.map((p) => html`<div key=${`${p.namespace}/${p.name}`} data-consumer=${`${p.namespace}/${p.name}`}>
    <${PodLink} cluster=${claim.cluster} namespace=${p.namespace} name=${p.name} node=${p.nodeName} /> <${PodPhase} phase=${p.phase} />
  </div>`);
}

// Idle holder: a cleanup candidate, louder when other claims wait for the same class.
export function IdleNote({ claim, waitingFor }) {
  const now = useNow(1000);
  if (!claim.idle) return null;
  const classes = claim.requests.map((r) => r.deviceClassName).filter(Boolean);
  const waiting = classes.reduce((n, c) => n + (waitingFor ? waitingFor(claim.cluster, c) : 0), 0);
  return html`<div>
    <${Badge} kind=${waiting ? "bad" : "warn"} title="allocated, and no consumer pod is Running">idle${claim.idleSince ? ` ${duration((now - Date.parse(claim.idleSince)) / 1000)}` : ""}: cleanup candidate<//>
    ${waiting ? html`<div class="small warn-text" data-others-wait=${waiting}>${waiting} claim${waiting === 1 ? "" : "s"} wait${waiting === 1 ? "s" : ""} for ${classes.join(", ")}</div>` : null}
  </div>`;
}

export function PendingFor({ claim }) {
  if (claim.state !== "PENDING") return null;
  return html`<div class="small muted">pending ${duration(claim.pendingSeconds)}</div>`;
}

export { Fragment };

// What a device's page and a claim's page say of one device beyond its status: its taints
// (from its slice, and from DeviceTaintRules when the graph gives their name), whether any
// slice publishes it now, and the health the kubelets of its consumer pods report.
import { Badge, NodeName, html } from "../ui.js";

const EFFECTS = { NoSchedule: "bad", NoExecute: "bad", None: "muted" };

// Device.taints: DeviceTaint entries (key, value, effect, timeAdded), from the device's slice
// and the DeviceTaintRules that select it; the rule is named when the entry names it.
export function Taints({ taints }) {
  if (!taints || !taints.length) return html`<span class="muted" data-taints="0">none</span>`;
  return html`<table class="figures-table small" data-taints=${taints.length}><tbody>
    ${taints.map((t, i) => html`<tr key=${i} data-taint=${`${t.key}=${t.value || ""}:${t.effect}`}>
      <th class="mono">${t.key}${t.value ? html`=<span>${t.value}</span>` : null}</th>
      <td><${Badge} kind=${EFFECTS[t.effect] || "warn"} title=${t.effect === "None" ? "informational: allocation and pods are not affected" : "claims that do not tolerate it are not allocated this device"}>${t.effect}<//>
        ${t.timeAdded ? html` <span class="muted">since ${t.timeAdded}</span>` : null}
        ${t.rule || t.deviceTaintRule ? html` <span class="muted" data-taint-rule=${t.rule || t.deviceTaintRule}>from DeviceTaintRule <span class="mono">${t.rule || t.deviceTaintRule}</span></span>` : null}</td>
    </tr>`)}
  </tbody></table>`;
}

// A held device that no ResourceSlice publishes now: what is known of it comes from the
// allocation results that hold it.
export function NotPublished({ cluster, driver, pool, name, node, holders }) {
  return html`<div class="notice" data-published="false">
    <strong>Not published.</strong> No ResourceSlice publishes <span class="mono">${driver} / ${pool} / ${name}</span> now
    (the driver withdrew it, its node went, or the claim was seen before the slices).
    What is known comes from the allocation that holds it:
    ${holders && holders.length
      ? html` held by ${holders.map((h, i) => html`${i ? ", " : ""}<span class="mono" data-unpublished-holder=${`${h.namespace}/${h.name}`}>${h.namespace}/${h.name}</span>`)}`
      : " no holder visible to you"}${node ? html`, on node <${NodeName} cluster=${cluster} node=${node} /> (from the allocation)` : ", on no node the allocation names"}.
  </div>`;
}

const HEALTH = { Healthy: "ok", Unhealthy: "bad", Unknown: "warn" };

// PodDeviceHealth reports (containerStatuses[].allocatedResourcesStatus) for one device.
export function Health({ reports, pods = false }) {
  if (!reports || !reports.length) return html`<span class="muted" data-health="none">no report from the kubelet</span>`;
  return html`<span class="health">${reports.map((r, i) => html`<span key=${i} data-health=${r.health}>
    ${i ? " · " : ""}<${Badge} kind=${HEALTH[r.health] || "warn"}>${r.health}<//>
    <span class="muted small"> container ${r.container}${pods && r.pod ? ` of ${r.pod}` : ""}${r.message ? `: ${r.message}` : ""}</span></span>`)}</span>`;
}

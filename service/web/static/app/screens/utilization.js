// Utilization: claims held by a Running pod whose GPUs are not busy (dcgm-exporter's readings
// below the threshold long enough) — by whom, since when, the energy — and every GPU's
// utilisation over the last hour. Unknown (no readings) is shown as unknown, never 0 %.
import { useQuery } from "../hooks.js";
import { instant, number } from "../format.js";
import { ClaimLink, ErrorNote, Loading, Screen, html } from "../ui.js";

const NOT_BUSY = `query HeldNotBusyScreen($cluster: String) {
  heldNotBusy(cluster: $cluster, first: 200) {
    busyBelow notBusyAfter window total unknown clusters
    claims { cluster claim namespace consumers node devices busy since notBusySeconds energyKwh cost }
  }
}`;
const DEVICES = `query DeviceUtilizationScreen($cluster: String) {
  deviceUtilization(cluster: $cluster) {
    cluster node pool device uuid busy source memoryUsedMib powerWatts energyKwh notBusySince
  }
}`;

const percent = (value) => (value === null || value === undefined ? "unknown" : `${number(value, 0)} %`);
const hours = (seconds) => `${number(seconds / 3600, 1)} h`;

function NotBusy({ answer, cluster }) {
  return html`<p class="muted small" data-not-busy=${answer.total}>
      ${answer.total} held, not busy (below ${answer.busyBelow} % for ${number(answer.notBusyAfter / 60, 0)} min)${cluster ? ` in ${cluster}` : ""};
      ${answer.unknown} held GPU claim(s) without readings, not judged.</p>
    ${answer.claims.length ? html`<table class="list" data-rows=${answer.claims.length}>
      <thead><tr><th>claim</th><th>pods</th><th>node</th><th>devices</th><th class="num">busy</th><th>not busy since</th><th class="num">kWh since</th><th class="num">cost</th></tr></thead>
      <tbody>${answer.claims.map((c) => {
        const [namespace, name] = c.claim.split("/");
        return html`<tr key=${`${c.cluster}/${c.claim}`} data-claim=${c.claim}>
          <td><${ClaimLink} cluster=${c.cluster} namespace=${namespace} name=${name} showCluster=${!cluster} /></td>
          <td class="mono">${c.consumers.join(", ")}</td>
          <td class="mono">${c.node || "—"}</td>
          <td class="mono">${c.devices.join(", ")}</td>
          <td class="num" data-field="busy">${percent(c.busy)}</td>
          <td>${instant(c.since)} (${hours(c.notBusySeconds)})</td>
          <td class="num">${c.energyKwh === null ? "—" : number(c.energyKwh, 2)}</td>
          <td class="num">${c.cost === null ? "—" : number(c.cost, 2)}</td>
        </tr>`;
      })}</tbody></table>` : html`<p class="muted">No claim is held without being busy.</p>`}`;
}

function Devices({ rows }) {
  return html`<table class="list" data-devices=${rows.length}>
    <thead><tr><th>device</th><th>node</th><th class="num">busy (1 h)</th><th>read from</th><th class="num">memory used</th><th class="num">power</th><th class="num">kWh (1 h)</th></tr></thead>
    <tbody>${rows.map((d) => html`<tr key=${`${d.cluster}/${d.pool}/${d.device}`} data-device=${d.device} data-busy=${d.busy === null ? "unknown" : d.busy}>
      <td class="mono">${d.cluster} · ${d.device}${d.uuid ? html`<br /><span class="muted small">${d.uuid}</span>` : null}</td>
      <td class="mono">${d.node || "—"}</td>
      <td class="num">${percent(d.busy)}</td>
      <td>${d.source || "no readings"}</td>
      <td class="num">${d.memoryUsedMib === null ? "—" : `${number(d.memoryUsedMib / 1024, 1)} GiB`}</td>
      <td class="num">${d.powerWatts === null ? "—" : `${number(d.powerWatts, 0)} W`}</td>
      <td class="num">${d.energyKwh === null ? "—" : number(d.energyKwh, 3)}</td>
    </tr>`)}</tbody></table>`;
}

export function Utilization({ params }) {
  const cluster = params.cluster || null;
  const notBusy = useQuery(NOT_BUSY, { cluster });
  const devices = useQuery(DEVICES, { cluster });
  const answer = notBusy.data ? notBusy.data.heldNotBusy : null;
  return html`<${Screen} name="utilization" title="Held, not busy" ready=${!!answer || !!notBusy.error} error=${notBusy.error}>
    ${!answer && !notBusy.error ? html`<${Loading} what="Reading utilisation" />` : null}
    ${answer ? html`<${NotBusy} answer=${answer} cluster=${cluster} />` : null}
    <h2>GPUs, last hour</h2>
    <${ErrorNote} what="device utilisation" error=${devices.error} />
    ${devices.data ? html`<${Devices} rows=${devices.data.deviceUtilization} />` : null}
  <//>`;
}

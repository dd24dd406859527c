// Device Classes: each class's selectors (CEL, one condition a line), default configuration,
// extended resource name, and how many devices it matches, free of total, per cluster.
import { useLive, useQuery, useThrottled } from "../hooks.js";
import { celLines, number } from "../format.js";
import { Json, Link, Loading, Screen, href, html, useState } from "../ui.js";

const CLASSES = `query DeviceClasses($cluster: String) {
  deviceClasses(cluster: $cluster) { cluster name selectors config extendedResourceName }
}`;
const MATCHED = `query ClassDevices($cluster: String!, $className: String!) {
  all: devices(cluster: $cluster, className: $className, first: 0) { totalCount }
  free: devices(cluster: $cluster, className: $className, status: FREE, first: 0) { totalCount }
}`;
const LIVE_DEVICES = `subscription ClassDevicesLive($cluster: String!) { deviceEvents(cluster: $cluster) { type } }`;

export function Cel({ expression }) {
  return html`<pre class="cel mono">${celLines(expression).join("\n")}</pre>`;
}

function Matched({ cluster, name, refresh }) {
  const { data, error } = useQuery(MATCHED, { cluster, className: name }, refresh);
  if (error) return html`<span class="error-inline">${error.message}</span>`;
  if (!data) return html`<span class="muted">…</span>`;
  return html`<span data-matched=${`${data.free.totalCount}/${data.all.totalCount}`}>
    <${Link} to=${href("slices", { cluster, className: name, status: "FREE" })}>${number(data.free.totalCount)} free<//>
    ${" of "}<${Link} to=${href("slices", { cluster, className: name })}>${number(data.all.totalCount)}<//></span>`;
}

export function DeviceClasses({ params, clusters }) {
  const cluster = params.cluster || null;
  const [refresh, setRefresh] = useState(0);
  const { data, error } = useQuery(CLASSES, { cluster }, refresh);
  const bump = useThrottled(() => setRefresh((n) => n + 1), 3000);
  const names = (clusters || []).map((c) => c.name).filter((n) => !cluster || n === cluster);
  useLive(names.map((c) => ({ document: LIVE_DEVICES, variables: { cluster: c } })), bump, bump);
  const classes = data ? data.deviceClasses : null;
  return html`<${Screen} name="classes" title="Device Classes" ready=${!!data} error=${error}>
    ${!data && !error ? html`<${Loading} />` : null}
    ${classes && classes.length === 0 ? html`<p class="muted">No DeviceClass in ${cluster || "any cluster"}.</p>` : null}
    ${classes && classes.length
      ? html`<table class="list" data-rows=${classes.length}>
          <thead><tr><th>cluster</th><th>name</th><th>selectors (CEL; a device must pass all)</th><th>extended resource</th><th>default configuration</th><th>devices matched</th></tr></thead>
          <tbody>${classes.map((c) => html`<tr key=${`${c.cluster}/${c.name}`} data-class=${`${c.cluster}/${c.name}`}>
            <td>${c.cluster}</td>
            <td class="mono">${c.name}</td>
            <td>${c.selectors.length ? c.selectors.map((s, i) => html`<${Cel} key=${i} expression=${s} />`) : html`<span class="muted">none: every device of the cluster</span>`}</td>
            <td class="mono">${c.extendedResourceName || html`<span class="muted">—</span>`}</td>
            <td>${c.config && c.config.length ? html`<${Json} value=${c.config} />` : html`<span class="muted">none</span>`}</td>
            <td class="num"><${Matched} cluster=${c.cluster} name=${c.name} refresh=${refresh} /></td>
          </tr>`)}</tbody>
        </table>`
      : null}
  <//>`;
}

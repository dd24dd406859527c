// The search box of every screen: a GPU's uuid (GPU-…, MIG-…), `node/device`,
// `driver/pool/device` or a bare device name goes to the device's page; a claim's
// `namespace/name` to the claim's page. One match goes there at once; several are listed to
// pick from; none is said. The devices are named as `whoHolds` reads names (devicesNamed).
import { query } from "./graphql.js";
import { navigate } from "./router.js";
import { html, href, useState } from "./ui.js";

const FIND_DEVICES = `query SearchDevices($spec: String!, $cluster: String) {
  devicesNamed(device: $spec, cluster: $cluster) { cluster driver pool name nodeName uuid }
}`;
const FIND_CLAIM = `query SearchClaim($cluster: String!, $namespace: String!, $name: String!) {
  resourceClaim(cluster: $cluster, namespace: $namespace, name: $name) { cluster namespace name }
}`;

function devicePage(d) {
  return { label: `device ${d.cluster}/${d.nodeName ? `${d.nodeName}/` : ""}${d.name}${d.uuid ? ` (${d.uuid})` : ""}`,
    to: href("device", { cluster: d.cluster, driver: d.driver, pool: d.pool, device: d.name, node: d.nodeName }) };
}

function claimPage(c) {
  return { label: `claim ${c.cluster}/${c.namespace}/${c.name}`, to: href("claim", { cluster: c.cluster, namespace: c.namespace, name: c.name }) };
}

// Every page the text may mean, devices first.
export async function findPages(text, cluster, clusters) {
  const found = await query(FIND_DEVICES, { spec: text, cluster: cluster || null });
  const pages = found.devicesNamed.map(devicePage);
  const parts = text.split("/");
  if (parts.length === 2 && parts[0] && parts[1]) {
    const names = cluster ? [cluster] : (clusters || []).map((c) => c.name);
    const claims = await Promise.all(names.map((c) => query(FIND_CLAIM, { cluster: c, namespace: parts[0], name: parts[1] })));
    for (const answer of claims) if (answer.resourceClaim) pages.push(claimPage(answer.resourceClaim));
  }
  return pages;
}

export function SearchBox({ cluster, clusters }) {
  const [text, setText] = useState("");
  const [result, setResult] = useState(null); // null | { pages } | { error }
  const submit = async (event) => {
    event.preventDefault();
    const wanted = text.trim();
    if (!wanted) return;
    setResult({ busy: true });
    try {
      const pages = await findPages(wanted, cluster, clusters);
      if (pages.length === 1) {
        setResult(null);
        navigate(pages[0].to);
      } else setResult({ pages, wanted });
    } catch (error) {
      setResult({ error });
    }
  };
  const choose = (to) => (event) => {
    event.preventDefault();
    setResult(null);
    navigate(to);
  };
  return html`<form class="search" role="search" onSubmit=${submit} data-testid="search">
    <input type="search" value=${text} onInput=${(e) => setText(e.target.value)} aria-label="find a device or claim"
      placeholder="GPU uuid, node/device, driver/pool/device, namespace/claim" />
    ${result && result.pages ? html`<div class="search-results" data-matches=${result.pages.length}>
      ${result.pages.length === 0 ? html`<span class="muted">nothing named ${result.wanted}${cluster ? ` in ${cluster}` : ""}</span>`
        : result.pages.map((p) => html`<a key=${p.to} href=${p.to} onClick=${choose(p.to)} class="mono">${p.label}</a>`)}
    </div>` : null}
    ${result && result.error ? html`<div class="search-results error-inline">${result.error.message}</div>` : null}
  </form>`;
}

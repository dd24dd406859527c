// A pod's checklist, in the order the operations manual gives: the order for using a GPU
// (the cluster serves DRA, a driver publishes devices, a DeviceClass names them, a claim asks
// for them, the pod and its containers reference the claim) and what to check after applying
// (allocated, node and device named, the pod among the consumers, Running) — ticked from the
// graph's answers, with the common mistake named when one applies (lint, explainClaim).
import { query } from "../graphql.js";
import { useLive, useQuery, useThrottled } from "../hooks.js";
import { Badge, ClaimLink, ClaimState, DeviceLink, ErrorNote, KeyValues, Loading, NodeName, PodPhase, Screen, html, useEffect, useState } from "../ui.js";
import { devicePluginLimits } from "./pods.js";

const POD_FIELDS = `fragment PodCheck on Pod {
  cluster namespace name uid phase reason nodeName createdAt
  claims {
    name claimName templateName containers
    claim {
      cluster namespace name state
      requests { name deviceClassName firstAvailable { deviceClassName } }
      allocation { nodeName devices { request device { cluster driver pool name uuid nodeName } } }
      consumers { namespace name }
    }
  }
  extendedResourceClaim { cluster namespace name state }
  containers { name init limits claims }
  deviceHealth { container health message driver pool deviceName }
}`;
const ON_NODE = `query PodOnNode($cluster: String!, $namespace: String!, $node: String!) {
  pods(cluster: $cluster, namespace: $namespace, node: $node, first: 1000) { nodes { ...PodCheck } }
}
${POD_FIELDS}`;
const IN_NAMESPACE = `query PodInNamespace($cluster: String!, $namespace: String!, $after: String) {
  pods(cluster: $cluster, namespace: $namespace, first: 500, after: $after) {
    pageInfo { hasNextPage endCursor } nodes { ...PodCheck }
  }
}
${POD_FIELDS}`;
const FACTS = `query PodFacts($cluster: String!) {
  cluster(name: $cluster) { name status { apiVersion } }
  deviceClasses(cluster: $cluster) { name }
}`;
// The cluster's lint scans every pod of it: asked once the checklist is drawn.
const FINDINGS = `query PodFindings($cluster: String!) {
  lint(cluster: $cluster) { rule severity object path message }
}`;
const EXPLAIN = `query PodClaimCheck($cluster: String!, $namespace: String!, $name: String!) {
  explainClaim(cluster: $cluster, namespace: $namespace, name: $name) {
    verdict message
    checks { name ok detail }
    requests { request deviceClassName classExists classDevices verdict summary }
    nodesWithoutDriver
  }
}`;
const LIVE = `subscription PodLive($cluster: String!, $namespace: String!) { claimEvents(cluster: $cluster, namespace: $namespace) { type } }`;
const MAX_PAGES = 20;

// The pod: through its node's reverse map when the node is known, else its namespace's pages
// (the graph has no lookup of one pod by name).
function usePod(target, refresh) {
  const [state, setState] = useState(null);
  const key = target ? JSON.stringify(target) : null;
  useEffect(() => {
    if (!key) return undefined;
    let cancelled = false;
    (async () => {
      const { cluster, namespace, name, node } = JSON.parse(key);
      if (node) {
        const data = await query(ON_NODE, { cluster, namespace, node });
        const found = data.pods.nodes.find((p) => p.name === name);
        if (found) return found;
      }
      let after = null;
      for (let page = 0; page < MAX_PAGES; page += 1) {
        const data = await query(IN_NAMESPACE, { cluster, namespace, after });
        const found = data.pods.nodes.find((p) => p.name === name);
        if (found || !data.pods.pageInfo.hasNextPage) return found || null;
        after = data.pods.pageInfo.endCursor;
      }
      return null;
    })().then((pod) => !cancelled && setState({ pod }), (error) => !cancelled && setState({ error }));
    return () => { cancelled = true; };
  }, [key, refresh]);
  return key ? state : null;
}

function useDiagnoses(pod, refresh) {
  const [found, setFound] = useState(null);
  const names = pod ? [...pod.claims.map((c) => c.claim), pod.extendedResourceClaim].filter(Boolean).map((c) => c.name) : null;
  const key = names ? names.join("\u0000") : null;
  useEffect(() => {
    if (key === null) return undefined;
    let cancelled = false;
    Promise.all(names.map((name) => query(EXPLAIN, { cluster: pod.cluster, namespace: pod.namespace, name })
      .then((d) => [name, d.explainClaim], (error) => [name, { error }])))
      .then((pairs) => !cancelled && setFound(Object.fromEntries(pairs)));
    return () => { cancelled = true; };
  }, [key, refresh]);
  return found;
}

const tick = (ok) => (ok === true ? "check-ok" : ok === false ? "check-no" : "check-unknown");

// The checklist items for a pod, from the graph's answers (null: cannot tell).
export function checklist(pod, facts, diagnoses) {
  const claims = [...pod.claims.map((c) => ({ ...c, resolved: c.claim })),
    ...(pod.extendedResourceClaim ? [{ name: "extended resources", containers: ["(limits)"], resolved: pod.extendedResourceClaim, extended: true }] : [])];
  const resolved = claims.map((c) => c.resolved).filter(Boolean);
  const classes = new Set(facts.deviceClasses.map((c) => c.name));
  const wanted = resolved.flatMap((c) => (c.requests || []).flatMap((r) => [r.deviceClassName, ...(r.firstAvailable || []).map((s) => s.deviceClassName)])).filter(Boolean);
  const diagnosesOf = resolved.map((c) => (diagnoses || {})[c.name]).filter(Boolean);
  const checksNamed = (name) => {
    const found = diagnosesOf.flatMap((d) => (d.checks || []).filter((c) => c.name === name));
    if (!diagnoses) return { ok: null, detail: "…" };
    if (!found.length) return { ok: resolved.length ? false : null, detail: resolved.length ? "not yet (the claim is not allocated)" : "no claim" };
    return { ok: found.every((c) => c.ok), detail: found.map((c) => c.detail).join("; ") };
  };
  const publishes = diagnosesOf.flatMap((d) => d.requests || []);
  const allocated = resolved.length > 0 && resolved.every((c) => c.state !== "PENDING");
  const order = [
    { id: "api", label: "The cluster serves resource.k8s.io", ok: facts.cluster && facts.cluster.status.apiVersion ? true : null,
      detail: facts.cluster && facts.cluster.status.apiVersion ? `resource.k8s.io/${facts.cluster.status.apiVersion}` : "version not known" },
    { id: "driver", label: "A DRA driver publishes the devices (ResourceSlices)",
      ok: !resolved.length ? null : allocated ? true : publishes.length ? publishes.every((r) => r.classDevices > 0) : null,
      detail: allocated ? "devices were allocated from its slices" : publishes.map((r) => `${r.deviceClassName}: ${r.classDevices} devices`).join("; ") || "—" },
    { id: "class", label: "A DeviceClass selects them", ok: wanted.length ? wanted.every((c) => classes.has(c)) : null,
      detail: wanted.length ? wanted.map((c) => `${c}${classes.has(c) ? "" : " (missing)"}`).join(", ") : "no request" },
    { id: "claim", label: "A ResourceClaim (or template) asks for them", ok: claims.length ? claims.every((c) => c.resolved) : false,
      detail: claims.length ? claims.map((c) => (c.resolved ? `${c.resolved.name}${c.templateName ? ` (template ${c.templateName})` : ""}` : `${c.name}: no claim`)).join(", ") : "the pod asks for no claim" },
    { id: "pod-claims", label: "The pod lists it in spec.resourceClaims", ok: pod.claims.length > 0 || !!pod.extendedResourceClaim,
      detail: pod.claims.map((c) => c.name).join(", ") || (pod.extendedResourceClaim ? "made by the scheduler for extended-resource limits" : "none") },
    { id: "containers", label: "Each container that uses it lists it in resources.claims", ok: claims.length ? claims.every((c) => c.containers.length > 0) : null,
      detail: claims.map((c) => `${c.name}: ${c.containers.join(", ") || "no container"}`).join("; ") || "—" },
  ];
  const running = { ok: pod.phase === "Running", detail: `${pod.phase}${pod.reason ? ` (${pod.reason})` : ""}` };
  const after = [
    { id: "allocated", label: "The claim is allocated", ...checksNamed("allocated") },
    { id: "node", label: "A node is named", ...checksNamed("node") },
    { id: "devices", label: "A device is named", ...checksNamed("devices") },
    { id: "consumers", label: "The pod is among the claim's consumers (reservedFor)",
      ok: resolved.length ? resolved.every((c) => c.consumers ? c.consumers.some((p) => p.name === pod.name) : c.state === "RESERVED") : null,
      detail: resolved.map((c) => `${c.name}: ${c.consumers ? c.consumers.map((p) => p.name).join(", ") || "nobody" : c.state}`).join("; ") || "—" },
    { id: "running", label: "The pod is Running", ...running },
    { id: "health", label: "The kubelet reports its devices Healthy (allocatedResourcesStatus)", ...deviceHealth(pod) },
  ];
  return { order, after };
}

// Healthy when every report is; false when one is not; null when the kubelet reports nothing
// (it reports device health only where the driver does, KEP-4680).
function deviceHealth(pod) {
  const reports = pod.deviceHealth || [];
  if (!reports.length) return { ok: null, detail: "no report from the kubelet" };
  const bad = reports.filter((r) => r.health !== "Healthy");
  const named = (r) => `${r.driver}/${r.pool}/${r.deviceName} (container ${r.container}): ${r.health}${r.message ? `, ${r.message}` : ""}`;
  return bad.length
    ? { ok: bad.some((r) => r.health === "Unhealthy") ? false : null, detail: bad.map(named).join("; ") }
    : { ok: true, detail: `${reports.length} device${reports.length === 1 ? "" : "s"} Healthy` };
}

// The common mistakes that apply: lint findings on the pod, its claims or its controller,
// device-plugin limits, and what explainClaim says of a claim that is not healthy.
export function mistakes(pod, findings, diagnoses) {
  const names = new Set([`Pod ${pod.namespace}/${pod.name}`,
    ...pod.claims.filter((c) => c.claim).map((c) => `ResourceClaim ${pod.namespace}/${c.claim.name}`)]);
  const found = findings.filter((f) => {
    if (names.has(f.object)) return true;
    // A controller's finding (ReplicaSet, StatefulSet, Job…) concerns the pods it names.
    const [kind, ref] = f.object.split(" ");
    return kind !== "Node" && kind !== "DeviceClass" && ref && ref.startsWith(`${pod.namespace}/`) && pod.name.startsWith(`${ref.split("/")[1]}-`);
  }).map((f) => ({ rule: f.rule, message: f.message }));
  const plugin = devicePluginLimits(pod);
  if (plugin.length && !found.some((f) => f.rule === "device-plugin-and-dra")) {
    found.push({ rule: "device-plugin-limits", message: `asks for ${plugin.join(", ")} through limits: that is the device plugin, not DRA — ask with a ResourceClaim instead` });
  }
  for (const [name, d] of Object.entries(diagnoses || {})) {
    if (d && !d.error && !["OK", "FITS", "ALLOCATABLE"].includes(d.verdict)) found.push({ rule: `claim ${name}: ${d.verdict}`, message: d.message });
  }
  return found;
}

function Items({ items }) {
  return html`<ol class="checklist">${items.map((i) => html`<li key=${i.id} class=${tick(i.ok)} data-check=${i.id} data-ok=${String(i.ok)}>
    <strong>${i.label}</strong> <span class="muted small">${i.detail}</span></li>`)}</ol>`;
}

export function PodPage({ params }) {
  const { cluster, namespace, name, node } = params;
  const valid = cluster && namespace && name;
  const [refresh, setRefresh] = useState(0);
  const found = usePod(valid ? { cluster, namespace, name, node: node || null } : null, refresh);
  const facts = useQuery(FACTS, valid ? { cluster } : null, refresh);
  const pod = found && found.pod ? found.pod : null;
  const diagnoses = useDiagnoses(pod, refresh);
  const bump = useThrottled(() => setRefresh((n) => n + 1), 1500);
  useLive(valid ? [{ document: LIVE, variables: { cluster, namespace } }] : [], bump, bump);
  const ready = found && facts.data && (!pod || diagnoses);
  const findings = useQuery(FINDINGS, ready && pod ? { cluster } : null, refresh);
  const lists = pod && facts.data ? checklist(pod, facts.data, diagnoses) : null;
  const named = pod && findings.data ? mistakes(pod, findings.data.lint, diagnoses) : [];
  return html`<${Screen} name="pod" title=${valid ? `Pod ${namespace}/${name}` : "Pod"} ready=${!!ready} error=${(found && found.error) || facts.error}>
    ${!valid ? html`<p class="error">A pod's page needs cluster, namespace and name.</p>` : null}
    ${valid && !ready ? html`<${Loading} />` : null}
    ${found && !found.error && !pod ? html`<p class="muted" data-missing="true">No pod ${namespace}/${name} in ${cluster} now.</p>` : null}
    ${pod ? html`<section class="card" data-pod=${`${pod.cluster}/${pod.namespace}/${pod.name}`}>
      <${KeyValues} rows=${[
        ["cluster", pod.cluster],
        ["phase", html`<${PodPhase} phase=${pod.phase} />${pod.reason ? html` <span class="muted">${pod.reason}</span>` : null}`],
        ["node", pod.nodeName ? html`<${NodeName} cluster=${pod.cluster} node=${pod.nodeName} />` : html`<span class="muted">not scheduled yet</span>`],
        ["claims", pod.claims.length || pod.extendedResourceClaim
          ? html`${pod.claims.map((c) => html`<div key=${c.name}><span class="mono">${c.name}</span> → ${c.claim
              ? html`<${ClaimLink} cluster=${c.claim.cluster} namespace=${c.claim.namespace} name=${c.claim.name} /> <${ClaimState} state=${c.claim.state} />
                 ${c.claim.allocation ? c.claim.allocation.devices.map((d) => html` <${DeviceLink} key=${d.device.name} device=${d.device} />`) : null}`
              : html`<span class="warn-text">not made yet</span>`} <span class="muted small">used by ${c.containers.join(", ") || "no container"}</span></div>`)}
            ${pod.extendedResourceClaim ? html`<div>extended resources → <${ClaimLink} cluster=${pod.extendedResourceClaim.cluster} namespace=${pod.extendedResourceClaim.namespace} name=${pod.extendedResourceClaim.name} /></div>` : null}`
          : html`<span class="muted">none</span>`],
      ]} />
    </section>` : null}
    ${lists ? html`<div class="two-columns">
      <section class="card"><h2>Order for using a GPU</h2><${Items} items=${lists.order} /></section>
      <section class="card"><h2>What to check after applying</h2><${Items} items=${lists.after} /></section>
    </div>` : null}
    ${pod && ready ? html`<section class="card" data-mistakes=${findings.data ? named.length : null}><h2>Common mistakes</h2>
      <${ErrorNote} what="lint" error=${findings.error} />
      ${!findings.data && !findings.error ? html`<${Loading} what="Looking for them" />`
        : named.length ? html`<ul>${named.map((m, i) => html`<li key=${i}><${Badge} kind="warn">${m.rule}<//> ${m.message}</li>`)}</ul>`
        : html`<p class="muted">None applies.</p>`}</section>` : null}
    ${diagnoses ? Object.entries(diagnoses).filter(([, d]) => d && d.error).map(([n, d]) => html`<${ErrorNote} key=${n} what=${`explainClaim ${n}`} error=${d.error} />`) : null}
  <//>`;
}

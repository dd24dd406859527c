// The Devices screens: one page, one screen per URL under /ui/ (see router.js), each asking
// /graphql for what it shows. This module draws the frame — navigation, the cluster picker,
// who you are signed in as, the search box, the live-events indicator — and picks the screen (or the sign-in,
// when the mirror refuses the page's credentials).
import { config } from "./config.js";
import { startLive } from "./graphql.js";
import { useLiveState, useQuery } from "./hooks.js";
import { SearchBox } from "./search.js";
import { navigate, useRoute } from "./router.js";
import { SignInForm, ViewerBadge, isUnauthenticated } from "./signin.js";
import { html, href, Link, useEffect, useState } from "./ui.js";
import { Overview } from "./screens/overview.js";
import { DeviceClasses } from "./screens/classes.js";
import { ResourceSlices } from "./screens/slices.js";
import { ResourceClaims } from "./screens/claims.js";
import { ClaimPage } from "./screens/claim.js";
import { ClaimTemplates } from "./screens/templates.js";
import { DevicePage } from "./screens/device.js";
import { Contention } from "./screens/contention.js";
import { Utilization } from "./screens/utilization.js";
import { Pods } from "./screens/pods.js";
import { PodPage } from "./screens/pod.js";

const SCREENS = {
  overview: Overview,
  classes: DeviceClasses,
  slices: ResourceSlices,
  claims: ResourceClaims,
  claim: ClaimPage,
  templates: ClaimTemplates,
  device: DevicePage,
  contention: Contention,
  utilization: Utilization,
  pods: Pods,
  pod: PodPage,
};

const MENU = [
  ["overview", "Overview"],
  ["classes", "Device Classes"],
  ["slices", "Resource Slices"],
  ["claims", "Resource Claims"],
  ["templates", "Claim Templates"],
  ["pods", "Per pod"],
  ["contention", "Contention"],
  ["utilization", "Held, not busy"],
];
const SECTION = { claim: "claims", device: "slices", pod: "pods" };

const CLUSTERS = `query Clusters { clusters { name status { connected synced apiVersion error } } }`;

function LiveIndicator() {
  const state = useLiveState();
  const words = { live: "live", connecting: "connecting…", down: "live events lost, reconnecting" };
  return html`<span class=${`live live-${state}`} data-live=${state} title="Live events over /graphql (WebSocket)">${words[state]}</span>`;
}

function ClusterPicker({ route, clusters }) {
  const current = route.params.cluster || "";
  const choose = (event) => {
    // A list keeps its filters (from the first page); a detail page goes back to its list.
    const cluster = event.target.value;
    const target = SECTION[route.screen] || route.screen;
    const params = target === route.screen ? { ...route.params, cluster, after: null, page: null } : { cluster };
    navigate(href(target, params));
  };
  return html`<label class="cluster-picker">Cluster
    <select value=${current} onChange=${choose} data-testid="cluster-picker">
      <option value="">all clusters</option>
      ${(clusters || []).map((c) => html`<option key=${c.name} value=${c.name}>${c.name}${c.status.apiVersion ? ` (resource.k8s.io/${c.status.apiVersion})` : ""}</option>`)}
    </select>
  </label>`;
}

function App() {
  const route = useRoute();
  const { data, error } = useQuery(CLUSTERS, {});
  const [asked, setAsked] = useState(false);
  const clusters = data ? data.clusters : null;
  // Once the mirror answers this page, the socket opens and stays open: the indicator tells
  // its health on every screen, whether the screen listens to anything or not.
  useEffect(() => {
    if (clusters) startLive();
  }, [clusters]);
  const refused = isUnauthenticated(error);
  const Screen = SCREENS[route.screen];
  const section = SECTION[route.screen] || route.screen;
  const keep = route.params.cluster ? { cluster: route.params.cluster } : {};
  return html`<div class="frame">
    <nav class="menu" aria-label="screens">
      <${Link} to=${href("overview", keep)} className="brand">dra-mirror<//>
      <span class="menu-title">Devices</span>
      ${MENU.map(([screen, label]) => html`<${Link} key=${screen} to=${href(screen, keep)} className=${section === screen ? "active" : ""}>${label}<//>`)}
      <a href=${config.graphql} className="graphiql-link">GraphiQL</a>
    </nav>
    <div class="body">
      <div class="topbar">
        <${SearchBox} cluster=${route.params.cluster || ""} clusters=${clusters} />
        <${ClusterPicker} route=${route} clusters=${clusters} />
        <${ViewerBadge} onSignIn=${() => setAsked(true)} />
        <${LiveIndicator} />
      </div>
      ${error && !refused ? html`<div class="error" role="alert">clusters: ${error.message}</div>` : null}
      ${refused || asked
        ? html`<${SignInForm} reason=${refused ? `The mirror refused: ${error.message}.` : null} />`
        : Screen
          ? html`<${Screen} key=${route.screen} params=${route.params} clusters=${clusters} />`
          : html`<main data-screen="missing" data-ready="true"><h1>No such screen</h1></main>`}
    </div>
  </div>`;
}

window.ReactDOM.createRoot(document.getElementById("app")).render(html`<${App} />`);

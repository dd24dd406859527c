// GraphiQL on /graphql, from the vendored GraphiQL and React: queries over fetch,
// subscriptions over WebSocket (graphql-transport-ws), both to this server only and with the
// page's credentials (see graphql.js for the Authorization convention).
import { config } from "./config.js";
import { AUTHORIZATION_KEY } from "./graphql.js";

const DEFAULT_QUERY = `# dra-mirror: every cluster, how it syncs, and what is free.
# The Devices screens (${config.base}/) are built on this same graph.
{
  clusters {
    name
    status { connected synced apiVersion }
    counts { devices freeDevices claims pendingClaims }
  }
}
`;

function headers() {
  try {
    const value = window.sessionStorage.getItem(AUTHORIZATION_KEY);
    return value ? { Authorization: value } : {};
  } catch (_) {
    return {};
  }
}

const url = new URL(config.graphql, window.location.href);
const subscriptionUrl = new URL(url.href);
subscriptionUrl.protocol = url.protocol === "https:" ? "wss:" : "ws:";

const fetcher = window.GraphiQL.createFetcher({
  url: url.href,
  subscriptionUrl: subscriptionUrl.href,
  headers: headers(),
  wsConnectionParams: headers(),
});

const root = window.ReactDOM.createRoot(document.getElementById("graphiql"));
root.render(window.React.createElement(window.GraphiQL, { fetcher, defaultQuery: DEFAULT_QUERY }));

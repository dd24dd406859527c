// Every figure on these screens comes from /graphql: queries over fetch, live events over
// WebSocket (graphql-transport-ws, the vendored graphql-ws client). Both carry the page's own
// credentials — cookies (same origin) and, when a token was put in sessionStorage under
// "dra-mirror.authorization", an Authorization header (HTTP) or connection_init payload
// (WebSocket) — so the server's access rules apply to the screens exactly as to any client.
import { config } from "./config.js";

export const AUTHORIZATION_KEY = "dra-mirror.authorization";

export class GraphQLRequestError extends Error {
  constructor(message, { errors = [], data = null, status = 200 } = {}) {
    super(message);
    this.errors = errors;
    this.data = data;
    this.status = status;
  }
  get codes() {
    return this.errors.map((e) => e.extensions && e.extensions.code).filter(Boolean);
  }
}

function authorization() {
  try {
    const value = window.sessionStorage.getItem(AUTHORIZATION_KEY);
    return value ? { Authorization: value } : {};
  } catch (_) {
    return {};
  }
}

// The sign-in (signin.js) keeps the token for this tab only: sessionStorage dies with it.
export function signedIn() {
  return Boolean(authorization().Authorization);
}

export function signIn(token) {
  const value = token.trim();
  window.sessionStorage.setItem(AUTHORIZATION_KEY, /^bearer\s/i.test(value) ? value : `Bearer ${value}`);
}

export function signOut() {
  window.sessionStorage.removeItem(AUTHORIZATION_KEY);
}

export async function query(document, variables = {}, { signal } = {}) {
  let response;
  try {
    response = await fetch(config.graphql, {
      method: "POST",
      credentials: "same-origin",
      signal,
      headers: { "Content-Type": "application/json", Accept: "application/json", ...authorization() },
      body: JSON.stringify({ query: document, variables }),
    });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new GraphQLRequestError(`the server cannot be reached (${error.message})`, { status: 0 });
  }
  let body = null;
  try {
    body = await response.json();
  } catch (_) {
    throw new GraphQLRequestError(`HTTP ${response.status} from ${config.graphql}`, { status: response.status });
  }
  if (body.errors && body.errors.length) {
    const message = body.errors.map((e) => e.message).join("; ");
    throw new GraphQLRequestError(message, { errors: body.errors, data: body.data, status: response.status });
  }
  if (!response.ok) throw new GraphQLRequestError(`HTTP ${response.status}`, { status: response.status });
  return body.data;
}

// ---- live events -------------------------------------------------------------------------
const listeners = new Set(); // (state) => void, state: "connecting" | "live" | "down"
let client = null;
let state = "connecting";
let everConnected = false;

function setState(next, reconnected = false) {
  state = next;
  for (const listener of listeners) listener(state, reconnected);
}

export function liveState() {
  return state;
}

// `fn(state, reconnected)`; reconnected is true when the socket came back after a loss (the
// screens then re-read: events sent while it was down are gone — pub/sub is at-most-once).
export function onLiveState(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

function wsUrl() {
  const url = new URL(config.graphql, window.location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  return url.href;
}

// The socket opens when the page starts and stays open (reconnecting forever), whether or not
// the screen listens to anything: a screen without subscriptions still says "live".
export function startLive() {
  liveClient();
}

function liveClient() {
  if (client) return client;
  client = window.graphqlWs.createClient({
    url: wsUrl(),
    lazy: false,
    connectionParams: () => authorization(),
    retryAttempts: Infinity,
    shouldRetry: () => true,
    on: {
      connected: () => {
        const reconnected = everConnected;
        everConnected = true;
        setState("live", reconnected);
      },
      closed: () => setState("down"),
      connecting: () => setState("connecting"),
    },
  });
  return client;
}

function liveError(error) {
  if (error instanceof Error) return error;
  if (Array.isArray(error)) return new GraphQLRequestError(error.map((e) => e.message).join("; "), { errors: error });
  return new GraphQLRequestError(`live events failed${error && error.reason ? `: ${error.reason}` : ""}`);
}

// Subscribe; `onEvent(data)` per event. Returns the function that ends the subscription.
export function subscribe(document, variables, onEvent, onError = () => {}) {
  return liveClient().subscribe(
    { query: document, variables },
    {
      next: (result) => {
        if (result.errors && result.errors.length) onError(new GraphQLRequestError(result.errors[0].message, { errors: result.errors }));
        else if (result.data) onEvent(result.data);
      },
      error: (error) => onError(liveError(error)),
      complete: () => {},
    },
  );
}

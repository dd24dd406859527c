// Sign-in: who the screens ask as. A token pasted here (a static token, an OIDC id token, a
// Kubernetes token — whatever the mirror's access configuration accepts) is kept in this
// tab's sessionStorage and sent as the Authorization header of every query and in the live
// events' connection_init (graphql.js); the page then reloads, so every screen, query and
// WebSocket starts over as the new subject. "Sign out" forgets it. The frame shows who the
// server takes you for and your scope (the graph's `viewer`).
import { signIn, signOut, signedIn } from "./graphql.js";
import { useQuery } from "./hooks.js";
import { html, useState } from "./ui.js";

export const VIEWER = `query Viewer { viewer { name method authenticated admin namespaces clusters history description } }`;

export function isUnauthenticated(error) {
  return Boolean(error && (error.status === 401 || (error.codes || []).includes("UNAUTHENTICATED")));
}

function forget() {
  signOut();
  window.location.reload();
}

export function SignInForm({ reason }) {
  const [token, setToken] = useState("");
  const submit = (event) => {
    event.preventDefault();
    if (!token.trim()) return;
    signIn(token);
    window.location.reload();
  };
  return html`<main data-screen="signin" data-ready="true" class="signin">
    <h1>Sign in</h1>
    <p>${reason || "This mirror shows only what your access allows."} Paste the token you were given
      (a dashboard or personal token, an OIDC or Kubernetes token). It stays in this browser tab only.</p>
    <form onSubmit=${submit} data-testid="signin-form">
      <label>Token <input type="password" autocomplete="off" spellcheck="false" value=${token}
        onInput=${(event) => setToken(event.target.value)} data-testid="signin-token" /></label>
      <button type="submit" data-testid="signin-submit">Sign in</button>
    </form>
  </main>`;
}

// The topbar's "who am I": signed in as …, the scope, and sign out (or a way to sign in).
export function ViewerBadge({ onSignIn }) {
  const { data, error } = useQuery(VIEWER, {});
  if (error) {
    return signedIn()
      ? html`<span class="viewer" data-viewer="refused">token refused <button type="button" onClick=${forget} data-testid="signout">Sign out</button></span>`
      : html`<span class="viewer" data-viewer="anonymous"><button type="button" onClick=${onSignIn} data-testid="signin-open">Sign in</button></span>`;
  }
  if (!data) return null;
  const v = data.viewer;
  if (!v.authenticated) return html`<span class="viewer muted small" data-viewer="open" title="this mirror serves without authentication">open access</span>`;
  return html`<span class="viewer" data-viewer=${v.name} data-scope=${v.description}>
    <span class="small">signed in as <strong>${v.name}</strong> <span class="muted">(${v.method})</span></span>
    <span class="muted small" title="what your access shows you"> · ${v.description}</span>
    ${signedIn() ? html` <button type="button" onClick=${forget} data-testid="signout">Sign out</button>` : null}
  </span>`;
}

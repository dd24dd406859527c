// Screens are deep links: /ui/<screen>?<state>. The query string is the screen's whole state
// (cluster, filters, page cursor), so the back button, bookmarks and pasted links all work.
import { config } from "./config.js";

const { useEffect, useState, createElement } = window.React;
const NAVIGATE = "dra-mirror:navigate";

export function parseLocation(location = window.location) {
  const url = new URL(location.href);
  let path = url.pathname.startsWith(config.base) ? url.pathname.slice(config.base.length) : url.pathname;
  path = path.replace(/^\/+|\/+$/g, "");
  return { screen: path || "overview", params: Object.fromEntries(url.searchParams.entries()) };
}

// The URL of a screen with its parameters (empty, null and undefined ones are left out).
export function href(screen, params = {}) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "" && value !== false) search.set(key, String(value));
  }
  const path = screen === "overview" ? "/" : `/${screen}`;
  const query = search.toString();
  return `${config.base}${path}${query ? `?${query}` : ""}`;
}

export function navigate(url, { replace = false } = {}) {
  if (replace) window.history.replaceState(null, "", url);
  else window.history.pushState(null, "", url);
  window.dispatchEvent(new Event(NAVIGATE));
  if (!replace) window.scrollTo(0, 0);
}

export function useRoute() {
  const [route, setRoute] = useState(() => parseLocation());
  useEffect(() => {
    const changed = () => setRoute(parseLocation());
    window.addEventListener("popstate", changed);
    window.addEventListener(NAVIGATE, changed);
    return () => {
      window.removeEventListener("popstate", changed);
      window.removeEventListener(NAVIGATE, changed);
    };
  }, []);
  return route;
}

// An <a> that navigates inside the app (a modified click opens a tab, as any link).
export function Link({ to, children, className, title, ...rest }) {
  const onClick = (event) => {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate(to);
  };
  return createElement("a", { href: to, onClick, className, title, ...rest }, children);
}

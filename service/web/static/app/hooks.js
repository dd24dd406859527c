// Data hooks: a GraphQL query tied to a component, and live events that make it re-read.
import { liveState, onLiveState, query, subscribe } from "./graphql.js";

const { useCallback, useEffect, useRef, useState } = window.React;

// Run `document` with `variables` (null: not yet — e.g. waiting for another answer); a new
// `refresh` value re-reads. Keeps the previous data while re-reading, so a live refresh never
// blanks the screen.
export function useQuery(document, variables, refresh = 0) {
  const key = variables === null ? null : JSON.stringify(variables);
  const [result, setResult] = useState({ data: null, error: null, loading: key !== null, key: null });
  const [generation, setGeneration] = useState(0);
  useEffect(() => {
    if (key === null) return undefined;
    const controller = new AbortController();
    setResult((previous) => ({ ...previous, loading: true }));
    query(document, JSON.parse(key), { signal: controller.signal }).then(
      (data) => setResult({ data, error: null, loading: false, key }),
      (error) => {
        if (error.name !== "AbortError") setResult((previous) => ({ data: previous.key === key ? previous.data : null, error, loading: false, key }));
      },
    );
    return () => controller.abort();
  }, [document, key, generation, refresh]);
  const reload = useCallback(() => setGeneration((n) => n + 1), []);
  // Data of other variables is stale: a screen never shows one cluster's figures under another's name.
  const current = result.key === key;
  return { data: current ? result.data : null, error: current ? result.error : null, loading: result.loading || !current, reload };
}

// Calls `fn` at most once per `ms` (the first call at once, the last one never lost).
export function useThrottled(fn, ms) {
  const latest = useRef(fn);
  latest.current = fn;
  const timer = useRef(null);
  const last = useRef(0);
  useEffect(() => () => clearTimeout(timer.current), []);
  return useCallback(() => {
    const wait = last.current + ms - Date.now();
    if (timer.current) return;
    if (wait <= 0) {
      last.current = Date.now();
      latest.current();
      return;
    }
    timer.current = setTimeout(() => {
      timer.current = null;
      last.current = Date.now();
      latest.current();
    }, wait);
  }, [ms]);
}

// Live events: one subscription per `{ document, variables }`; `onEvent(data, which)` for
// each event. When the socket comes back after a loss, or the mirror says events were left
// out (a RESYNC event), `onReconnect()` (re-read: those events are lost).
export function useLive(subscriptions, onEvent, onReconnect) {
  const handler = useRef(onEvent);
  handler.current = onEvent;
  const reconnect = useRef(onReconnect);
  reconnect.current = onReconnect;
  const key = JSON.stringify(subscriptions);
  useEffect(() => {
    const specs = JSON.parse(key);
    const stops = specs.map((spec, index) =>
      subscribe(spec.document, spec.variables, (data) => {
        // RESYNC: events were left out (a batch too large to carry them, a subscriber behind).
        const event = Object.values(data)[0];
        if (event && event.type === "RESYNC") {
          if (reconnect.current) reconnect.current();
        } else handler.current(data, index);
      }, () => {}),
    );
    const unlisten = onLiveState((_state, reconnected) => {
      if (reconnected && reconnect.current) reconnect.current();
    });
    return () => {
      unlisten();
      stops.forEach((stop) => stop());
    };
  }, [key]);
}

export function useLiveState() {
  const [state, setState] = useState(liveState());
  useEffect(() => onLiveState((next) => setState(next)), []);
  return state;
}

// The time now, renewed every `ms`: durations on a screen ("idle 4m 10s", "3m ago") keep
// counting while the screen stays open.
let ticking = null;
const tickers = new Set();
export function useNow(ms = 1000) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const tick = () => setNow(Date.now());
    tickers.add(tick);
    if (!ticking) ticking = setInterval(() => tickers.forEach((t) => t()), ms);
    return () => {
      tickers.delete(tick);
      if (!tickers.size) { clearInterval(ticking); ticking = null; }
    };
  }, [ms]);
  return now;
}

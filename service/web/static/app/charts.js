// Charts with Chart.js (vendored), loaded the first time a screen draws one, so screens
// without charts never pay for it. `ChartBox` draws one chart; `Timeline` draws intervals
// (holders of a device, a claim's life) as horizontal bars over time, and optionally lines of
// busy percent (five-minute buckets) over the same time on a second axis, with gaps where unknown.
import { config } from "./config.js";
import { duration, instant } from "./format.js";
import { html, useEffect, useRef } from "./ui.js";

let loading = null;
export function loadChart() {
  if (window.Chart) return Promise.resolve(window.Chart);
  if (!loading) {
    loading = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = config.chart;
      script.onload = () => resolve(window.Chart);
      script.onerror = () => { loading = null; reject(new Error("the chart library failed to load")); };
      document.head.appendChild(script);
    });
  }
  return loading;
}

export function ChartBox({ spec, label, height = 300, marks = {} }) {
  const canvas = useRef(null);
  const chart = useRef(null);
  const key = JSON.stringify(spec);
  useEffect(() => {
    let cancelled = false;
    loadChart().then((Chart) => {
      if (cancelled || !canvas.current) return;
      if (chart.current) chart.current.destroy();
      const built = JSON.parse(key);
      built.options = { responsive: true, maintainAspectRatio: false, animation: false, ...(built.options || {}) };
      // Functions do not survive JSON: put the formatters back from the spec itself.
      if (spec.tickFormat) built.options.scales[spec.tickFormat.axis].ticks = { ...(built.options.scales[spec.tickFormat.axis].ticks || {}), callback: spec.tickFormat.format };
      if (spec.tooltip) built.options.plugins = { ...(built.options.plugins || {}), tooltip: { callbacks: { label: spec.tooltip } } };
      chart.current = new Chart(canvas.current, built);
      canvas.current.dataset.drawn = "true";
    });
    return () => {
      cancelled = true;
      if (chart.current) { chart.current.destroy(); chart.current = null; }
    };
  }, [key]);
  const data = Object.fromEntries(Object.entries(marks).map(([k, v]) => [`data-${k}`, v]));
  return html`<div class="chart-box" style=${{ height: `${height}px` }}><canvas ref=${canvas} role="img" aria-label=${label} ...${data}></canvas></div>`;
}

const COLORS = ["#2859c5", "#6a3fb5", "#1d7a46", "#a05a00", "#b3261e", "#0f7c8c", "#7a6a00", "#555f6d"];
export const color = (i) => COLORS[i % COLORS.length];

// Ticks of a time axis in hours before now: one step from a short list of round ones (about
// six ticks), and the axis starts on a whole step, so every gap between ticks is the same.
const STEPS = [1 / 60, 5 / 60, 10 / 60, 0.25, 0.5, 1, 2, 3, 6, 12, 24, 48, 72, 168, 336];
export function timeAxis(start) {
  const span = Math.max(-start, 1 / 60);
  const step = STEPS.find((s) => span / s <= 8) || STEPS[STEPS.length - 1];
  return { step, min: -Math.ceil(span / step - 1e-9) * step };
}

const BUCKET_MS = 300000;
// A line's points as steps across their buckets, clipped to the axis (null: a gap).
function steps(points, hours, min) {
  const out = [];
  for (const p of points) {
    const start = Math.max(hours(Date.parse(p.start)), min);
    const end = Math.min(hours(Date.parse(p.start) + BUCKET_MS), 0);
    if (end <= start) continue;
    if (p.busy === null) out.push({ x: start, y: null });
    else out.push({ x: start, y: p.busy }, { x: end, y: p.busy });
  }
  return out;
}

// rows: [{ label, since, until (null: still open), kind }] drawn between `from` and `to` (ms);
// lines: [{ label, points: [{ start, busy }] }] (busy null: unknown, a gap), each point drawn
// across its bucket; the canvas says them in `data-utilization` (JSON, as given).
export function Timeline({ rows, from, to, label, lines = [] }) {
  if (!rows.length) return null;
  const hours = (t) => (t - to) / 3600000;
  const axis = timeAxis(hours(from));
  const labels = [...new Set(rows.map((r) => r.label))];
  const kinds = [...new Set(rows.map((r) => r.kind))];
  const datasets = kinds.map((kind, i) => ({
    label: kind,
    backgroundColor: color(i),
    borderSkipped: false,
    barPercentage: 0.7,
    data: rows.filter((r) => r.kind === kind).map((r) => ({
      y: r.label,
      x: [hours(Math.max(Date.parse(r.since), from)), hours(r.until ? Math.min(Date.parse(r.until), to) : to)],
    })),
  }));
  lines.forEach((line, i) => datasets.push({
    type: "line",
    label: `busy % ${line.label}`,
    indexAxis: "x",
    xAxisID: "x",
    yAxisID: "busy",
    borderColor: color(kinds.length + i),
    backgroundColor: color(kinds.length + i),
    pointRadius: 0,
    borderWidth: 2,
    spanGaps: false,
    data: steps(line.points, hours, axis.min),
  }));
  const busyAxis = lines.length ? { busy: { type: "linear", position: "right", min: 0, max: 100, grid: { drawOnChartArea: false }, title: { display: true, text: "busy %" } } } : {};
  const spec = {
    type: "bar",
    data: { labels, datasets },
    options: {
      indexAxis: "y",
      scales: {
        x: { type: "linear", min: axis.min, max: 0, ticks: { stepSize: axis.step }, title: { display: true, text: `until ${instant(new Date(to).toISOString())}` } },
        y: { stacked: true, ticks: { autoSkip: false } },
        ...busyAxis,
      },
      plugins: { legend: { position: "bottom" } },
    },
    tickFormat: { axis: "x", format: (v) => (v === 0 ? "now" : `${duration(-v * 3600).replace(/ 0[smh]$/, "")} ago`) },
  };
  const marks = lines.length ? { utilization: JSON.stringify(lines) } : {};
  return html`<${ChartBox} spec=${spec} label=${label} height=${110 + labels.length * 30 + (lines.length ? 60 : 0)} marks=${marks} />`;
}

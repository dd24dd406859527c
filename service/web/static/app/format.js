// Formatting shared by the screens: durations, instants, CEL, quantities, device names.

export function duration(seconds) {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return "—";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

export function since(instant, now = Date.now()) {
  if (!instant) return "—";
  return `${duration((now - Date.parse(instant)) / 1000)} ago`;
}

export function instant(value) {
  if (!value) return "—";
  const date = new Date(value);
  return date.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

export function number(value, digits = 0) {
  if (value === null || value === undefined) return "—";
  return Number(value).toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

// A CEL expression split at its top-level && and || so each condition reads on its own line.
export function celLines(expression) {
  const lines = [];
  let depth = 0;
  let quote = null;
  let start = 0;
  for (let i = 0; i < expression.length; i += 1) {
    const c = expression[i];
    if (quote) {
      if (c === "\\") i += 1;
      else if (c === quote) quote = null;
      continue;
    }
    if (c === "'" || c === '"') quote = c;
    else if (c === "(" || c === "[" || c === "{") depth += 1;
    else if (c === ")" || c === "]" || c === "}") depth -= 1;
    else if (depth === 0 && (expression.startsWith("&&", i) || expression.startsWith("||", i))) {
      lines.push(expression.slice(start, i).trim());
      start = i;
      i += 1;
    }
  }
  lines.push(expression.slice(start).trim());
  return lines.filter(Boolean);
}

// Attribute names without the driver's domain when it is the device's own driver.
export function shortAttribute(name, driver) {
  return driver && name.startsWith(`${driver}/`) ? name.slice(driver.length + 1) : name;
}

export function attribute(device, name) {
  const attributes = device.attributes || {};
  return attributes[`${device.driver}/${name}`] ?? attributes[name] ?? null;
}

export function requestPolicy(policy) {
  if (!policy) return null;
  const parts = [];
  if (policy.validRange) {
    const { min, max, step } = policy.validRange;
    parts.push(`${min ?? "0"}–${max ?? "∞"}${step ? ` step ${step}` : ""}`);
  }
  if (policy.validValues && policy.validValues.length) parts.push(`one of ${policy.validValues.join(", ")}`);
  if (policy.default) parts.push(`default ${policy.default}`);
  return parts.join("; ");
}

export function deviceSpec(device) {
  return `${device.driver}/${device.pool}/${device.name}`;
}

export function plural(count, word, many = `${word}s`) {
  return `${number(count)} ${count === 1 ? word : many}`;
}

// A Kubernetes quantity ("143771Mi", "10G", "500m", "1e3") as a number; null when unreadable.
const SUFFIX = {
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60,
  n: 1e-9, u: 1e-6, m: 1e-3, "": 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
};
export function quantity(text) {
  if (text === null || text === undefined) return null;
  const match = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:[eE]([+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?)$/.exec(String(text).trim());
  if (!match) return null;
  const value = Number(match[1]);
  if (match[2] !== undefined) return value * 10 ** Number(match[2]);
  return value * SUFFIX[match[3] || ""];
}

// Grouping a page of devices the way the Resource Slices screen shows them: by pool, then by
// the counter set partitions consume (a physical GPU and its MIG partitions), and which held
// siblings block a blocked device — pure functions over the GraphQL answers.
import { attribute, quantity, requestPolicy } from "../format.js";

// pools: [{ key, first, sliceNames, groups: [{ counterSet, gpu, devices, capacity }], loose }]
export function groupPools(devices, nodeSlices) {
  const pools = new Map();
  for (const d of devices) {
    const key = `${d.cluster}/${d.driver}/${d.pool}`;
    if (!pools.has(key)) pools.set(key, { key, first: d, devices: [] });
    pools.get(key).devices.push(d);
  }
  return [...pools.values()].map((pool) => {
    const { first } = pool;
    const slices = nodeSlices.filter((s) => s.cluster === first.cluster && s.driver === first.driver && s.pool.name === first.pool);
    const capacity = new Map();
    for (const s of slices) for (const set of s.sharedCounters || []) capacity.set(set.name, set.counters || {});
    const names = new Set(slices.map((s) => s.name));
    for (const d of pool.devices) names.add(d.slice.name);
    const groups = new Map();
    const loose = [];
    for (const d of pool.devices) {
      const set = d.consumesCounters.length ? d.consumesCounters[0].counterSet : null;
      if (set === null) {
        loose.push(d);
        continue;
      }
      if (!groups.has(set)) groups.set(set, { counterSet: set, gpu: null, devices: [], capacity: capacity.get(set) || null });
      groups.get(set).devices.push(d);
    }
    for (const group of groups.values()) {
      // The physical GPU: the device of type "gpu" (else the one without a parent uuid).
      group.gpu = group.devices.find((d) => attribute(d, "type") === "gpu")
        || group.devices.find((d) => !attribute(d, "parentUUID")) || null;
    }
    return { key: pool.key, first, sliceNames: [...names].sort(), groups: [...groups.values()], loose };
  });
}

function consumed(device, set) {
  const entry = device.consumesCounters.find((c) => c.counterSet === set);
  return entry ? entry.counters || {} : {};
}

const isHeld = (d) => d.status === "HELD" || d.status === "SHARED";

// The held siblings that take counters a blocked device needs (with the set's capacity known:
// only those on counters that no longer fit; without it: every held sibling sharing a counter).
export function blockers(device, group) {
  const set = group.counterSet;
  const need = consumed(device, set);
  const held = group.devices.filter((d) => d !== device && isHeld(d));
  const used = {};
  for (const h of held) {
    for (const [name, value] of Object.entries(consumed(h, set))) used[name] = (used[name] || 0) + (quantity(value) || 0);
  }
  const short = Object.keys(need).filter((name) => {
    const wanted = quantity(need[name]) || 0;
    if (wanted <= 0) return false;
    if (!group.capacity || group.capacity[name] === undefined) return (used[name] || 0) > 0;
    return (quantity(group.capacity[name]) || 0) - (used[name] || 0) < wanted;
  });
  return held.filter((h) => short.some((name) => (quantity(consumed(h, set)[name]) || 0) > 0));
}

// "memory 143771Mi; bandwidth 100G (1G–100G step 1G; default 1G), 90G left".
export function capacityText(device) {
  const left = new Map((device.remainingCapacity || []).map((c) => [c.name, c.value]));
  return device.capacity.map((c) => {
    const name = c.name.startsWith(`${device.driver}/`) ? c.name.slice(device.driver.length + 1) : c.name;
    const policy = device.shareable ? requestPolicy(c.requestPolicy) : null;
    const remaining = device.shareable && left.has(c.name) ? `, ${left.get(c.name)} left` : "";
    return `${name} ${c.value}${policy ? ` (requests ${policy})` : ""}${remaining}`;
  }).join("; ");
}

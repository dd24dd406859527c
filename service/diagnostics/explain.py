"""explainClaim, the pure part: why a claim is Pending, or whether an allocated one is healthy.

Given one claim and the state of its cluster (classes, devices, the allocation ledger, claims,
pods, nodes), `explain_claim` returns a `Diagnosis` in the operations manual's words:

    pending claims (verdict of the first request that blocks, refined):
      class-missing    the DeviceClass does not exist (the claim stays Pending)
      driver-missing   the driver publishes no devices (no slices from it, or none on GPU nodes)
      no-devices       the class matches none of the driver's devices
      no-match         no device matches the conditions (which selector rejected how many)
      selector-error   a selector failed to compile or evaluate (the message says which)
      derived-attribute-error   a derived attribute's CEL (KEP-6080) fails on a candidate
                       device: kube-scheduler aborts the allocation, the pod stays Pending
      all-held         no devices left: every matching device is held — by which claims, which idle
      sharing-off      sharing is off and another pod took the device first
      no-capacity / tainted / not-enough / never-fits / constraints / search-limit
                       (see `verdicts`; `waiting` adds: never-fits when even with every holder
                       gone it cannot be placed, the pods ahead of it in the queue, the nodes
                       its pods may use and the matching devices free on the others)
      node-resources   devices are free only on nodes without CPU/memory for its pod
      allocatable      it could be allocated now: it waits for its pod to be scheduled
    allocated claims (the manual's checklist: allocated, node and device named, the pod among
    the consumers, the pod Running):
      ok               every check passes
      node-resources   allocated, but its pod is Pending: the node lacks CPU or memory
      idle             allocated, but no consumer pod is Running
      pod-not-running  a consumer pod is not Running (yet)
    deleting           deletion requested; finalizers pending

Scope: the diagnosis is always computed on the whole cluster (what is held is held, whoever
holds it); `visible(namespace)`, when given, says which holders the asker may see. Holders
outside it are counted (`holders_hidden`), never named: not in `holders`, not in a request's
`held_by`, not in the message ("held by … 2 claim(s) outside your scope"); every verdict and
count is the one the whole cluster gives. `withheld` keeps those holders for callers that
compute over them (the plan's cleanup candidates) and never show them.

Promises: pure (reads records, never mutates the ledger); every verdict comes with a one-line
`message` and the structured counts behind it. The answer's types and verdict names are in
`diagnoses`; an allocated claim's checklist in `checklist`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from dra_mirror.service.diagnostics.checklist import checklist
from dra_mirror.service.diagnostics.cluster import (
    driver_of_selectors,
    gpu_nodes,
    node_usage,
    pod_requests,
    shortfall,
)
from dra_mirror.service.diagnostics.derived import failures as derived_failures
from dra_mirror.service.diagnostics.diagnoses import (
    ALLOCATABLE,
    DELETING,
    DERIVED_ERROR,
    DRIVER_MISSING,
    MAX_HOLDERS,
    NODE_RESOURCES,
    SHARING_OFF,
    Diagnosis,
    Holder,
)
from dra_mirror.service.diagnostics.explain_causes import (
    derived_message,
    state_node_constraints,
    wait_causes,
)
from dra_mirror.service.diagnostics.ledger import Ledger
from dra_mirror.service.diagnostics.placement import allocate
from dra_mirror.service.diagnostics.verdicts import (
    ALL_HELD,
    FITS,
    NO_DEVICES,
    RequestVerdict,
)
from dra_mirror.service.model.records import (
    Allocation,
    ClaimRecord,
    DeviceClassRecord,
    DeviceEntry,
    NodeRecord,
    ObjectKey,
    PodRecord,
    key_of,
)


def explain_claim(
    claim: ClaimRecord,
    *,
    classes: Mapping[str, DeviceClassRecord],
    devices: Sequence[DeviceEntry],
    ledger: Ledger,
    claims: Mapping[ObjectKey, ClaimRecord],
    pods: Sequence[PodRecord],
    nodes: Sequence[NodeRecord],
    idle_since: Mapping[ObjectKey, str | None] | None = None,
    eligible_nodes: Collection[str] | None = None,
    visible: Callable[[str], bool] | None = None,
) -> Diagnosis:
    """The diagnosis of one claim against the current state of its cluster. `eligible_nodes`:
    the nodes its pods may run on (nodeSelector/affinity), when known; else every node.
    `visible(namespace)`: whether the asker may see claims there (None: every claim)."""
    key = key_of(claim)
    namespace, name = claim.meta.namespace, claim.meta.name
    users = [
        p
        for p in pods
        if p.meta.namespace == namespace
        and (p.extended_claim_name == name or any(c.claim_name == name for c in p.claims))
    ]
    base = Diagnosis(
        claim=key, state=claim.state, verdict="", message="", pods=[key_of(p) for p in users]
    )
    if claim.meta.deleted_at is not None:
        base.verdict = DELETING
        finalizers = ", ".join(claim.meta.finalizers) or "none"
        base.message = f"deletion requested at {claim.meta.deleted_at}; finalizers: {finalizers}"
        return base
    if claim.allocation is not None:
        return checklist(claim, base, users, pods, nodes)
    # Pending: ask the allocator, over the nodes its waiting pods may use (a pod pinned by
    # nodeName; `eligible_nodes` when the caller knows the pods' nodeSelector/affinity).
    scope = set(eligible_nodes) if eligible_nodes is not None else None
    pinned = {p.node_name for p in users if p.node_name and p.phase == "Pending"}
    if pinned:
        scope = pinned if scope is None else scope & pinned
    candidates = (
        devices if scope is None else [e for e in devices if e.node is None or e.node in scope]
    )
    broken = derived_failures(claim, classes, candidates)
    if broken:
        base.verdict, base.message = DERIVED_ERROR, derived_message(broken[0])
        return base
    result = allocate(claim, classes=classes, devices=candidates, ledger=ledger, share_id=_no_share)
    stuck = [p for p in users if p.phase == "Pending"]
    if isinstance(result, Allocation) and result.node_name and stuck and nodes:
        # kube-scheduler needs one node with both: free devices and room for the pod.
        found = _node_with_room(claim, stuck[0], result, candidates, classes, ledger, pods, nodes)
        if isinstance(found, str):
            base.verdict, base.message = NODE_RESOURCES, found
            return base
        result = found
    if isinstance(result, Allocation):
        base.verdict = ALLOCATABLE
        where = f" on node {result.node_name}" if result.node_name else ""
        waiting = ", ".join(p.name for p in base.pods) or "no pod references it yet"
        base.message = (
            f"devices are free{where}: the claim waits for its pod to be scheduled ({waiting})"
        )
        unschedulable = [p for p in stuck if p.reason == "Unschedulable"]
        if unschedulable:
            base.message += (
                f"; pod {unschedulable[0].meta.name} is Unschedulable: its nodeSelector/affinity "
                "or the node's CPU/memory rule those devices out"
            )
        return base
    base.requests = result.requests
    holders = sorted({h for v in result.requests for h in v.held_by})
    base.holders_total = len(holders)
    by_uid = {p.meta.uid: p for p in pods} if holders else {}
    described = [_holder(h, claims, by_uid, idle_since or {}) for h in holders]
    # Idle holders first: they are the ones to clean up. Long lists are cut, not the count.
    described.sort(key=lambda h: (not h.idle, h.claim))
    shown, hidden = described, []
    if visible is not None:
        shown = [h for h in described if visible(h.claim.namespace)]
        hidden = [h for h in described if not visible(h.claim.namespace)]
    base.holders = sorted(shown[:MAX_HOLDERS], key=lambda h: h.claim)
    base.holders_hidden = len(hidden)
    base.withheld = sorted(hidden[:MAX_HOLDERS], key=lambda h: h.claim)
    blocking = _blocking(result.requests)
    base.verdict, base.message = _pending_reason(
        blocking, base, claim, classes, devices, nodes, visible, scoped=scope is not None
    )
    wait_causes(
        base, blocking, claim, users, classes, candidates, ledger, claims, pods, nodes, visible
    )
    if visible is not None:
        for v in base.requests:
            v.held_by = [k for k in v.held_by if visible(k.namespace)]
    if base.verdict != DRIVER_MISSING:
        # "Or none on GPU nodes": the driver runs somewhere, but not on every GPU node.
        device_class = classes.get(blocking.class_name or "")
        driver = driver_of_selectors(device_class.selectors if device_class else ())
        if driver is not None:
            covered = {e.node for e in devices if e.key.driver == driver}
            missing = [
                n.meta.name
                for n in gpu_nodes(nodes)
                if n.meta.name not in covered and (scope is None or n.meta.name in scope)
            ]
            if missing:
                base.nodes_without_driver = missing
                listed = ", ".join(missing[:10]) + (
                    f" and {len(missing) - 10} more" if len(missing) > 10 else ""
                )
                base.message += f" (GPU nodes where {driver} publishes no devices: {listed})"
    if scope is not None:
        state_node_constraints(base, claim, users, scope, classes, devices, nodes, ledger)
    return base


def _blocking(verdicts: Sequence[RequestVerdict]) -> RequestVerdict:
    """The first request none of whose alternatives fits (its first alternative's verdict)."""
    groups: dict[str, list[RequestVerdict]] = {}
    for v in verdicts:
        groups.setdefault(v.request.split("/")[0], []).append(v)
    for group in groups.values():
        if not any(v.verdict == FITS for v in group):
            return group[0]
    return verdicts[0]


def _no_share() -> str:
    return "explain"  # explain never writes the allocation it finds


def _node_with_room(
    claim: ClaimRecord,
    pod: PodRecord,
    found: Allocation,
    candidates: Sequence[DeviceEntry],
    classes: Mapping[str, DeviceClassRecord],
    ledger: Ledger,
    pods: Sequence[PodRecord],
    nodes: Sequence[NodeRecord],
) -> Allocation | str:
    """An allocation on a node that also has CPU and memory for the pod, or why there is none."""
    wanted = pod_requests(pod)
    if not wanted:
        return found
    usage = node_usage(pods, excluding=pod)
    lacking = {
        n.meta.name: why
        for n in nodes
        if (why := shortfall(wanted, n, usage.get(n.meta.name, {}))) is not None
    }
    if found.node_name not in lacking:
        return found
    roomy = [e for e in candidates if e.node is None or e.node not in lacking]
    again = allocate(claim, classes=classes, devices=roomy, ledger=ledger, share_id=_no_share)
    if isinstance(again, Allocation):
        return again
    resource, requested, allocatable = lacking[found.node_name or ""]
    return (
        f"devices are free on node {found.node_name}, but pod {pod.meta.name} does not fit "
        f"there: the node lacks {resource} ({requested} requested with the pods already there, "
        f"{allocatable} allocatable), and no node with room for the pod has free devices"
    )


def _holder(
    key: ObjectKey,
    claims: Mapping[ObjectKey, ClaimRecord],
    by_uid: Mapping[str, PodRecord],
    idle_since: Mapping[ObjectKey, str | None],
) -> Holder:
    record = claims.get(key)
    reserved = record.reserved_for if record is not None else ()
    consumers = [by_uid[c.uid] for c in reserved if c.uid in by_uid]
    running = any(p.phase == "Running" for p in consumers)
    return Holder(
        claim=key,
        pods=[key_of(p) for p in consumers],
        running=running,
        idle=not running,
        idle_since=idle_since.get(key),
    )


def _pending_reason(
    v: RequestVerdict,
    diagnosis: Diagnosis,
    claim: ClaimRecord,
    classes: Mapping[str, DeviceClassRecord],
    devices: Sequence[DeviceEntry],
    nodes: Sequence[NodeRecord],
    visible: Callable[[str], bool] | None = None,
    *,
    scoped: bool = False,
) -> tuple[str, str]:
    prefix = f"request {v.request}: "
    if v.verdict == NO_DEVICES:
        device_class = classes.get(v.class_name or "")
        driver = driver_of_selectors(device_class.selectors if device_class else ())
        if driver is not None and not any(e.key.driver == driver for e in devices):
            on_gpu_nodes = [n.meta.name for n in gpu_nodes(nodes)]
            diagnosis.nodes_without_driver = on_gpu_nodes
            where = (
                f"; GPU nodes without its devices: {', '.join(on_gpu_nodes)}"
                if on_gpu_nodes
                else ""
            )
            return DRIVER_MISSING, (
                f"{prefix}the driver {driver} publishes no devices (no ResourceSlice from it){where}"
            )
        if scoped:
            return v.verdict, (
                f"{prefix}DeviceClass {v.class_name} matches no device on the nodes its pods may "
                "use"
            )
    if v.verdict == "no-match":
        rejected = []
        before = v.class_matched
        for expression, passing in v.selector_matches:
            if passing < before:
                rejected.append(f"{expression!r} rejected {before - passing} of {before}")
            before = passing
        return v.verdict, f"{prefix}no device matches the conditions: {'; '.join(rejected)}"
    if v.verdict == "selector-error":
        errors = "; ".join(f"{expr!r}: {msg}" for expr, msg in v.selector_errors)
        return v.verdict, f"{prefix}a selector failed: {errors}"
    if v.verdict == ALL_HELD:
        return _held(prefix, v, diagnosis, devices, classes, visible)
    return v.verdict, prefix + v.summary()


def _held(
    prefix: str,
    v: RequestVerdict,
    diagnosis: Diagnosis,
    devices: Sequence[DeviceEntry],
    classes: Mapping[str, DeviceClassRecord],
    visible: Callable[[str], bool] | None,
) -> tuple[str, str]:
    """all-held, or sharing-off when no holder is idle and nothing could be shared: decided on
    every holder, naming only those the asker may see (the others are counted)."""
    wanted = set(v.held_by)
    # Idle holders first: they are the ones to clean up.
    held = sorted(
        (h for h in diagnosis.holders if h.claim in wanted), key=lambda h: (not h.idle, h.claim)
    )
    out_of_scope = [h for h in diagnosis.withheld if h.claim in wanted]
    hidden = sum(1 for k in v.held_by if not visible(k.namespace)) if visible else 0
    idle = [h for h in held if h.idle] + [h for h in out_of_scope if h.idle]
    names = [_claim_ref(h.claim) + (" (idle)" if h.idle else "") for h in held[:10]]
    text = ", ".join(names)
    if len(v.held_by) - hidden > 10:
        text += f" and {len(v.held_by) - hidden - 10} more"
    if hidden:
        text += (", " if text else "") + f"{hidden} claim(s) outside your scope"
    if (held or out_of_scope) and not idle and not _any_shareable(v, devices, classes):
        users = [_claim_ref(p) for h in held for p in h.pods]
        if out_of_scope:
            users.append("a pod outside your scope")
        return SHARING_OFF, (
            f"{prefix}sharing is off and another pod took the device first: {', '.join(users)} "
            f"(through {text})"
        )
    idle_note = f"; {len(idle)} of them idle" if idle else ""
    if idle and len(v.held_by) > len(held) + len(out_of_scope):
        idle_note += f" (of the first {len(held) + len(out_of_scope)})"
    return ALL_HELD, (
        f"{prefix}no devices left: every matching device is held by {text}{idle_note}"
        + _short_note(v)
        + _incompatible_note(v)
    )


def _incompatible_note(v: RequestVerdict) -> str:
    if not v.incompatible:
        return ""
    return (
        f"; {v.incompatible} matching device(s) refused by compatibility groups (KEP-5963): "
        "their counter set already serves partitions of another group"
    )


def _short_note(v: RequestVerdict) -> str:
    """What shared devices lack: "; shared devices too full: gpu.nvidia.com/n1/gpu-0 (35
    claims) has memory 415Mi left, one share takes 4Gi"."""
    if not v.short:
        return ""
    return "; shared devices too full: " + "; ".join(str(s) for s in v.short)


def _any_shareable(
    v: RequestVerdict, devices: Sequence[DeviceEntry], classes: Mapping[str, DeviceClassRecord]
) -> bool:
    """Whether any device the request's class covers allows multiple allocations."""
    device_class = classes.get(v.class_name or "")
    driver = driver_of_selectors(device_class.selectors if device_class else ())
    return any(e.device.shareable for e in devices if driver is None or e.key.driver == driver)


def _claim_ref(key: ObjectKey) -> str:
    return f"{key.namespace}/{key.name}" if key.namespace else key.name

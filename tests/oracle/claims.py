"""Claims and pods in the oracle: kubectl's STATE, consumers (pods and PodGroups), idleness,
and the devices a pod uses, read off the API's rules (see `tests.oracle.truth`)."""

from __future__ import annotations

from dataclasses import dataclass

from tests.oracle import reading
from tests.oracle.reading import Raw

DeviceId = tuple[str, str, str]


@dataclass(frozen=True)
class ClaimTruth:
    namespace: str
    name: str
    uid: str
    kubectl_state: str  # the STATE column: "pending", "allocated,reserved", "deleted,…"
    state: str  # pending | allocated | reserved | deleting
    devices: tuple[
        tuple[str, str, str, str, str | None], ...
    ]  # (request, driver, pool, device, shareID)
    consumers: tuple[str, ...]  # pod names
    idle: bool


def kubectl_state(claim: Raw) -> str:
    """kubectl's STATE column (pkg/printers/internalversion printers.go): "deleted" when
    deletionTimestamp is set; "pending" when not allocated (and not deleted), else
    "allocated"; then "reserved" when status.reservedFor is not empty."""
    words = []
    if reading.deleting(claim):
        words.append("deleted")
    if reading.allocation(claim) is None:
        if not words:
            words.append("pending")
    else:
        words.append("allocated")
        if reading.reserved_for(claim):
            words.append("reserved")
    return ",".join(words)


def state_word(kubectl: str) -> str:
    """The graph's one-word ClaimState: the most telling word of the STATE column."""
    for word, state in (
        ("deleted", "deleting"),
        ("reserved", "reserved"),
        ("allocated", "allocated"),
    ):
        if word in kubectl.split(","):
            return state
    return "pending"


def consumer_pods(claim: Raw, pods: list[Raw]) -> list[Raw]:
    """The pods consuming a claim. ResourceClaimConsumerReference: apiGroup "is empty for the
    core API", resource "for example pods", and uid "identifies exactly one incarnation of the
    resource" (a new pod under the old name is not the consumer). [1.36+] a claim may be
    reserved for a PodGroup (apiGroup scheduling.k8s.io, resource podgroups); its consumers are
    the pods that join the group through spec.schedulingGroup.podGroupName."""
    namespace = reading.meta(claim).get("namespace") or ""
    local = [p for p in pods if (reading.meta(p).get("namespace") or "") == namespace]
    found: dict[str, Raw] = {}
    for ref in reading.reserved_for(claim):
        group, resource, name = ref.get("apiGroup") or "", ref.get("resource"), ref.get("name")
        if group == "" and resource == "pods":
            for pod in local:
                uid = reading.meta(pod).get("uid")
                if reading.meta(pod).get("name") == name and (
                    not ref.get("uid") or not uid or ref.get("uid") == uid
                ):
                    found[name] = pod
        elif group == "scheduling.k8s.io" and resource == "podgroups":
            for pod in local:
                if reading.pod_group(pod) == name:
                    found[reading.meta(pod)["name"]] = pod
    return [found[n] for n in sorted(found)]


def _result(r: Raw) -> tuple[str, str, str, str, str | None]:
    return (
        r.get("request") or "",
        r.get("driver") or "",
        r.get("pool") or "",
        r.get("device") or "",
        r.get("shareID") or None,
    )


def claim_truth(claim: Raw, pods: list[Raw]) -> ClaimTruth:
    m = reading.meta(claim)
    kubectl = kubectl_state(claim)
    consumers = consumer_pods(claim, pods)
    return ClaimTruth(
        namespace=m.get("namespace") or "",
        name=m.get("name") or "",
        uid=m.get("uid") or "",
        kubectl_state=kubectl,
        state=state_word(kubectl),
        devices=tuple(sorted(_result(r) for r in reading.results(claim))),
        consumers=tuple(reading.meta(p)["name"] for p in consumers),
        # An idle holder: allocated, and no consumer pod is Running. A consumer that
        # is neither a pod nor a PodGroup is something the mirror cannot see run: in use.
        idle=reading.allocation(claim) is not None
        and not any(reading.pod_phase(p) == "Running" for p in consumers)
        and not _unseen_consumers(claim),
    )


def _unseen_consumers(claim: Raw) -> bool:
    """Whether the claim is reserved for a consumer of another kind than pods and PodGroups."""
    for ref in reading.reserved_for(claim):
        kind = (ref.get("apiGroup") or "", ref.get("resource"))
        if kind not in (("", "pods"), ("scheduling.k8s.io", "podgroups")):
            return True
    return False


def pod_devices(pod: Raw, claims: dict[tuple[str, str], Raw]) -> tuple[DeviceId, ...]:
    """Devices allocated to the claims a pod uses. A generated claim must be controlled by the
    pod (resourceclaim.IsForPod: an ownerReference with controller true and the pod's uid)."""
    namespace, uid = reading.meta(pod).get("namespace") or "", reading.meta(pod).get("uid")
    templated = {
        e.get("name") for e in (pod.get("spec") or {}).get("resourceClaims") or []
        if e.get("resourceClaimTemplateName")
        or (e.get("source") or {}).get("resourceClaimTemplateName")
    }  # fmt: skip
    generated = {
        s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        if s.get("name") in templated
    }
    found: set[DeviceId] = set()
    for name in reading.pod_claim_names(pod):
        claim = claims.get((namespace, name))
        if claim is None:
            continue
        if name in generated and not any(
            o.get("controller") and o.get("uid") == uid
            for o in reading.meta(claim).get("ownerReferences") or []
        ):
            continue
        for r in reading.results(claim):
            found.add((r.get("driver") or "", r.get("pool") or "", r.get("device") or ""))
    return tuple(sorted(found))

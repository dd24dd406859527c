"""PodGroups in the oracle (scheduling.k8s.io, KEP-5729), read off the API's comments.

PodGroupSpec.resourceClaims: "ResourceClaimName is the name of a ResourceClaim object in the
same namespace as this PodGroup. The ResourceClaim will be reserved for the PodGroup instead of
its individual pods"; for a template, "the PodGroup name and resource name, along with a
generated component, will be used to form a unique name for the ResourceClaim, which will be
recorded in podgroup.status.resourceClaimStatuses". A group's pods are those whose
spec.schedulingGroup.podGroupName names it, in its namespace. The KEP's "Deallocate": a claim
reserved for a PodGroup stays reserved until the group is deleted — a group holding devices
(a claim it names is allocated and its reservedFor names the group) with none of its pods
Running holds them idle.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.oracle import reading
from tests.oracle.reading import Raw

GroupKey = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True)
class GroupTruth:
    claims: tuple[tuple[str, str | None], ...]  # (entry name, claim name), in spec order
    pods: tuple[str, ...]
    held: tuple[str, ...]  # claims allocated and reserved for the group
    idle_held: bool


def claim_names(group: Raw) -> list[tuple[str, str | None]]:
    spec, status = group.get("spec") or {}, group.get("status") or {}
    generated = {
        s.get("name"): s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or ()
    }
    return [
        (
            entry.get("name") or "",
            entry.get("resourceClaimName") or generated.get(entry.get("name")),
        )
        for entry in spec.get("resourceClaims") or ()
    ]


def _reserved_for_group(claim: Raw, name: str) -> bool:
    return any(
        ref.get("apiGroup") == "scheduling.k8s.io"
        and ref.get("resource") == "podgroups"
        and ref.get("name") == name
        for ref in reading.reserved_for(claim)
    )


def group_truths(
    groups: list[Raw], claims: list[Raw], pods: list[Raw]
) -> dict[GroupKey, GroupTruth]:
    by_claim = {(reading.meta(c).get("namespace"), reading.meta(c).get("name")): c for c in claims}
    found = {}
    for group in groups:
        meta = reading.meta(group)
        namespace, name = meta.get("namespace") or "", meta.get("name") or ""
        members = [
            p for p in pods
            if reading.meta(p).get("namespace") == namespace
            and ((p.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName") == name
        ]  # fmt: skip
        names = claim_names(group)
        held = sorted({
            claim for _, claim in names
            if claim and (namespace, claim) in by_claim
            and reading.allocation(by_claim[(namespace, claim)]) is not None
            and _reserved_for_group(by_claim[(namespace, claim)], name)
        })  # fmt: skip
        running = any(((p.get("status") or {}).get("phase")) == "Running" for p in members)
        found[(namespace, name)] = GroupTruth(
            claims=tuple(names),
            pods=tuple(sorted(reading.meta(p).get("name") or "" for p in members)),
            held=tuple(held),
            idle_held=bool(held) and not running,
        )
    return found


def claim_groups(groups: list[Raw], claims: list[Raw]) -> dict[tuple[str, str], tuple[str, ...]]:
    """(namespace, claim) -> the PodGroups (that exist) naming it, or that it is reserved for."""
    existing = {(reading.meta(g).get("namespace"), reading.meta(g).get("name")): g for g in groups}
    found: dict[tuple[str, str], tuple[str, ...]] = {}
    for claim in claims:
        meta = reading.meta(claim)
        namespace, name = meta.get("namespace") or "", meta.get("name") or ""
        names = {
            group_name
            for (group_ns, group_name), group in existing.items()
            if group_ns == namespace and any(c == name for _, c in claim_names(group))
        }
        names |= {
            ref.get("name") for ref in reading.reserved_for(claim)
            if ref.get("apiGroup") == "scheduling.k8s.io" and ref.get("resource") == "podgroups"
            and (namespace, ref.get("name")) in existing
        }  # fmt: skip
        found[(namespace, name)] = tuple(sorted(names))
    return found

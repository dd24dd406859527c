"""Why a claim cannot be placed: one verdict per request, with the counts explainClaim shows.

For each request (each firstAvailable subrequest, named `req/sub`) of a claim the allocator
could not place, `claim_verdicts` reports how many devices the class covers, how many pass each
request selector (cumulatively, in order: the count after that selector), the selector
errors, how many of the matching devices could be given now (free, or shareable with enough
capacity, counters fitting, taints tolerated), on which nodes, which claims hold the others —
and one verdict, in the words of the operations manual. For shareable devices whose
remaining capacity is too small (`allowMultipleAllocations`, e.g. a GPU shared through
NVIDIA's ConsumableShares), `short` says, for the first few, what is left and what one share
would take, and how many claims share the device:

    class-missing   the DeviceClass does not exist (the claim stays Pending)
    selector-error  a selector failed to compile or to evaluate (never "no match")
    no-devices      the class covers no published device (driver publishes none)
    no-match        devices exist, but the request's selectors reject them all
    all-held        every matching device is held (or blocked by sibling partitions)
    tainted         the free matching devices carry NoSchedule/NoExecute taints
    no-capacity     nobody holds them, yet none can give the capacity asked (outside the
                    capacity's requestPolicy, more than the device has, or no counter set)
    not-enough      fewer free devices on any one node than the request needs
    constraints     each request fits alone, not together (matchAttribute, distinct…)
    search-limit    the search budget ran out before an answer
    unsupported     an allocationMode this allocator does not know (Kubernetes refuses it too)
    fits            this request alone could be placed (another one blocks the claim)

Promises: pure; reads the ledger, never writes it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from dra_mirror.service.diagnostics.candidates import (
    CAPACITY,
    COUNTERS,
    POLICY,
    TAINTED,
    Alternative,
    Match,
    fit,
    share_consumption,
)
from dra_mirror.service.diagnostics.ledger import Ledger
from dra_mirror.service.model.records import ClaimRecord, DeviceEntry, ObjectKey

CLASS_MISSING = "class-missing"
SELECTOR_ERROR = "selector-error"
NO_DEVICES = "no-devices"
NO_MATCH = "no-match"
ALL_HELD = "all-held"
ALL_TAINTED = "tainted"
NO_CAPACITY = "no-capacity"
NOT_ENOUGH = "not-enough"
CONSTRAINTS = "constraints"
SEARCH_LIMIT = "search-limit"
FITS = "fits"
UNSUPPORTED = "unsupported"

_SUMMARY = {
    CLASS_MISSING: "DeviceClass {cls} does not exist",
    SELECTOR_ERROR: "a selector failed to evaluate",
    NO_DEVICES: "DeviceClass {cls} matches no published device",
    NO_MATCH: "no device matches the request's selectors",
    ALL_HELD: "every matching device is held by other claims",
    ALL_TAINTED: "the free matching devices are tainted and not tolerated",
    NO_CAPACITY: "no matching device can give the capacity requested",
    NOT_ENOUGH: "not enough free matching devices on one node",
    CONSTRAINTS: "the requests fit alone but not together (constraints)",
    SEARCH_LIMIT: "the allocation search gave up (budget exhausted)",
    FITS: "this request could be placed",
    UNSUPPORTED: "its allocationMode is not supported",
}


SHORT_SHOWN = 3  # shareable devices `short` describes


@dataclass(frozen=True)
class Short:
    """A shareable device without room for one more share: per capacity the share would
    exceed, (left now, one share's consumption, the capacity's value as published); and how
    many claims share it."""

    device: str  # "driver/pool/device"
    missing: dict[str, tuple[Fraction, Fraction, str]]
    sharers: int


@dataclass
class RequestVerdict:
    request: str
    class_name: str | None
    class_exists: bool
    class_matched: int
    selector_matches: list[tuple[str, int]]
    selector_errors: list[tuple[str, str]]
    free_or_shareable: int
    nodes: list[str]
    held_by: list[ObjectKey]
    verdict: str
    needed: int = 1  # devices the request needs (ExactCount count; All: every match)
    short: list[Short] = field(default_factory=list)  # shareable devices with too little left

    def summary(self) -> str:
        """One line in the manual's words."""
        return _SUMMARY[self.verdict].format(cls=self.class_name)


@dataclass
class Unsatisfiable:
    """The allocator's answer when a claim cannot be placed."""

    requests: list[RequestVerdict] = field(default_factory=list)
    node: str | None = None  # the node the allocation was restricted to, if any
    message: str = ""  # a scheduler-like one-liner naming the first blocking request


def claim_verdicts(
    claim: ClaimRecord,
    per_request: Sequence[Sequence[Match]],
    ledger: Ledger,
    *,
    node: str | None = None,
    search_limited: bool = False,
) -> Unsatisfiable:
    """The verdicts for a claim the allocator could not place."""
    grouped = [[request_verdict(m, ledger) for m in ms] for ms in per_request]
    verdicts = [v for vs in grouped for v in vs]
    if grouped and all(any(v.verdict == FITS for v in vs) for vs in grouped):
        # Every request has an alternative that fits alone; together they do not.
        fallback = SEARCH_LIMIT if search_limited else CONSTRAINTS
        for v in verdicts:
            if v.verdict == FITS:
                v.verdict = fallback
    blocking = [vs[0] for vs in grouped if not any(v.verdict == FITS for v in vs)]
    shown = blocking or verdicts
    message = (
        f"cannot allocate all claims: request {shown[0].request}: {shown[0].summary()}"
        if shown
        else "cannot allocate all claims: the claim has no requests"
    )
    return Unsatisfiable(requests=verdicts, node=node, message=message)


def request_verdict(m: Match, ledger: Ledger) -> RequestVerdict:
    """The counts and verdict for one request alternative against the current ledger."""
    alt = m.alternative
    reasons: Counter[str] = Counter()
    free_per_node: Counter[str | None] = Counter()
    per_node: Counter[str | None] = Counter()
    held_by: set[ObjectKey] = set()
    short: list[Short] = []
    for entry in m.devices:
        per_node[entry.node] += 1
        reason, _ = fit(entry, alt, ledger)
        reasons[reason or "free"] += 1
        if reason is None:
            free_per_node[entry.node] += 1
        elif reason == COUNTERS:
            held_by.update(ledger.counter_blockers(entry))
        elif reason not in (TAINTED, POLICY):
            holders = ledger.holders(entry.key)
            held_by.update(holders)
            if reason == CAPACITY and len(short) < SHORT_SHOWN:
                short.append(_short(entry, alt, ledger, len(set(holders))))
    free = reasons["free"]
    network_free = free_per_node.get(None, 0)
    best_node = max((n for k, n in free_per_node.items() if k is not None), default=0)
    needed = len(m.devices) if alt.mode == "All" else alt.count
    if alt.mode not in ("ExactCount", "All"):
        verdict = UNSUPPORTED
    elif not m.class_exists:
        verdict = CLASS_MISSING
    elif m.errors:
        verdict = SELECTOR_ERROR
    elif m.class_matched == 0:
        verdict = NO_DEVICES
    elif not m.devices:
        verdict = NO_MATCH
    elif free == 0:
        if reasons[TAINTED] == len(m.devices):
            verdict = ALL_TAINTED
        else:
            verdict = ALL_HELD if held_by else NO_CAPACITY
    elif alt.mode == "All":
        # All takes every matching device usable on one node: all of them must be free.
        network_free_all = free_per_node[None] == per_node[None]
        local = [(n, count) for n, count in per_node.items() if n is not None]
        if local:
            complete = network_free_all and any(free_per_node[n] == c for n, c in local)
        else:
            complete = network_free_all and per_node[None] > 0
        verdict = FITS if complete else NOT_ENOUGH
    elif best_node + network_free < needed:
        verdict = NOT_ENOUGH
    else:
        verdict = FITS
    return RequestVerdict(
        request=alt.result_name,
        class_name=alt.class_name,
        class_exists=m.class_exists,
        class_matched=m.class_matched,
        selector_matches=list(m.selector_matches),
        selector_errors=list(m.errors),
        free_or_shareable=free,
        nodes=sorted(n for n in free_per_node if n is not None),
        held_by=sorted(held_by),
        verdict=verdict,
        needed=needed,
        short=short,
    )


def _short(entry: DeviceEntry, alt: Alternative, ledger: Ledger, sharers: int) -> Short:
    share = share_consumption(entry, alt) or {}
    left = ledger.remaining_capacity(entry)
    capacity = entry.device.capacity
    missing = {
        name: (left.get(name, Fraction(0)), amount, capacity[name].value)
        for name, amount in sorted(share.items())
        if amount > left.get(name, Fraction(0))
    }
    key = entry.key
    return Short(f"{key.driver}/{key.pool}/{key.device}", missing, sharers)

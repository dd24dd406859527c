"""History as the oracle derives it: holding intervals from the sequence of visible states.

A holding is one allocation result of one claim incarnation: (driver, pool, device, namespace,
claim, claim uid, request, shareID). `Timeline.observe(at, truth)` is called after every step
with the oracle's answers for what the mirror was shown at that instant; a holding opens when
it first appears and closes when it is gone (released, deallocated, or its claim deleted). A
watcher handing over, a watch restarting, a relist: none of them ends a holding that the
cluster kept. `held_at(t)` is what whoHeld must answer at t.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.oracle.truth import Truth


@dataclass(frozen=True, order=True)
class Holding:
    driver: str
    pool: str
    device: str
    namespace: str
    claim: str
    claim_uid: str
    request: str
    share_id: str | None


@dataclass(frozen=True, order=True)
class Interval:
    holding: Holding
    since: str
    until: str | None
    published_at_start: bool  # a slice published the device when the holding began


@dataclass
class Timeline:
    steps: list[tuple[str, frozenset[Holding]]] = field(default_factory=list)
    uuids: dict[tuple[str, str, str], str] = field(default_factory=dict)  # ever published with
    _open: dict[Holding, tuple[str, bool]] = field(default_factory=dict)
    _closed: list[Interval] = field(default_factory=list)

    def observe(self, at: str, truth: Truth) -> None:
        now = set()
        for claim in truth.claims.values():
            for request, driver, pool, device, share in claim.devices:
                now.add(Holding(driver, pool, device, claim.namespace, claim.name, claim.uid, request, share))  # fmt: skip
        for key, device in truth.devices.items():
            if device.published and device.uuid:
                self.uuids[key] = device.uuid
        for holding in sorted(self._open.keys() - now):
            since, published = self._open.pop(holding)
            self._closed.append(Interval(holding, since, at, published))
        for holding in sorted(now - self._open.keys()):
            device = truth.devices.get((holding.driver, holding.pool, holding.device))
            self._open[holding] = (at, bool(device and device.published))
        self.steps.append((at, frozenset(now)))

    def intervals(self) -> list[Interval]:
        still = [Interval(h, since, None, p) for h, (since, p) in self._open.items()]
        return sorted(self._closed + still)

    def held_at(self, at: str) -> frozenset[Holding]:
        """Holdings at `at` (an instant between steps: the state of the last step before)."""
        current: frozenset[Holding] = frozenset()
        for step_at, holdings in self.steps:
            if step_at <= at:
                current = holdings
        return current

"""The idle holders whose release would let a waiting pod of a plan be placed: each is
released tentatively, the pod tried again, and everything undone; the claims named are
promised to this pod, so a later pod is not told the same ones would free room for it. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dra_mirror.service.diagnostics.expansion import PlannedClaim
from dra_mirror.service.diagnostics.explain import Holder
from dra_mirror.service.diagnostics.plan_results import ItemPlan
from dra_mirror.service.model.records import ClaimRecord, PodRecord

if TYPE_CHECKING:
    from dra_mirror.service.diagnostics.planning import _Planner


def freed_by(
    self: _Planner,
    item: ItemPlan,
    pod: PodRecord,
    claims: list[tuple[PlannedClaim, ClaimRecord]],
    nodes: list[str],
    holders: list[Holder],
) -> None:
    """The idle holders whose release would let the pod be placed, if releasing them all
    would (the manual's cleanup candidates, named for this pod)."""
    idle = [h.claim for h in holders if h.idle and h.claim not in self.promised]
    releasable = [(k, c.allocation) for k in idle
                  if (c := self.inputs.claims.get(k)) is not None and c.allocation is not None]  # fmt: skip
    if not releasable:
        return
    mark = self.tentative.mark()
    saved = ({n: dict(u) for n, u in self.usage.items()}, dict(self.planned), self._free)
    self._free = {}
    try:
        for key, allocation in releasable:
            assert allocation is not None
            self.tentative.release(key, allocation)
        placed = self._place(pod, claims, nodes)
    finally:
        self.tentative.undo(mark)
        self.usage, self.planned, self._free = saved
    if isinstance(placed, tuple):
        self.promised.update(k for k, _ in releasable)
        shown = [k for k, _ in releasable if self.inputs.visible(k.namespace)]
        item.freed_by = shown
        item.freed_hidden = len(releasable) - len(shown)
        names = ", ".join(f"{k.namespace}/{k.name}" for k in shown[:10]) or "none you may see"
        hidden = f" (and {item.freed_hidden} outside your scope)" if item.freed_hidden else ""
        item.message += f"; it would fit if these idle claims were released: {names}{hidden}"

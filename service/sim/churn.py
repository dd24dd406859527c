"""Churn: "N pods per second arrive and leave", from a seed, on a virtual clock.

`schedule(spec)` is the pure, endless, deterministic plan: arrivals form a Poisson process of
`rate` pods per second; each pod picks a shape (weighted) and lives an exponentially
distributed time of mean `lifetime` seconds; when it leaves it is deleted — or, for a
`succeed` fraction, it first turns Succeeded (a finished Job's pod) and is deleted
`linger` seconds later. Every random draw for one pod happens when it arrives, so the plan up
to time T is the same whatever comes after T.

`Churn(store, spec)` carries the plan out against a `ClusterStore` through its client write
path (create with validation, status patches, delete), so the `Controller` schedules and
releases exactly as for `kubectl`: `advance(t)` applies every step due by virtual time `t` at
once (tests), `run(speed=…)` follows the plan in real time inside the Simulator's event loop,
yielding to it between steps even when behind (the API server answers while it catches up).

Promises: the same seed gives the same steps, pod names and — with the store seeded — the same
objects; a step the API refuses (its pod already gone, its name taken by someone else) is
skipped (logged if it is not a 404), never an error that stops the churn.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from dra_mirror.service.sim.errors import ApiError
from dra_mirror.service.sim.shapes import pod_object
from dra_mirror.service.sim.store import ClusterStore

__all__ = ["Churn", "ChurnShape", "ChurnSpec", "Step", "schedule"]

log = logging.getLogger(__name__)

_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
ARRIVE, SUCCEED, LEAVE = "arrive", "succeed", "leave"


@dataclass(frozen=True)
class ChurnShape:
    """One kind of arriving pod: its claims (pod.spec.resourceClaims entries) and placement."""

    name: str
    weight: float = 1.0
    claims: tuple[dict[str, str], ...] = ()
    node_selector: dict[str, str] = field(default_factory=dict)
    limits: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ChurnSpec:
    """A scenario's `churn:` block."""

    rate: float  # arrivals per second
    lifetime: float  # mean seconds a pod lives
    seed: int = 0
    namespace: str = "default"
    shapes: tuple[ChurnShape, ...] = (ChurnShape("plain"),)
    succeed: float = 0.0  # fraction of pods that end Succeeded before they are deleted
    linger: float = 5.0  # seconds a Succeeded pod stays before deletion
    speed: float = 1.0  # virtual seconds per real second in `run`

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> ChurnSpec:
        shapes = tuple(
            ChurnShape(
                name=str(s["name"]),
                weight=float(s.get("weight", 1.0)),
                claims=tuple(dict(c) for c in s.get("claims") or ()),
                node_selector={str(k): str(v) for k, v in (s.get("nodeSelector") or {}).items()},
                limits={str(k): str(v) for k, v in (s.get("limits") or {}).items()},
            )
            for s in doc.get("shapes") or ()
        )
        spec = cls(
            rate=float(doc["rate"]),
            lifetime=float(doc["lifetime"]),
            seed=int(doc.get("seed", 0)),
            namespace=str(doc.get("namespace", "default")),
            shapes=shapes or (ChurnShape("plain"),),
            succeed=float(doc.get("succeed", 0.0)),
            linger=float(doc.get("linger", 5.0)),
            speed=float(doc.get("speed", 1.0)),
        )
        if spec.rate <= 0 or spec.lifetime <= 0:
            raise ValueError("churn: rate and lifetime must be positive")
        return spec


class Step(NamedTuple):
    at: float  # virtual seconds since the churn started
    action: str  # arrive | succeed | leave
    pod: str
    shape: str


def schedule(spec: ChurnSpec) -> Iterator[Step]:
    """The endless plan of `spec`, in time order (ties: arrival order)."""
    rng = random.Random(spec.seed)
    weights = [s.weight for s in spec.shapes]
    later: list[tuple[float, int, Step]] = []  # departures, a heap
    order = 0
    t = 0.0
    index = 0
    while True:
        t += rng.expovariate(spec.rate)
        shape = rng.choices(spec.shapes, weights)[0]
        suffix = "".join(rng.choice(_ALPHABET) for _ in range(5))
        name = f"churn-{shape.name}-{index:05d}-{suffix}"
        life = rng.expovariate(1.0 / spec.lifetime)
        succeeds = rng.random() < spec.succeed
        index += 1
        while later and later[0][0] <= t:
            yield heapq.heappop(later)[2]
        yield Step(t, ARRIVE, name, shape.name)
        if succeeds:
            order += 1
            heapq.heappush(later, (t + life, order, Step(t + life, SUCCEED, name, shape.name)))
            life += spec.linger
        order += 1
        heapq.heappush(later, (t + life, order, Step(t + life, LEAVE, name, shape.name)))


class Churn:
    """Carries out `schedule(spec)` against one store (see the module docstring)."""

    def __init__(self, store: ClusterStore, spec: ChurnSpec) -> None:
        self.store = store
        self.spec = spec
        self.now = 0.0
        self.applied: list[Step] = []
        self._plan = schedule(spec)
        self._next: Step | None = None
        self._shapes = {s.name: s for s in spec.shapes}
        self._clock: Callable[[], float] | None = None  # virtual time now, while `run` runs

    def behind(self) -> float:
        """Virtual seconds the running plan is behind real time: the step due longest ago and
        not yet applied (0 when none is due, or before `run`)."""
        if self._clock is None:
            return 0.0
        return max(0.0, self._clock() - self._peek().at)

    def _peek(self) -> Step:
        if self._next is None:
            self._next = next(self._plan)
        return self._next

    def advance(self, until: float) -> list[Step]:
        """Apply every step due by virtual time `until`; returns them."""
        done = []
        while self._peek().at <= until:
            step = self._peek()
            self._next = None
            self.apply(step)
            done.append(step)
        self.now = max(self.now, until)
        return done

    def apply(self, step: Step) -> None:
        ns = self.spec.namespace
        if self.store.stored("namespaces", ("", ns)) is None:
            self.store.create("namespaces", {"metadata": {"name": ns}})
        try:
            if step.action == ARRIVE:
                shape = self._shapes[step.shape]
                pod = pod_object(
                    step.pod,
                    ns,
                    claims=shape.claims,
                    node_selector=shape.node_selector,
                    limits=shape.limits,
                    labels={"app": f"churn-{shape.name}"},
                )
                self.store.create("pods", pod)
            elif step.action == SUCCEED:
                self.store.patch(
                    "pods", ns, step.pod, {"status": {"phase": "Succeeded"}}, subresource="status"
                )
            else:
                self.store.delete("pods", ns, step.pod)
        except ApiError as error:
            # The pod is gone already (404), or someone took its name (409): churn goes on.
            if error.code != 404:
                log.warning(
                    "sim churn: %s %s refused: %s %s",
                    step.action,
                    step.pod,
                    error.code,
                    error.message,
                    extra={"cluster": self.store.name, "namespace": ns, "object_name": step.pod},
                )
        self.applied.append(step)

    async def run(self) -> None:
        """Follow the plan in real time (`spec.speed` virtual seconds per second), forever."""
        loop = asyncio.get_running_loop()
        started = loop.time() - self.now / self.spec.speed
        self._clock = lambda: (loop.time() - started) * self.spec.speed
        while True:
            due = started + self._peek().at / self.spec.speed
            # behind the plan (a busy machine) the steps due are caught up one at a time,
            # yielding between them: the API server's requests are answered meanwhile
            await asyncio.sleep(max(0.0, due - loop.time()))
            self.advance(self._peek().at)

"""The stateful comparison: random real-world event sequences, the mirror beside the oracle.

`MirrorMachine` (a Hypothesis `RuleBasedStateMachine`) drives a `Cluster` with what real
clusters do — drivers publishing, republishing (new pool generation) and withdrawing slices,
claims created before the slices they name or for devices never published, shared devices with
consumedCapacity, MIG-style counters, taints and DeviceTaintRules, pods starting and stopping,
PodGroups, deletions with deletionTimestamp, watches that drop and restart, 410 relists (the
full list replaces the state) and a second watcher taking over — and feeds every change to the
mirror through `tests.oracle.system`. After every step it compares every answer of the graph
(memory and Redis stores, live events) with `tests.oracle.truth.answer` over the objects the
mirror was shown; at the end, the history's intervals with those the oracle derives
(`tests.oracle.intervals`). A disagreement that `tests.oracle.known` names is noted (the strict
xfail tests prove each); any other fails the run with the step sequence that produced it.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tests.oracle import cluster as c
from tests.oracle import known, objects
from tests.oracle.compare import Mismatch, device_name, live_mismatches, mismatches
from tests.oracle.history import history_mismatches
from tests.oracle.intervals import Timeline
from tests.oracle.system import System
from tests.oracle.truth import answer

T0 = datetime(2026, 5, 1, tzinfo=UTC)
WATCHED = c.KIND_ORDER
devices = st.sampled_from(c.DEVICES)
claims = st.tuples(st.sampled_from(c.NAMESPACES), st.sampled_from(c.CLAIMS))
pods = st.tuples(st.sampled_from(c.NAMESPACES), st.sampled_from(c.PODS))


def at(step: float) -> str:
    return (T0 + timedelta(seconds=step)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class MirrorMachine(RuleBasedStateMachine):
    # Set by the test: the event loop it runs in, the suite's redis-server, one history.
    runner: ClassVar[asyncio.Runner]
    redis_url: ClassVar[str | None] = None
    history: ClassVar[Any] = None
    seen: ClassVar[dict[str, int]] = {}  # known defect -> mismatches noted, over the run
    collect: ClassVar[list[Mismatch] | None] = None  # exploring: keep unknown ones, do not fail

    def __init__(self) -> None:
        super().__init__()
        tag = uuid.uuid4().hex[:8]
        self.cluster = c.Cluster(tag)
        self.name = f"oracle-{tag}"
        self.step = 0
        self.version = "v1"
        self.visible: dict[c.Key, dict] = {}
        self.backlog: list[tuple[str, dict]] = []
        self.disconnected_at: str | None = None
        self.timeline = Timeline()
        self.handovers: list[str] = []
        self.claims_first: set[str] = set()  # steps that listed claims before slices
        self.pods_listed = False  # the current watcher was handed a Pod LIST with pods in it
        self.system: System | None = None

    def run(self, coroutine: Any) -> Any:
        return self.runner.run(coroutine)

    def now(self) -> str:
        return at(self.step)

    def tick(self) -> str:
        self.step += 1
        return self.now()

    # --- feeding the mirror ---------------------------------------------------------------

    def served(self, obj: dict) -> dict:
        return objects.render(obj, self.version)

    def show(self, events: list[tuple[str, dict]]) -> None:
        """Deliver a batch of watch events to the mirror, or keep them while disconnected."""
        events = [(t, obj) for t, obj in events if obj["kind"] in WATCHED]
        if self.disconnected_at is not None:
            self.backlog.extend(events)
            return
        self._see(events)
        self.run(self.system.apply([(t, self.served(obj)) for t, obj in events], at=self.now()))

    def _see(self, events: list[tuple[str, dict]]) -> None:
        for type_, obj in events:
            key = c.Cluster.key(obj)
            if type_ == "DELETED":
                self.visible.pop(key, None)
            else:
                self.visible[key] = obj

    def relist(self, kind: str) -> None:
        """A complete LIST of `kind`: the mirror's view of that kind becomes the cluster's."""
        current = self.cluster.of_kind(kind)
        for key in [k for k in self.visible if k[0] == kind]:
            del self.visible[key]
        self.visible.update({c.Cluster.key(o): o for o in current})
        self.pods_listed |= kind == "Pod" and bool(current)
        self.run(self.system.relist(kind, [self.served(o) for o in current], at=self.now()))

    # --- set-up -----------------------------------------------------------------------------

    @initialize(version=st.sampled_from(["v1", "v1beta2", "v1beta1"]))
    def start(self, version: str) -> None:
        self.version = version
        self.system = self.run(
            System.start(self.name, redis_url=self.redis_url, history=self.history, at=self.now())
        )
        for kind in WATCHED:
            self.relist(kind)
        self.run(self.system.synced(self.now()))
        note(f"cluster {self.name}, resource.k8s.io/{version}")

    # --- drivers ----------------------------------------------------------------------------

    @rule(
        pool=st.sampled_from(sorted(c.POOLS)), bump=st.booleans(), split=st.booleans(),
        partial=st.booleans(), keep=st.none() | st.frozensets(st.sampled_from([d["name"] for ds in c.POOLS.values() for d in ds])),
        taint=st.none() | st.tuples(st.sampled_from(["gpu-0", "gpu-1", "gpu-1-mig-a", "eth0"]), st.sampled_from(c.EFFECTS)),
    )  # fmt: skip
    def publish(self, pool, bump, split, partial, keep, taint) -> None:
        self.tick()
        self.show(
            self.cluster.publish(
                pool, bump=bump, split=split, partial=partial, keep=keep, taint=taint
            )
        )

    @rule(pool=st.sampled_from(sorted(c.POOLS)))
    def withdraw(self, pool) -> None:
        self.tick()
        self.show(self.cluster.withdraw(pool))

    @rule(
        device=devices,
        effect=st.none() | st.sampled_from(c.EFFECTS),
        narrow=st.none() | st.sampled_from(["class", "absent-class", "cel"]),
    )
    def taint_rule(self, device, effect, narrow) -> None:
        self.tick()
        self.show(self.cluster.taint_rule(device, effect, narrow))

    # --- claims and pods --------------------------------------------------------------------

    def _claims(self, *, allocated: bool | None = None) -> list[tuple[str, str]]:
        found = []
        for claim in self.cluster.of_kind("ResourceClaim"):
            is_allocated = "allocation" in claim.get("status", {})
            if allocated is None or allocated == is_allocated:
                if allocated is False and claim["metadata"].get("deletionTimestamp"):
                    continue
                found.append((claim["metadata"]["namespace"], claim["metadata"]["name"]))
        return found

    def _pods(self) -> list[tuple[str, str]]:
        return [
            (p["metadata"]["namespace"], p["metadata"]["name"]) for p in self.cluster.of_kind("Pod")
        ]

    @rule(claim=claims, admin=st.booleans(), device=st.none() | devices, qualified=st.booleans())
    def create_claim(self, claim, admin, device, qualified) -> None:
        """A claim is created; with `device`, the scheduler allocates it at once (the usual
        course), to a device that may or may not be published."""
        self.tick()
        self.show(self.cluster.create_claim(*claim, admin=admin))
        if device is not None:
            self.show(self.cluster.allocate(*claim, [device], qualified=qualified))

    @precondition(lambda self: self._claims(allocated=False))
    @rule(data=st.data(), first=devices, second=st.none() | devices, qualified=st.booleans())
    def allocate(self, data, first, second, qualified) -> None:
        claim = data.draw(st.sampled_from(self._claims(allocated=False)), label="claim")
        self.tick()
        chosen = [first] + (
            [second] if second and second != first and second[:2] == first[:2] else []
        )
        self.show(self.cluster.allocate(*claim, chosen, qualified=qualified))

    @precondition(lambda self: self._claims(allocated=True))
    @rule(data=st.data(), consumer=st.sampled_from([*c.PODS, c.GROUP]))
    def reserve(self, data, consumer) -> None:
        claim = data.draw(st.sampled_from(self._claims(allocated=True)), label="claim")
        self.tick()
        self.show(self.cluster.reserve(*claim, consumer))

    @precondition(lambda self: self._claims(allocated=True))
    @rule(data=st.data(), deallocate=st.booleans())
    def release(self, data, deallocate) -> None:
        claim = data.draw(st.sampled_from(self._claims(allocated=True)), label="claim")
        self.tick()
        self.show(self.cluster.release(*claim, deallocate=deallocate))

    @precondition(lambda self: self._claims())
    @rule(data=st.data())
    def delete_claim(self, data) -> None:
        claim = data.draw(st.sampled_from(self._claims()), label="claim")
        self.tick()
        self.show(self.cluster.delete_claim(*claim))

    @rule(pod=pods, in_group=st.booleans(), scheduled=st.booleans())
    def create_pod(self, pod, in_group, scheduled) -> None:
        """A pod is created; `scheduled`: the scheduler reserves its (allocated) claim for it."""
        self.tick()
        self.show(self.cluster.create_pod(*pod, in_group=in_group))
        if scheduled:
            self.show(self.cluster.reserve(pod[0], c.pod_claim(pod[1]), pod[1]))

    @precondition(lambda self: self._pods())
    @rule(data=st.data(), phase=st.sampled_from(c.PHASES))
    def set_phase(self, data, phase) -> None:
        pod = data.draw(st.sampled_from(self._pods()), label="pod")
        self.tick()
        self.show(self.cluster.set_phase(*pod, phase))

    @rule(namespace=st.sampled_from(c.NAMESPACES), exists=st.booleans())
    def pod_group(self, namespace, exists) -> None:
        """A workload controller creates the PodGroup `trainers`, or its owner deletes it (a
        claim reserved for it may outlive it until the controller clears reservedFor)."""
        self.tick()
        if exists:
            self.show(self.cluster.create_group(namespace))
        else:
            self.show(self.cluster.delete_group(namespace))

    @precondition(lambda self: self._pods())
    @rule(data=st.data())
    def delete_pod(self, data) -> None:
        pod = data.draw(st.sampled_from(self._pods()), label="pod")
        self.tick()
        self.show(self.cluster.delete_pod(*pod))

    # --- the watch --------------------------------------------------------------------------

    @rule(
        action=st.sampled_from(["drop", "drop", "relist", "relist", "handover"]),
        gone=st.frozensets(st.sampled_from(WATCHED)), order=st.permutations(WATCHED),
    )  # fmt: skip
    def watch(self, action, gone, order) -> None:
        """The watch side: connected, the watches drop (`drop`), a kind is relisted after 410
        Gone (`relist`, the first of `gone`), or another watcher takes over (`handover`);
        disconnected, the watches come back (`drop`, `relist`: resuming or relisting per kind)
        or the other watcher takes over."""
        self.tick()
        if action == "handover":
            self.handover(order)
        elif self.disconnected_at is None and action == "drop":
            self.disconnected_at = self.now()
        elif self.disconnected_at is None:
            self.relist(sorted(gone)[0] if gone else order[0])
        else:
            self.reconnect(gone, order)

    def reconnect(self, gone: frozenset[str], order: list[str]) -> None:
        """The watches come back: kinds in `gone` got 410 Gone and are relisted (in `order`:
        claims may come before slices); the others resume from their resourceVersion."""
        since, self.disconnected_at = self.disconnected_at, None
        backlog, self.backlog = self.backlog, []
        if order.index("ResourceClaim") < order.index("ResourceSlice"):
            self.claims_first.add(self.now())
        for kind in order:
            if kind in gone:
                self.relist(kind)
            else:
                events = [(t, o) for t, o in backlog if o["kind"] == kind]
                if events:
                    self._see(events)
                    self.run(
                        self.system.apply([(t, self.served(o)) for t, o in events], at=self.now())
                    )
        self.run(self.system.reconnected(since, self.now()))

    def handover(self, order: list[str]) -> None:
        """The watcher stops cleanly and another takes the cluster over (lists in `order`)."""
        connected = self.disconnected_at is None
        self.disconnected_at, self.backlog = None, []
        lists = {kind: [self.served(o) for o in self.cluster.of_kind(kind)] for kind in WATCHED}
        self.visible = dict(self.cluster.objects)
        self.pods_listed = bool(lists["Pod"])
        self.handovers.append(self.now())
        if order.index("ResourceClaim") < order.index("ResourceSlice"):
            self.claims_first.add(self.now())
        self.run(self.system.handover(lists, order=list(order), at=self.now(), connected=connected))

    # --- the comparison ---------------------------------------------------------------------

    @invariant()
    def agrees_with_the_oracle(self) -> None:
        if self.system is None:
            return
        truth = answer(self.served(o) for o in self.visible.values())
        self.timeline.observe(self.now(), truth)
        holders = [device_name(k) for k, d in truth.devices.items() if d.holders]
        hidden = [device_name(k) for k, d in truth.devices.items() if d.holders and not d.published]
        found: list[Mismatch] = []
        for store, answers in self.run(self.system.answers(holders, hidden)).items():
            found += mismatches(truth, answers, store)
        found += live_mismatches(truth, self.system.live)
        self.judge(found, truth)

    def judge(self, found: list[Mismatch], truth: Any) -> None:
        unknown, explained = known.explain(found, truth=truth, machine=self)
        for _, defect in explained:
            self.seen[defect] = self.seen.get(defect, 0) + 1
        if self.collect is not None:
            self.collect.extend(unknown)
            return
        assert not unknown, "the mirror disagrees with the oracle:\n" + "\n".join(map(str, unknown))

    def teardown(self) -> None:
        if self.system is None:
            return
        try:
            if self.history is not None:
                found = self.run(
                    history_mismatches(self.system, self.timeline, end=at(self.step + 1))
                )
                self.judge(found, None)
        finally:
            self.run(self.system.close())

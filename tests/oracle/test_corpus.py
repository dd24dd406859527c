"""Every real object (tests/fixtures/real and ../shared/fixtures/upstream) through the oracle, the
model's decoder, the simulator's validation, and list + watch into the mirror.

Each file is one simulated cluster. Half its objects are in the cluster before the watcher
starts (LIST), the rest are written after it synced (WATCH ADDED), then the first object is
deleted (WATCH DELETED). The mirror must then hold exactly what its decoder makes of the
served objects — nothing dropped, nothing crashing, malformed ones counted and skipped — and
every answer of its graph must be the oracle's, or a known defect (tests.oracle.known).
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from types import SimpleNamespace

import pytest

from dra_mirror.service.model.kinds import BY_PLURAL as RESOURCES
from dra_mirror.service.model.metadata import MalformedObject
from dra_mirror.service.model.records import key_of
from dra_mirror.service.sim import convert
from dra_mirror.service.sim.errors import ApiError
from dra_mirror.service.sim.store import ClusterStore
from tests.oracle import corpus, known
from tests.oracle.compare import device_name, mismatches
from tests.oracle.system import decode, quiet_schema, simulated_cluster, store_answers, watched
from tests.oracle.truth import answer

MIRRORED = ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate", "Pod", "Node")
PLURALS = {r.kind: r.plural for r in RESOURCES.values()}

# Objects the model's decoder refuses (counted as malformed, skipped), and why.
MALFORMED = {
    "real/intel-gaudi2-v1beta1.ResourceSlice.yaml": "its second device lost its `name` in the documentation",
}  # fmt: skip

# Objects the simulator's validation refuses as kube-apiserver would (or should not), and why.
SIMULATOR_REFUSES = {
    "real/dra-example-driver-v1alpha3.ResourceSlice.List.yaml": "v1alpha3 bare-quantity capacities (the simulator serves no v1alpha3)",
    "real/hami-ascend-310p-v1-shared-npu.yaml": "the abridged slice has no pool.generation",
    "real/intel-gaudi2-v1beta1.ResourceSlice.yaml": "a device without a name",
    "upstream/k8sapi-1.35-v1.DeviceClass.json": "round-trip placeholders",
    "upstream/k8sapi-1.35-v1.ResourceClaim.json": "round-trip placeholders",
    "upstream/k8sapi-1.35-v1.ResourceClaimTemplate.json": "round-trip placeholders",
    "upstream/k8sapi-1.35-v1.ResourceSlice.json": "round-trip placeholders",
    "upstream/k8sapi-1.35-v1.ResourceSlice.yaml": "round-trip placeholders",
    "upstream/k8sapi-1.35-v1beta1.ResourceClaim.yaml": "round-trip placeholders",
    "upstream/k8sapi-1.35-v1beta1.ResourceSlice.yaml": "round-trip placeholders",
    "upstream/k8sapi-master-v1.ResourceSlice.yaml": "round-trip placeholders",
}  # fmt: skip


@pytest.fixture(scope="module")
def files(upstream_fixtures: list[Path]) -> dict[str, list[dict]]:
    return corpus.files(upstream_fixtures)


def test_sources_name_every_real_file():
    sources = (corpus.REAL / "SOURCES.md").read_text()
    named = {p.name for p in corpus.real_files()}
    assert named and all(f"`{name}`" in sources for name in named)


def test_the_oracle_reads_every_object(files):
    for _name, objects in files.items():
        answer(objects)  # any exception fails, naming nothing: the traceback names the file
    # a real shared NPU: two claims' worth of consumedCapacity named without the domain
    truth = answer(files["real/hami-ascend-310p-v1-shared-npu.yaml"])
    npu = truth.devices[("ascend.project-hami.io", "aio-node74-arm", "npu-0-0")]
    assert npu.status == "shared" and npu.remaining == {
        "ascend.project-hami.io/cores": 50, "ascend.project-hami.io/memory": (21525 - 8192) * 2**20,
    }  # fmt: skip
    claims = answer(files["real/dranet-gke-b200-v1.ResourceClaim.List.yaml"]).claims
    assert [c.state for c in claims.values()] == ["allocated"] and len(truth.pools) == 1


def test_every_object_decodes_or_is_counted_malformed(files):
    refused = {}
    for name, objects in files.items():
        for obj in objects:
            if obj.get("kind") in MIRRORED:
                try:
                    decode(obj["kind"], obj, cluster="corpus")
                except MalformedObject as error:
                    refused.setdefault(name, str(error))
    assert set(refused) == set(MALFORMED), refused


def _refusal(obj: dict) -> str | None:
    store = ClusterStore("validation", seed=1)
    plural = PLURALS[obj["kind"]]
    namespace = obj.get("metadata", {}).get("namespace") or "default"
    if RESOURCES[plural].namespaced and store.get("namespaces", None, namespace) is None:
        store.create("namespaces", {"metadata": {"name": namespace}}, validate=False)
    body = copy.deepcopy(obj)
    body.pop("status", None)
    group, _, version = str(body.get("apiVersion")).rpartition("/")
    if group == convert.DRA_GROUP:
        body = convert.to_storage(plural, body, "v1beta1" if version == "v1alpha3" else version)
    if RESOURCES[plural].namespaced:
        body["metadata"]["namespace"] = namespace
    try:
        store.create(plural, body)
    except ApiError as error:
        return str(error)
    return None


def test_the_simulator_refuses_only_what_it_should(files):
    refused = {}
    for name, objects in files.items():
        for obj in objects:
            if obj.get("kind") in PLURALS and obj["kind"] != "Namespace":
                reason = _refusal(obj)
                if reason is not None:
                    refused.setdefault(name, reason)
    assert set(refused) == set(SIMULATOR_REFUSES), refused


def _expected(store: ClusterStore, version: str) -> tuple[dict, list[dict], int]:
    """What the watcher must hold of a simulated cluster: key -> resourceVersion, the served
    objects the decoder accepts (the oracle's input), and how many it refuses."""
    keys, served, malformed = {}, [], 0
    for kind in MIRRORED:
        plural = PLURALS[kind]
        for obj in store.list(plural):
            shown = convert.to_served(plural, obj, version) if RESOURCES[plural].group else obj
            try:
                record = decode(kind, shown, cluster=store.name)
            except MalformedObject:
                malformed += 1
                continue
            keys[key_of(record)] = record.meta.resource_version
            served.append(shown)
    return keys, served, malformed


async def _mirrored(memory, cluster: str) -> dict:
    found = {}
    for kind in MIRRORED:
        found |= {
            key_of(r): r.meta.resource_version for r in await memory.list(kind, cluster=cluster)
        }
    return found


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
async def test_the_corpus_listed_and_watched_into_the_mirror(files, tmp_path, version):
    stores, later = [], {}
    for index, (name, objects) in enumerate(files.items()):
        half = len(objects) // 2
        store = simulated_cluster(corpus.cluster_name(index, name), copy.deepcopy(objects[:half]))
        stores.append(store)
        later[store.name] = (name, simulated_cluster("scratch", copy.deepcopy(objects[half:])))
    schema = quiet_schema()
    async with watched(stores, versions=(version,), directory=tmp_path) as memory:
        for store in stores:  # the rest arrives through the watch, then one object goes
            _, scratch = later[store.name]
            for plural in sorted({p for p in PLURALS.values()} - {"namespaces"}):
                for obj in scratch.list(plural):
                    for field in ("resourceVersion", "uid"):
                        obj["metadata"].pop(field, None)
                    if (
                        RESOURCES[plural].namespaced
                        and store.get("namespaces", None, obj["metadata"]["namespace"]) is None
                    ):
                        store.create(
                            "namespaces",
                            {"metadata": {"name": obj["metadata"]["namespace"]}},
                            validate=False,
                        )
                    store.create(plural, obj, validate=False)
            first = next((o for k in MIRRORED for o in store.list(PLURALS[k])), None)
            if first is not None:
                store.delete(
                    PLURALS[first["kind"]],
                    first["metadata"].get("namespace"),
                    first["metadata"]["name"],
                )
        expected = {s.name: _expected(s, version) for s in stores}
        for _ in range(300):
            held = [await _mirrored(memory, s.name) == expected[s.name][0] for s in stores]
            if all(held):
                break
            await asyncio.sleep(0.05)
        statuses = {s.name: s for s in await memory.clusters()}
        unexplained = []
        for store in stores:
            keys, served, malformed = expected[store.name]
            assert await _mirrored(memory, store.name) == keys, store.name
            # counted per event that brought one (its ADDED, and its DELETED if it went)
            counted = sum(statuses[store.name].malformed.values())
            assert counted >= malformed and (counted > 0) == (later[store.name][0] in MALFORMED)
            truth = answer(served)
            held = [device_name(k) for k, d in truth.devices.items() if d.holders]
            hidden = [
                device_name(k) for k, d in truth.devices.items() if d.holders and not d.published
            ]
            answers = await store_answers(schema, memory, store.name, held, hidden)
            visible = {(o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"]): o for o in served}  # fmt: skip
            # the watcher's only Pod LIST was the first half of the file's objects
            listed = any(o.get("kind") == "Pod" for o in files[later[store.name][0]][: len(files[later[store.name][0]]) // 2])  # fmt: skip
            context = SimpleNamespace(visible=visible, handovers=[], pods_listed=listed)
            found = mismatches(truth, answers, "memory")
            unknown, _ = known.explain(found, truth=truth, machine=context)
            unexplained += [f"{later[store.name][0]}: {m}" for m in unknown]
        assert not unexplained, "\n".join(unexplained)

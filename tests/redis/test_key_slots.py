"""Redis Cluster shards by hash slot: every key the state store builds for one mirrored
cluster must hash to that cluster's slot (its `{cluster}` hash tag), so that one MULTI/EXEC
can carry a whole batch and every Lua script stays on one node. Slots are computed with
redis-py's `key_slot` (CRC16 of the hash tag, as the server does); no server is needed."""

from __future__ import annotations

import pytest
from redis.cluster import key_slot

from dra_mirror.service.model.records import KIND_OF, DeviceKey, ObjectKey
from dra_mirror.service.stores.protocols import Relation
from dra_mirror.service.stores.redis_keys import (
    DEFAULT_PREFIX,
    SET_RELATIONS,
    Keys,
    check_cluster_name,
    clusters_key,
)

CLUSTERS = ["east", "prod-eu-1", "a.b.c", "gpu:west", "x" * 200, "集群"]
PREFIXES = [DEFAULT_PREFIX, "mirror:staging", ""]

# a from-key of each relation's shape (service.stores.protocols.Relation)
FROM_KEYS = {
    Relation.CLASS_CLAIMS.value: ("c", "gpu.nvidia.com"),
    Relation.NAME_DEVICES.value: "gpu-0",
}


def _every_key(keys: Keys, cluster: str) -> list[str]:
    named = [value for name, value in vars(keys).items() if name != "cluster"]
    named += [keys.objects(kind) for kind in KIND_OF.values()]
    named += [keys.links(relation.value) for relation in Relation]
    for relation in SET_RELATIONS:
        from_key = FROM_KEYS[relation]
        if isinstance(from_key, tuple):
            from_key = (cluster, *from_key[1:])
        named.append(keys.link(relation, from_key))
    # from-keys of other shapes, as the writer builds them for set relations
    named.append(
        keys.link(Relation.CLASS_CLAIMS.value, ObjectKey(cluster, "ResourceClaim", "ns", "c"))
    )
    named.append(keys.link(Relation.NAME_DEVICES.value, DeviceKey(cluster, "d", "p/q", "gpu-{1}")))
    return named


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize("cluster", CLUSTERS)
def test_every_key_of_a_cluster_hashes_to_its_slot(prefix, cluster):
    keys = Keys(prefix, cluster)
    built = _every_key(keys, cluster)
    assert len(built) >= 10 + len(KIND_OF) + len(Relation)
    slots = {key: key_slot(key.encode()) for key in built}
    assert set(slots.values()) == {key_slot(f"{{{cluster}}}".encode())}, slots


def test_clusters_spread_over_slots():
    slots = {key_slot(Keys(DEFAULT_PREFIX, f"cluster-{i}").status.encode()) for i in range(10)}
    assert len(slots) == 10  # ten clusters, ten slots: they can live on different masters


def test_the_list_of_clusters_is_the_one_key_outside_every_cluster_slot():
    # `PREFIX:clusters` names every cluster: it has no tag, so it must never be written in
    # the same MULTI/EXEC (or script) as a cluster's keys on Redis Cluster
    untagged = clusters_key(DEFAULT_PREFIX)
    assert "{" not in untagged
    assert key_slot(untagged.encode()) != key_slot(b"{east}")


@pytest.mark.parametrize("name", ["", "a{b", "a}b", "{east}"])
def test_a_cluster_name_that_cannot_be_a_hash_tag_is_refused(name):
    with pytest.raises(ValueError):
        check_cluster_name(name)

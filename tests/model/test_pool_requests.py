"""ResourcePoolStatusRequest records (KEP-5677, resource.k8s.io/v1alpha3 types.go) and where a
reported pool differs from the mirror's own status of it."""

from __future__ import annotations

from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.model.pool_requests import PoolDifference, differences, unreported
from dra_mirror.service.model.pool_status import PoolStatus
from dra_mirror.service.model.records import PoolStatusRequestRecord

GPU = "gpu.nvidia.com"


def status(pool: str, **counts: int | None) -> PoolStatus:
    values = {"total": 4, "allocated": 1, "available": 3, "unavailable": 0} | counts
    return PoolStatus("c", GPU, pool, 1, pool, 1, **values)


def raw(pools: list[dict], *, count: int, pool_name: str | None = None) -> dict:
    spec: dict = {"driver": GPU, "limit": 2, "defaultPartitionTypeAttribute": f"{GPU}/profile"}
    if pool_name:
        spec["poolName"] = pool_name
    return {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "ResourcePoolStatusRequest",
        "metadata": {"name": "r", "uid": "u1", "resourceVersion": "7"},
        "spec": spec,
        "status": {"poolCount": count, "pools": pools, "futureField": {"kept": "out"}},
    }


def reported(pool: str, **counts: int) -> dict:
    return {"driver": GPU, "poolName": pool, "generation": 1, "resourceSliceCount": 1,
            "nodeName": pool, "totalDevices": 4, "allocatedDevices": 1, "availableDevices": 3,
            "unavailableDevices": 0,
            "partitionSummary": [{"attribute": f"{GPU}/profile", "type": "1g.18gb",
                                  "total": 7, "allocatable": 7}]} | counts  # fmt: skip


def test_the_record_keeps_filters_answer_and_summaries():
    record = normalize("ResourcePoolStatusRequest", raw([reported("n1")], count=1), cluster="c")
    assert isinstance(record, PoolStatusRequestRecord)
    assert (record.driver, record.limit, record.default_partition_type_attribute) == (
        GPU, 2, f"{GPU}/profile",
    )  # fmt: skip
    assert record.answered and record.pool_count == 1
    [pool] = record.pools
    assert (pool.total, pool.allocated, pool.available, pool.node_name) == (4, 1, 3, "n1")
    assert pool.partition_summary[0]["type"] == "1g.18gb"


def test_differences_name_each_count_and_a_pool_the_mirror_lacks():
    record = normalize(
        "ResourcePoolStatusRequest",
        raw([reported("n1", allocatedDevices=2, availableDevices=2)], count=1),
        cluster="c",
    )
    assert isinstance(record, PoolStatusRequestRecord)
    [pool] = record.pools
    assert differences(pool, status("n1")) == [
        PoolDifference("allocatedDevices", "2", "1"),
        PoolDifference("availableDevices", "2", "3"),
    ]
    assert differences(pool, None) == [PoolDifference("pool", "n1", None)]
    incomplete = status("n1", total=None, allocated=None, available=None, unavailable=None)
    found = {d.field for d in differences(pool, incomplete)}
    assert "totalDevices" in found


def test_unreported_pools_only_when_the_answer_is_whole():
    whole = normalize("ResourcePoolStatusRequest", raw([reported("n1")], count=1), cluster="c")
    cut = normalize("ResourcePoolStatusRequest", raw([reported("n1")], count=5), cluster="c")
    one = normalize(
        "ResourcePoolStatusRequest", raw([reported("n1")], count=1, pool_name="n1"), cluster="c"
    )
    assert isinstance(whole, PoolStatusRequestRecord) and isinstance(cut, PoolStatusRequestRecord)
    assert isinstance(one, PoolStatusRequestRecord)
    mirrored = [status("n1"), status("n2")]
    assert [s.pool for s in unreported(whole, mirrored)] == ["n2"]
    assert unreported(cut, mirrored) == []  # truncated: the rest were cut, not missed
    assert unreported(one, mirrored) == []  # filtered to n1


def test_an_unanswered_request():
    body = raw([], count=0)
    del body["status"]
    record = normalize("ResourcePoolStatusRequest", body, cluster="c")
    assert isinstance(record, PoolStatusRequestRecord)
    assert (record.answered, record.pool_count, record.pools) == (False, None, ())

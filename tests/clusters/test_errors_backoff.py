"""The cluster error tree, Retry-After parsing and the backoff arithmetic (no I/O)."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import aiohttp
import orjson
import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from dra_mirror.service.clusters.backoff import Backoff
from dra_mirror.service.clusters.errors import (
    BadResponse,
    ClusterError,
    Expired,
    Forbidden,
    NotServed,
    ServerError,
    Throttled,
    TooLarge,
    Unreachable,
    from_status,
    parse_retry_after,
    translate,
)
from dra_mirror.service.clusters.resources import (
    DRA_GROUP,
    KIND_BY_PLURAL,
    WATCHED,
    collection_path,
    is_dra,
)


def status(code: int, reason: str, **details: object) -> bytes:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code}
    body |= {"reason": reason, "message": f"{reason} happened", "details": details}
    return orjson.dumps(body)


@pytest.mark.parametrize(
    ("code", "reason", "expected"),
    [
        (410, "Expired", Expired),
        (404, "NotFound", NotServed),
        (401, "Unauthorized", Forbidden),
        (403, "Forbidden", Forbidden),
        (429, "TooManyRequests", Throttled),
        (500, "InternalError", ServerError),
        (503, "ServiceUnavailable", ServerError),
        (400, "BadRequest", BadResponse),
    ],
)
def test_statuses_map_to_one_error_each(code: int, reason: str, expected: type) -> None:
    error = from_status(code, status(code, reason), {}, cluster="east", path="/api/v1/pods")
    assert type(error) is expected
    assert isinstance(error, ClusterError)
    assert (error.code, error.reason, error.cluster) == (code, reason, "east")
    assert "/api/v1/pods" in str(error) and "east" in str(error)


def test_too_large_resource_version_means_relist() -> None:
    # kube-apiserver's answer to a resourceVersion newer than it knows (etcd restored).
    body = status(504, "Timeout", causes=[{"reason": "ResourceVersionTooLarge"}])
    assert isinstance(from_status(504, body, {}), Expired)
    assert isinstance(from_status(504, status(504, "Timeout"), {}), ServerError)


def _message(code: int, message: str, **details: object) -> bytes:
    return orjson.dumps({"kind": "Status", "code": code, "message": message, "details": details})


@pytest.mark.parametrize(
    "body",
    [
        status(504, "Timeout", causes=[{"reason": "ResourceVersionTooLarge"}]),
        # 1.17-1.18: the cause's message only; before 1.17: the status message only
        _message(504, "Timeout: x", causes=[{"message": "Too large resource version"}]),
        _message(504, "Too large resource version: 159128021, current: 159127032"),
        _message(410, "too large resource version: 900"),  # other servers, the simulator
    ],
)
def test_every_form_of_too_large_is_evidence_of_a_reset(body: bytes) -> None:
    code = orjson.loads(body)["code"]
    assert type(from_status(code, body, {})) is TooLarge


def test_too_old_is_expired_not_a_reset() -> None:
    error = from_status(410, _message(410, "too old resource version: 5 (90)"), {})
    assert type(error) is Expired


def test_retry_after_from_header_or_body() -> None:
    assert from_status(429, status(429, "TooManyRequests"), {"Retry-After": "7"}).retry_after == 7
    body = status(503, "ServiceUnavailable", retryAfterSeconds=3)
    assert from_status(503, body, {}).retry_after == 3
    assert from_status(503, b"not json", {}).retry_after is None


def test_parse_retry_after_forms() -> None:
    now = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("5", now=now) == 5
    assert parse_retry_after("Sun, 29 Nov 2026 12:00:30 GMT", now=now) == 30
    assert parse_retry_after("Sun, 29 Nov 2026 11:00:00 GMT", now=now) == 0
    assert parse_retry_after("soon", now=now) is None
    assert parse_retry_after(None) is None


def test_foreign_errors_translate_once() -> None:
    api = ApiException(status=403, reason="Forbidden")
    api.body = status(403, "Forbidden")
    assert isinstance(translate(api, cluster="c"), Forbidden)
    assert isinstance(translate(ApiException(status=0, reason="no host")), Unreachable)
    assert isinstance(translate(TimeoutError()), Unreachable)
    assert isinstance(translate(aiohttp.ClientPayloadError("cut")), Unreachable)
    assert isinstance(translate(ConnectionRefusedError(111, "refused")), Unreachable)
    assert isinstance(translate(RuntimeError("?")), BadResponse)
    already = Expired("gone")
    assert translate(already) is already


def test_full_jitter_stays_under_the_doubling_ceiling() -> None:
    backoff = Backoff(base=0.5, cap=4.0, rng=random.Random(7))
    ceilings = [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    delays = [backoff.next_delay() for _ in ceilings]
    assert all(0 <= d <= c for d, c in zip(delays, ceilings, strict=True))
    assert len(set(delays)) == len(delays)  # jittered, not a fixed schedule
    assert backoff.attempt == len(ceilings)
    backoff.reset()
    assert backoff.next_delay() <= 0.5


def test_retry_after_is_obeyed_up_to_its_cap() -> None:
    backoff = Backoff(base=0.5, cap=4.0, retry_after_cap=60.0)
    assert backoff.next_delay(12.0) == 12.0  # above the computed cap: the server knows best
    assert backoff.next_delay(3600.0) == 60.0
    assert backoff.attempt == 2


def test_watched_resources() -> None:
    assert {plural for _, plural in WATCHED} == set(KIND_BY_PLURAL)
    # with DeviceTaintRule and ResourcePoolStatusRequest
    assert sum(group == DRA_GROUP for group, _ in WATCHED) == 6
    assert collection_path("DeviceTaintRule", "v1alpha3") == (
        "/apis/resource.k8s.io/v1alpha3/devicetaintrules"
    )
    assert collection_path("Pod") == "/api/v1/pods"
    assert (
        collection_path("ResourceClaim", "v1beta1")
        == "/apis/resource.k8s.io/v1beta1/resourceclaims"
    )
    assert is_dra("DeviceClass") and not is_dra("Node")
    with pytest.raises(ValueError):
        collection_path("ResourceSlice")
